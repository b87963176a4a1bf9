// Requests to a provider's HTTP API: the key in its header (never logged), the call's
// cancellation reaching the request at once, a first-byte deadline (the gRPC call's deadline, or
// the backend's provider timeout), one retry before the first byte, and the provider's failures
// mapped to status codes (errors.ts).
//
// Provider URLs are operator configuration, not user input: they do not go through the
// platform's SSRF guard, and loopback is allowed (a local Ollama is the common case).
import * as grpc from '@grpc/grpc-js';
import http from 'node:http';
import https from 'node:https';
import type { ProviderSettings } from '../config.ts';
import { describeProvider } from '../config.ts';
import { StatusError } from '../status.ts';
import { FirstByteTimeout, fromNetworkError, fromProviderStatus } from './errors.ts';

/** What every provider call carries: the gRPC call's cancellation and deadline. */
export interface CallScope {
  signal: AbortSignal;
  /** Epoch ms by which the first byte must have come; undefined: the provider timeout. */
  deadline?: number;
}

/** A provider as the engines use it. */
export interface Provider {
  settings: ProviderSettings;
  /** `openai provider at host (model m)`: for messages; never the key. */
  what: string;
  /** Headers that authenticate (the key), per the provider's style. */
  auth(): Record<string, string>;
  /** Longest wait for a first byte when the call has no deadline. */
  firstByteTimeoutMs: number;
  /** Its keep-alive connections. */
  agents: { http: http.Agent; https: https.Agent };
  /** Closes its idle connections (the backend is closing). */
  close(): void;
}

export function providerOf(settings: ProviderSettings, firstByteTimeoutMs: number, style: 'bearer' | 'xi-api-key'): Provider {
  // node:http with keep-alive rather than fetch: a third of the CPU per request (measured here:
  // ~0.06 ms against ~0.34 ms per small request, both sides), which counts at 50 calls at once.
  const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  return {
    settings,
    agents,
    close: () => {
      agents.http.destroy();
      agents.https.destroy();
    },
    what: describeProvider(settings),
    firstByteTimeoutMs,
    auth: (): Record<string, string> => {
      if (!settings.apiKey) return {};
      return style === 'bearer' ? { Authorization: `Bearer ${settings.apiKey}` } : { 'xi-api-key': settings.apiKey };
    },
  };
}

/** How long a response the caller stopped reading may take to end before its connection is closed. */
const END_GRACE_MS = 1000;

/** Pause between the failed attempt and the retry. */
const RETRY_PAUSE_MS = 100;

/**
 * An open provider response whose body is read as it streams. The first-byte deadline holds
 * until the first body bytes arrive (a server that answers its headers at once and its audio
 * later is still slow); `close()` ends the request (always call it, or read to the end).
 */
export interface ProviderResponse {
  status: number;
  headers: { get(name: string): string | null };
  /** The body, chunk by chunk; throws the mapped status on a failure mid-stream. */
  body: AsyncIterable<Uint8Array>;
  close(): void;
}

/** Milliseconds until the first byte is due. */
export function firstByteBudget(p: Provider, scope: CallScope): number {
  const fallback = Date.now() + p.firstByteTimeoutMs;
  return Math.max(0, (scope.deadline !== undefined ? Math.min(scope.deadline, fallback) : fallback) - Date.now());
}

export interface RequestInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

/**
 * Sends one request. `idempotent`: a refused connection, a reset or a 5xx before any byte of
 * the body is tried once more. Resolves with a 2xx response; any other status is thrown mapped.
 */
export async function providerRequest(p: Provider, url: string, init: RequestInit, scope: CallScope, idempotent = true): Promise<ProviderResponse> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await attemptOnce(p, url, init, scope);
    } catch (err) {
      if (scope.signal.aborted) throw scope.signal.reason;
      const retryable = err instanceof StatusError && err.code === grpc.status.UNAVAILABLE;
      if (!idempotent || attempt > 0 || !retryable || firstByteBudget(p, scope) <= RETRY_PAUSE_MS) throw err;
      await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
    }
  }
}

function attemptOnce(p: Provider, url: string, init: RequestInit, scope: CallScope): Promise<ProviderResponse> {
  return new Promise<ProviderResponse>((resolve, reject) => {
    if (scope.signal.aborted) return reject(scope.signal.reason);
    const u = new URL(url);
    const secure = u.protocol === 'https:';
    const body = init.body === undefined ? undefined : typeof init.body === 'string' ? Buffer.from(init.body) : init.body;
    const headers: Record<string, string | number> = { ...init.headers, ...p.auth() };
    if (body) headers['Content-Length'] = body.byteLength;
    const req = (secure ? https : http).request(u, { method: init.method ?? 'POST', headers, agent: secure ? p.agents.https : p.agents.http });
    let reason: unknown = null;
    let gotFirst = false;
    let settled = false;
    const stop = (why: unknown) => {
      reason ??= why;
      req.destroy(why instanceof Error ? why : new Error(String(why)));
    };
    const onAbort = () => stop(scope.signal.reason);
    scope.signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => stop(new FirstByteTimeout(p.what)), firstByteBudget(p, scope));
    const done = () => {
      clearTimeout(timer);
      scope.signal.removeEventListener('abort', onAbort);
    };
    /** A failure as the caller sees it: its own cancellation as it is, else the mapped status. */
    const mapped = (err: unknown, midStream: boolean) => {
      if (reason !== null && !(reason instanceof FirstByteTimeout) && scope.signal.aborted) return scope.signal.reason;
      if (reason instanceof FirstByteTimeout) return fromNetworkError(p.what, reason);
      if (reason instanceof StatusError) return reason;
      if (midStream) return new StatusError(grpc.status.UNAVAILABLE, `${p.what} broke off the response`);
      return fromNetworkError(p.what, err);
    };
    req.on('error', (err) => {
      if (settled) return;
      settled = true;
      done();
      reject(mapped(err, false));
    });
    req.on('response', (res) => {
      const status = res.statusCode ?? 502;
      const get = (name: string) => {
        const v = res.headers[name.toLowerCase()];
        return v === undefined ? null : Array.isArray(v) ? v.join(', ') : String(v);
      };
      if (status < 200 || status >= 300) {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => {
          if (settled) return;
          settled = true;
          done();
          reject(fromProviderStatus(p.what, status, Buffer.concat(parts).toString('utf8'), { get }));
        });
        res.on('error', () => {});
        return;
      }
      settled = true;
      let left = false;
      /**
       * The caller is done with the response. Unfinished (a chat answer's `[DONE]` read before
       * the response's last bytes came), it is read to its end for a moment so its connection
       * can serve the next request (a new connection costs both sides more than the request),
       * else closed; after a failure it is closed at once.
       */
      const leave = (failed: boolean) => {
        done();
        if (left) return;
        left = true;
        if (failed || res.destroyed) {
          if (!res.complete) req.destroy();
          return;
        }
        if (!res.complete) {
          const t = setTimeout(() => req.destroy(), END_GRACE_MS);
          res.once('end', () => clearTimeout(t));
          res.once('error', () => clearTimeout(t));
        }
        // Read to the end as the iterator did (it leaves the stream in 'readable' mode, where
        // resume() does nothing): the response ends and frees its connection.
        const drain = () => {
          while (res.read() !== null);
        };
        res.on('readable', drain);
        drain();
      };
      resolve({
        status,
        headers: { get },
        body: {
          async *[Symbol.asyncIterator]() {
            let failed = false;
            try {
              // Not destroyed when the caller stops reading early: `leave` decides.
              for await (const chunk of res.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
                if (!gotFirst) {
                  gotFirst = true;
                  clearTimeout(timer);
                }
                yield new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
              }
              if (!res.complete) throw new Error('response cut');
            } catch (err) {
              failed = true;
              throw mapped(err, gotFirst);
            } finally {
              leave(failed);
            }
          },
        },
        close: () => leave(false),
      });
    });
    req.end(body);
  });
}

/** A multipart/form-data body: text fields and one file. */
export function multipart(fields: [string, string][], file: { name: string; filename: string; type: string; data: Uint8Array }): { body: Uint8Array; contentType: string } {
  const boundary = `----parley${Math.random().toString(16).slice(2)}${Date.now().toString(16)}`;
  const parts: Buffer[] = [];
  for (const [k, v] of fields) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${file.name}"; filename="${file.filename}"\r\nContent-Type: ${file.type}\r\n\r\n`));
  parts.push(Buffer.from(file.data.buffer, file.data.byteOffset, file.data.byteLength));
  parts.push(Buffer.from(`\r\n--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** Reads a whole JSON response. */
export async function readJson(res: ProviderResponse): Promise<unknown> {
  const parts: Uint8Array[] = [];
  for await (const c of res.body) parts.push(c);
  const text = Buffer.concat(parts).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    throw new StatusError(grpc.status.UNAVAILABLE, 'provider answered with something that is not JSON');
  }
}

/** A ws:// or wss:// URL for a provider's http(s) base plus `path`. */
export function socketUrl(base: string, path: string): string {
  return base.replace(/^http/, 'ws') + path;
}
