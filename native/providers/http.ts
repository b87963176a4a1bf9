// Requests to a provider's HTTP API: the key in its header (never logged), the call's
// cancellation reaching the request at once, a first-byte deadline (the gRPC call's deadline, or
// the backend's provider timeout), one retry before the first byte, and the provider's failures
// mapped to status codes (errors.ts).
//
// Provider URLs are operator configuration, not user input: they do not go through the
// platform's SSRF guard, and loopback is allowed (a local Ollama is the common case).
import * as grpc from '@grpc/grpc-js';
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
}

export function providerOf(settings: ProviderSettings, firstByteTimeoutMs: number, style: 'bearer' | 'xi-api-key'): Provider {
  return {
    settings,
    what: describeProvider(settings),
    firstByteTimeoutMs,
    auth: (): Record<string, string> => {
      if (!settings.apiKey) return {};
      return style === 'bearer' ? { Authorization: `Bearer ${settings.apiKey}` } : { 'xi-api-key': settings.apiKey };
    },
  };
}

/** Pause between the failed attempt and the retry. */
const RETRY_PAUSE_MS = 100;

/**
 * An open provider response whose body is read as it streams. The first-byte deadline holds
 * until the first body bytes arrive (a server that answers its headers at once and its audio
 * later is still slow); `close()` ends the request (always call it, or read to the end).
 */
export interface ProviderResponse {
  status: number;
  headers: Headers;
  /** The body, chunk by chunk; throws the mapped status on a failure mid-stream. */
  body: AsyncIterable<Uint8Array>;
  close(): void;
}

/** Milliseconds until the first byte is due. */
export function firstByteBudget(p: Provider, scope: CallScope): number {
  const fallback = Date.now() + p.firstByteTimeoutMs;
  return Math.max(0, (scope.deadline !== undefined ? Math.min(scope.deadline, fallback) : fallback) - Date.now());
}

/**
 * Sends one request. `idempotent`: a refused connection, a reset or a 5xx before any byte of
 * the body is tried once more. Resolves with a 2xx response; any other status is thrown mapped.
 */
export async function providerRequest(p: Provider, url: string, init: { method?: string; headers?: Record<string, string>; body?: BodyInit }, scope: CallScope, idempotent = true): Promise<ProviderResponse> {
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

async function attemptOnce(p: Provider, url: string, init: { method?: string; headers?: Record<string, string>; body?: BodyInit }, scope: CallScope): Promise<ProviderResponse> {
  const ac = new AbortController();
  const onAbort = () => ac.abort(scope.signal.reason);
  if (scope.signal.aborted) throw scope.signal.reason;
  scope.signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => ac.abort(new FirstByteTimeout(p.what)), firstByteBudget(p, scope));
  const done = () => {
    clearTimeout(timer);
    scope.signal.removeEventListener('abort', onAbort);
  };
  let res: Response;
  try {
    res = await fetch(url, { method: init.method ?? 'POST', headers: { ...init.headers, ...p.auth() }, body: init.body, signal: ac.signal });
  } catch (err) {
    done();
    throw mapFailure(p, ac.signal, err);
  }
  if (res.status < 200 || res.status >= 300) {
    let text = '';
    try {
      text = await res.text();
    } catch {
      // the error body is only for the message
    }
    done();
    throw fromProviderStatus(p.what, res.status, text, res.headers);
  }
  const reader = res.body?.getReader();
  let first = true;
  const body: AsyncIterable<Uint8Array> = {
    async *[Symbol.asyncIterator]() {
      if (!reader) {
        done();
        return;
      }
      try {
        for (;;) {
          let r: ReadableStreamReadResult<Uint8Array>;
          try {
            r = await reader.read();
          } catch (err) {
            throw mapFailure(p, ac.signal, err, !first);
          }
          if (first) {
            first = false;
            clearTimeout(timer);
          }
          if (r.done) return;
          yield r.value;
        }
      } finally {
        done();
        if (!ac.signal.aborted) ac.abort(new Error('response closed'));
      }
    },
  };
  return {
    status: res.status,
    headers: res.headers,
    body,
    close: () => {
      done();
      if (!ac.signal.aborted) ac.abort(new Error('response closed'));
    },
  };
}

/** A fetch or body failure: the caller's cancellation as it is, else the mapped status. */
function mapFailure(p: Provider, signal: AbortSignal, err: unknown, midStream = false): unknown {
  if (signal.aborted && !(signal.reason instanceof FirstByteTimeout)) return signal.reason;
  if (signal.aborted) return fromNetworkError(p.what, signal.reason);
  if (midStream) return new StatusError(grpc.status.UNAVAILABLE, `${p.what} broke off the response`);
  return fromNetworkError(p.what, err);
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
