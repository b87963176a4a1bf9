/**
 * The one outbound HTTP client (tools, webhooks, custom LLM). The SSRF guard runs twice per
 * hop: the URL is checked statically (`checkUrl`), then the socket's own DNS lookup checks
 * every resolved address before a connection is attempted. Checking inside the lookup the
 * socket uses, rather than resolving once beforehand, leaves no gap for DNS rebinding: the
 * addresses checked are the addresses connected to.
 */
import { promises as dns } from 'node:dns';
import type { LookupAddress, LookupOptions } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { ServiceError, type Code } from '../errors.ts';
import { classifyAddress, describeRange } from './address.ts';
import { checkUrl, isAllowListed, parseAllowList } from './url-check.ts';

/** Stable machine-readable reason of an outbound failure, kept in the tool-call history. */
export type OutboundReason =
  | 'invalid_url' // unparsable, not http(s), embedded credentials
  | 'invalid_request' // bad method, header or option supplied by the caller
  | 'ssrf_blocked' // destination refused by the guard (URL or resolved address)
  | 'dns_failed' // the name did not resolve
  | 'connect_failed' // refused, reset or TLS failure before a response
  | 'response_failed' // the connection broke while the response was read
  | 'bad_redirect' // a redirect without a usable Location
  | 'too_many_redirects'
  | 'timeout'
  | 'aborted'; // the caller's AbortSignal fired

/** A ServiceError with the stable `reason` the tool-call history records. */
export class OutboundError extends ServiceError {
  constructor(
    code: Code,
    message: string,
    readonly reason: OutboundReason,
    options?: ErrorOptions,
  ) {
    super(code, message, options);
    this.name = 'OutboundError';
  }
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface OutboundInit {
  method?: string;
  /** Sent exactly as given (name case and value); Host, Connection and Content-Length are added when absent. */
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Deadline for the whole exchange: every hop, connect, and reading the body. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** Redirects followed, each checked again; one more is an error. Default 3. */
  maxRedirects?: number;
  /** Response bytes kept; the rest is not read and `truncated` is set. Default 10 MiB. */
  maxResponseBytes?: number;
}

export interface OutboundOptions {
  /** `host:port` entries exempt from the guard; defaults to `PARLEY_OUTBOUND_ALLOW`. */
  allow?: string[];
  /** Name resolution; defaults to the system resolver (`dns.lookup`). Tests inject one. */
  lookup?: Resolver;
}

export interface OutboundResponse {
  status: number;
  /** Lower-case names; repeated headers joined with `, `. */
  headers: Record<string, string>;
  body: Buffer;
  truncated: boolean;
  latencyMs: number;
  /** The final URL, after redirects. */
  url: string;
}

export const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Headers that survive a redirect to another origin; everything else may carry a secret. */
const CROSS_ORIGIN_SAFE = new Set(['accept', 'accept-language', 'content-type', 'user-agent']);

/** The system resolver (`dns.lookup`, every address). Shared with `stream.ts`. */
export const systemResolver: Resolver = async (hostname) => {
  const found = await dns.lookup(hostname, { all: true, verbatim: true });
  return found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/** Raised inside the socket's lookup; the request's error handler turns it into `ssrf_blocked`. */
class BlockedAddressError extends Error {
  readonly code = 'ssrf_blocked';
  constructor(
    readonly range: string,
    address: string,
  ) {
    super(`resolved address ${address} is not public (${range})`);
  }
}

/** The socket's own lookup: every resolved address must be public unless `exempt` (allow-listed). Shared with `stream.ts`. */
export function guardedLookup(resolve: Resolver, exempt: boolean): LookupFunction {
  return (hostname: string, options: LookupOptions, callback) => {
    resolve(hostname).then(
      (found) => {
        const usable = found.filter((a) => isIP(a.address) !== 0);
        if (usable.length === 0) {
          const err = Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' });
          return callback(err, '', 0);
        }
        if (!exempt) {
          // Any private answer refuses the whole name: a round-robin mixing public and
          // private addresses is exactly what a rebinding attack looks like.
          for (const a of usable) {
            const verdict = classifyAddress(a.address);
            if (!verdict.allowed) return callback(new BlockedAddressError(verdict.range, a.address), '', 0);
          }
        }
        const wanted = options.family === 4 || options.family === 6 ? usable.filter((a) => a.family === options.family) : usable;
        const list = wanted.length > 0 ? wanted : usable;
        if (options.all) return callback(null, list as LookupAddress[]);
        return callback(null, list[0].address, list[0].family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
}

interface HopResult {
  status: number;
  headers: Record<string, string>;
  location?: string;
  body: Buffer;
  truncated: boolean;
}

interface Hop {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body?: Buffer;
  lookup: LookupFunction;
  maxBytes: number;
  signal: AbortSignal;
  cancelled: () => OutboundError;
}

function flattenHeaders(raw: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** Maps a socket or lookup failure to an `OutboundError`. Shared with `stream.ts`. */
export function transportError(err: NodeJS.ErrnoException, gotResponse: boolean): OutboundError {
  if (err instanceof BlockedAddressError) {
    return new OutboundError('bad_request', `Outbound request blocked: host resolves to a non-public address (${describeRange(err.range)})`, 'ssrf_blocked', { cause: err });
  }
  if (gotResponse) return new OutboundError('upstream', 'Outbound response was interrupted', 'response_failed', { cause: err });
  if (err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN' || err.code === 'ENODATA') {
    return new OutboundError('upstream', 'Outbound host name did not resolve', 'dns_failed', { cause: err });
  }
  return new OutboundError('upstream', `Outbound connection failed${err.code ? ` (${err.code})` : ''}`, 'connect_failed', { cause: err });
}

/** One request/response exchange, no redirect handling. Redirect bodies are not read. */
function exchange(hop: Hop): Promise<HopResult> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let res: http.IncomingMessage | undefined;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      hop.signal.removeEventListener('abort', onAbort);
      fn();
    };
    const onAbort = () => {
      finish(() => reject(hop.cancelled()));
      req.destroy();
      res?.destroy();
    };

    if (hop.signal.aborted) {
      reject(hop.cancelled());
      return;
    }
    const mod = hop.url.protocol === 'https:' ? https : http;
    let req: http.ClientRequest;
    try {
      req = mod.request({
        protocol: hop.url.protocol,
        hostname: hop.url.hostname.replace(/^\[|\]$/g, ''),
        port: hop.url.port || undefined,
        path: `${hop.url.pathname}${hop.url.search}`,
        method: hop.method,
        headers: hop.headers,
        lookup: hop.lookup,
        agent: false, // a fresh socket per exchange: nothing pooled outlives the call
      });
    } catch (err) {
      // Node validates method and header names and values synchronously.
      reject(new OutboundError('bad_request', 'Outbound request has an invalid method or header', 'invalid_request', { cause: err }));
      return;
    }
    hop.signal.addEventListener('abort', onAbort, { once: true });

    req.on('error', (err: NodeJS.ErrnoException) => finish(() => reject(transportError(err, res !== undefined))));
    req.on('response', (response) => {
      res = response;
      const status = response.statusCode ?? 0;
      const headers = flattenHeaders(response.headers);
      if (REDIRECTS.has(status) && response.headers.location !== undefined) {
        finish(() => resolve({ status, headers, location: response.headers.location, body: Buffer.alloc(0), truncated: false }));
        response.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      response.on('data', (chunk: Buffer) => {
        if (settled) return;
        const room = hop.maxBytes - size;
        if (chunk.length > room) {
          if (room > 0) chunks.push(chunk.subarray(0, room));
          size += Math.max(room, 0);
          truncated = true;
          finish(() => resolve({ status, headers, body: Buffer.concat(chunks, size), truncated }));
          response.destroy(); // stop reading: the rest is never buffered
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      response.on('end', () => finish(() => resolve({ status, headers, body: Buffer.concat(chunks, size), truncated })));
      response.on('error', (err: NodeJS.ErrnoException) => finish(() => reject(transportError(err, true))));
      response.on('close', () => {
        if (!response.complete) finish(() => reject(transportError(Object.assign(new Error('response closed early'), { code: 'ECONNRESET' }), true)));
      });
    });
    req.end(hop.body);
  });
}

function toBuffer(body: string | Uint8Array | undefined): Buffer | undefined {
  if (body === undefined) return undefined;
  return typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

function hasHeader(headers: Record<string, string>, name: string): boolean {
  return Object.keys(headers).some((k) => k.toLowerCase() === name);
}

function withoutHeaders(headers: Record<string, string>, keep: (lower: string) => boolean): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => keep(k.toLowerCase())));
}

/**
 * Send one HTTP request through the SSRF guard and read the response into memory.
 *
 * Every hop (the first URL and each redirect) passes `checkUrl`, and every address its host
 * resolves to must be public unless the hop's exact `host:port` is allow-listed
 * (`opts.allow`, else `PARLEY_OUTBOUND_ALLOW`). Redirects 301/302/303 turn a non-GET/HEAD
 * request into a body-less GET (as browsers do); 307/308 resend method and body. A redirect
 * to another origin keeps only Accept, Accept-Language, Content-Type and User-Agent, so a
 * credential header never reaches a host the caller did not name.
 *
 * Throws `OutboundError` (a `ServiceError`): `bad_request` for a refused destination or an
 * invalid request, `timeout` when `timeoutMs` elapses, `upstream` for DNS, connection,
 * redirect and abort failures. The error's `reason` is stable; its message never contains
 * a resolved address (that is in `cause`, for logs).
 */
export async function outboundFetch(url: string, init: OutboundInit, opts: OutboundOptions = {}): Promise<OutboundResponse> {
  const started = performance.now();
  if (!(Number.isFinite(init.timeoutMs) && init.timeoutMs > 0)) {
    throw new OutboundError('bad_request', 'Outbound timeout must be a positive number of milliseconds', 'invalid_request');
  }
  const allow = opts.allow ?? parseAllowList();
  const resolver = opts.lookup ?? systemResolver;
  const maxRedirects = init.maxRedirects ?? 3;
  const maxBytes = init.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;

  const cancel = new AbortController();
  let timedOut = false;
  const cancelled = () =>
    timedOut
      ? new OutboundError('timeout', `Outbound request timed out after ${init.timeoutMs} ms`, 'timeout')
      : new OutboundError('upstream', 'Outbound request was aborted', 'aborted', { cause: init.signal?.reason });
  if (init.signal?.aborted) throw cancelled();
  const timer = setTimeout(() => {
    timedOut = true;
    cancel.abort();
  }, Math.min(init.timeoutMs, 2 ** 31 - 1)); // setTimeout fires at once beyond 2^31-1
  const onCallerAbort = () => cancel.abort();
  init.signal?.addEventListener('abort', onCallerAbort, { once: true });

  let method = (init.method ?? 'GET').toUpperCase();
  let headers = { ...init.headers };
  let body = toBuffer(init.body);
  let current = url;
  try {
    for (let redirects = 0; ; redirects++) {
      const check = checkUrl(current, { allow });
      if (!check.ok) {
        const reason = check.kind === 'blocked' ? 'ssrf_blocked' : 'invalid_url';
        throw new OutboundError('bad_request', `Outbound request blocked: ${check.reason}`, reason);
      }
      const target = check.url;
      const hopHeaders = body !== undefined && !hasHeader(headers, 'content-length') ? { ...headers, 'Content-Length': String(body.length) } : headers;
      const result = await exchange({
        url: target,
        method,
        headers: hopHeaders,
        body,
        lookup: guardedLookup(resolver, isAllowListed(target, allow)),
        maxBytes,
        signal: cancel.signal,
        cancelled,
      });
      if (result.location === undefined) {
        return { status: result.status, headers: result.headers, body: result.body, truncated: result.truncated, latencyMs: performance.now() - started, url: target.href };
      }
      if (redirects >= maxRedirects) {
        throw new OutboundError('upstream', `Outbound request exceeded ${maxRedirects} redirects`, 'too_many_redirects');
      }
      let next: URL;
      try {
        next = new URL(result.location, target);
      } catch {
        throw new OutboundError('upstream', 'Outbound redirect has an invalid Location', 'bad_redirect');
      }
      if (result.status === 303 ? method !== 'HEAD' : (result.status === 301 || result.status === 302) && method === 'POST') {
        method = 'GET';
        body = undefined;
        headers = withoutHeaders(headers, (h) => !h.startsWith('content-'));
      }
      if (next.origin !== target.origin) headers = withoutHeaders(headers, (h) => CROSS_ORIGIN_SAFE.has(h));
      current = next.href;
    }
  } finally {
    clearTimeout(timer);
    init.signal?.removeEventListener('abort', onCallerAbort);
  }
}
