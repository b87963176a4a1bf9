/**
 * The streaming half of the outbound client: one request through the same SSRF guard as
 * `outboundFetch` (the static `checkUrl`, then the socket's own lookup checking every
 * resolved address), with the response body handed over as it arrives instead of buffered.
 * Used for server-sent events (custom LLM endpoints), where the first token matters and the
 * whole body may take many seconds.
 *
 * Redirects are not followed: a streamed POST carries credentials and a body, and an
 * OpenAI-compatible endpoint has no reason to redirect; a 3xx comes back as the status.
 */
import http from 'node:http';
import https from 'node:https';
import { guardedLookup, OutboundError, systemResolver, transportError, type OutboundOptions } from './fetch.ts';
import { checkUrl, isAllowListed, parseAllowList } from './url-check.ts';

export interface OutboundStreamInit {
  method?: string;
  /** Sent exactly as given; Host, Connection and Content-Length are added when absent. */
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Deadline for connecting and receiving the response headers. */
  headersTimeoutMs: number;
  /** Longest silence allowed between two body chunks once the response has started. */
  idleTimeoutMs: number;
  signal?: AbortSignal;
}

export interface OutboundStream {
  status: number;
  /** Lower-case names; repeated headers joined with `, `. */
  headers: Record<string, string>;
  url: string;
  /** Request start → response headers. */
  latencyMs: number;
  /**
   * The body, chunk by chunk. Iterating throws `OutboundError`: `timeout` after
   * `idleTimeoutMs` of silence, `aborted` when the signal fires, `response_failed` when the
   * connection breaks before the body is complete. Read it once.
   */
  body: AsyncIterable<Buffer>;
  /** Stops reading and closes the connection (safe to call at any time, more than once). */
  close(): void;
}

/**
 * Sends one request through the SSRF guard and resolves when the response headers arrive.
 * Rejects with `OutboundError` like `outboundFetch` (`ssrf_blocked`, `invalid_url`,
 * `dns_failed`, `connect_failed`, `timeout`, `aborted`, `invalid_request`).
 */
export function outboundStream(url: string, init: OutboundStreamInit, opts: OutboundOptions = {}): Promise<OutboundStream> {
  const started = performance.now();
  for (const ms of [init.headersTimeoutMs, init.idleTimeoutMs]) {
    if (!(Number.isFinite(ms) && ms > 0)) return Promise.reject(new OutboundError('bad_request', 'Outbound timeouts must be positive numbers of milliseconds', 'invalid_request'));
  }
  const allow = opts.allow ?? parseAllowList();
  const check = checkUrl(url, { allow });
  if (!check.ok) {
    return Promise.reject(new OutboundError('bad_request', `Outbound request blocked: ${check.reason}`, check.kind === 'blocked' ? 'ssrf_blocked' : 'invalid_url'));
  }
  const target = check.url;
  const aborted = () => new OutboundError('upstream', 'Outbound request was aborted', 'aborted', { cause: init.signal?.reason });
  if (init.signal?.aborted) return Promise.reject(aborted());
  const body = init.body === undefined ? undefined : typeof init.body === 'string' ? Buffer.from(init.body, 'utf8') : Buffer.from(init.body.buffer, init.body.byteOffset, init.body.byteLength);
  const headers = { ...init.headers };
  if (body && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-length')) headers['Content-Length'] = String(body.length);

  return new Promise<OutboundStream>((resolve, reject) => {
    let req: http.ClientRequest;
    let res: http.IncomingMessage | undefined;
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const cleanup = () => {
      clearTimeout(timer);
      init.signal?.removeEventListener('abort', onAbort);
    };
    // Before the headers: reject. After: destroy the body with the error, so iteration throws it.
    const fail = (err: OutboundError) => {
      if (!settled) {
        settled = true;
        cleanup();
        reject(err);
        req?.destroy();
        return;
      }
      cleanup();
      if (res && !res.destroyed) res.destroy(err);
      req.destroy();
    };
    const onAbort = () => fail(aborted());
    const arm = (ms: number) => {
      clearTimeout(timer);
      timer = setTimeout(() => fail(new OutboundError('timeout', `Outbound request timed out after ${ms} ms`, 'timeout')), Math.min(ms, 2 ** 31 - 1));
    };
    try {
      req = (target.protocol === 'https:' ? https : http).request({
        protocol: target.protocol,
        hostname: target.hostname.replace(/^\[|\]$/g, ''),
        port: target.port || undefined,
        path: `${target.pathname}${target.search}`,
        method: (init.method ?? 'GET').toUpperCase(),
        headers,
        lookup: guardedLookup(opts.lookup ?? systemResolver, isAllowListed(target, allow)),
        agent: false, // a fresh socket per request: nothing pooled outlives the call
      });
    } catch (err) {
      reject(new OutboundError('bad_request', 'Outbound request has an invalid method or header', 'invalid_request', { cause: err }));
      return;
    }
    init.signal?.addEventListener('abort', onAbort, { once: true });
    arm(init.headersTimeoutMs);
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err instanceof OutboundError) return;
      fail(transportError(err, res !== undefined));
    });
    req.on('response', (response) => {
      res = response;
      settled = true;
      arm(init.idleTimeoutMs);
      const flat: Record<string, string> = {};
      for (const [k, v] of Object.entries(response.headers)) if (v !== undefined) flat[k] = Array.isArray(v) ? v.join(', ') : v;
      async function* chunks(): AsyncGenerator<Buffer> {
        try {
          for await (const chunk of response) {
            arm(init.idleTimeoutMs);
            yield chunk as Buffer;
          }
          if (!response.complete) throw transportError(Object.assign(new Error('response closed early'), { code: 'ECONNRESET' }), true);
        } catch (err) {
          if (err instanceof OutboundError) throw err;
          throw transportError(err as NodeJS.ErrnoException, true);
        } finally {
          cleanup();
          response.destroy();
          req.destroy();
        }
      }
      resolve({
        status: response.statusCode ?? 0,
        headers: flat,
        url: target.href,
        latencyMs: performance.now() - started,
        body: chunks(),
        close: () => {
          cleanup();
          response.destroy();
          req.destroy();
        },
      });
    });
    req.end(body);
  });
}
