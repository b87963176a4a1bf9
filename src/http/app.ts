import { createRequire } from 'node:module';
import { STATUS_CODES } from 'node:http';
import { randomUUID } from 'node:crypto';
import uws from 'uWebSockets.js';
import { ServiceError, toServiceError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { AUTH_MESSAGES, requireBeta, type Authenticate } from '../auth/principal.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { JSON_BODY_LIMIT, formFields, isJson, isMsgpack, mediaType, parseJson, parseMsgpack, parseMultipart, type Form } from './body.ts';
import { pageRequest } from './pagination.ts';
import { Reply } from './reply.ts';
import { parse } from '../validation.ts';
import { Router, type Ctx, type Input, type Method, type Principal, type RouteInput, type RouteSpec } from './router.ts';
import { guardFrames } from './ws-frames.ts';

/** uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT: listen without SO_REUSEPORT. */
const LISTEN_EXCLUSIVE_PORT = 1;

/**
 * Whether the real uWebSockets.js binding loaded. The trufflesuite build silently falls back
 * to a slow `ws`-based imitation when its binary cannot load; the native module's path ends
 * in `.node`, so we look for it among loaded modules.
 */
export function uwsBinding(): { native: boolean; reason?: string } {
  const require = createRequire(import.meta.url);
  const loaded = Object.keys(require.cache).some((p) => /uWebSockets\.js|uws-js-unofficial/.test(p) && p.endsWith('.node'));
  if (loaded) return { native: true };
  return {
    native: false,
    reason: `uWebSockets.js native binding did not load for ${process.platform}-${process.arch} (ABI ${process.versions.modules}); serving through the slow ws fallback`,
  };
}

export type { Authenticate } from '../auth/principal.ts';

/**
 * A compat family's error body for errors the HTTP layer itself answers under its prefix
 * (unknown path 404, 405, body over the route limit 413, starting 503, ...), so a client
 * of that family parses every error it can get. Routes that answer their own errors are
 * not affected.
 */
export type ErrorEnvelope = (e: ServiceError) => { status: number; body: unknown; headers?: Record<string, string> };

export interface HttpAppOptions {
  log: Logger;
  metrics: Metrics;
  authenticate: Authenticate;
  /** Bound on waiting for in-flight requests at shutdown. */
  drainTimeoutMs?: number;
  /** A request body not complete this long after the headers → 408, connection closed (default 120 s; 0: none). */
  bodyTimeoutMs?: number;
  /** Sockets that authenticate or start in their first message must send it within this (default 10 s; 0: none). */
  wsStartTimeoutMs?: number;
  /** A WebSocket past its high-water mark this long without a drain is closed 4008 (default 30 s; 0: never). */
  wsStallTimeoutMs?: number;
}

/** `HttpAppOptions.bodyTimeoutMs` default (`PARLEY_BODY_TIMEOUT_MS`). */
export const BODY_TIMEOUT_MS = 120_000;
/** `HttpAppOptions.wsStartTimeoutMs` default (`PARLEY_WS_START_TIMEOUT_MS`). */
export const WS_START_TIMEOUT_MS = 10_000;
/** `HttpAppOptions.wsStallTimeoutMs` default (`PARLEY_WS_STALL_TIMEOUT_MS`). */
export const WS_STALL_TIMEOUT_MS = 30_000;

/** Close code and reason of a WebSocket the platform closes because it is shutting down (RFC 6455 "going away"). */
export const WS_GOING_AWAY = { code: 1001, reason: 'Server shutting down' } as const;
/**
 * How long shutdown leaves the WebSockets it closed to finish their closing handshake (the
 * client's close frame, then FIN) before the server's last sockets are cut: closing a socket
 * whose client is still sending resets it, and a reset can discard the close frame not yet
 * delivered. Counted from the last close; bounded by the drain timeout.
 */
export const WS_CLOSE_LINGER_MS = 500;

/**
 * Who closes a WebSocket route's sockets at shutdown (`HttpApp.ws`, `HttpApp.close`):
 * - `going-away`: the HTTP layer, with 1001 `Server shutting down`, as soon as in-flight
 *   requests are done and before any module closes (the socket never sees its dependencies
 *   vanish under it);
 * - `owner`: the feature's own close ends them with its documented code while the modules
 *   close (sessions: `session.ended` then 1000 `shutdown`); any still open afterwards get 1001.
 */
export type WsShutdown = 'going-away' | 'owner';

/** Headers read one by one when the ws-based fallback (which lacks `forEach`) is serving. */
const FALLBACK_HEADERS = ['authorization', 'content-type', 'content-length', 'transfer-encoding', 'x-request-id', 'origin', 'host', 'traceparent', 'model', 'xi-api-key', 'accept', 'user-agent', 'x-forwarded-proto', 'access-control-request-headers', 'idempotency-key', 'sec-websocket-key', 'sec-websocket-protocol', 'sec-websocket-extensions'];

// The trufflesuite fallback imitation throws on getQuery (it parses a relative URL) and has
// no forEach; the native binding never throws here. Degraded, the server still answers.
/** The query string of a request (HTTP or WebSocket upgrade), safe on the fallback binding. */
export function readQuery(req: uws.HttpRequest): string {
  try {
    return req.getQuery() ?? '';
  } catch {
    const url = (req as unknown as { request?: { url?: string } }).request?.url ?? '';
    const i = url.indexOf('?');
    return i >= 0 ? url.slice(i + 1) : '';
  }
}

/** The WebSocket handshake fields of an upgrade request (copy them before the upgrade callback returns). */
export interface Handshake {
  key: string;
  protocol: string;
  extensions: string;
}

export function readHandshake(req: uws.HttpRequest): Handshake {
  return { key: req.getHeader('sec-websocket-key'), protocol: req.getHeader('sec-websocket-protocol'), extensions: req.getHeader('sec-websocket-extensions') };
}

/** The upgrade request whose route `upgrade` callback is running now (its synchronous part). */
let upgradingNow: uws.HttpResponse | undefined;

export interface AcceptUpgradeOptions {
  /** The one subprotocol to answer (default: the client's header as sent). */
  protocol?: string;
  /** The route's onAborted flag: a deferred upgrade whose client left is not made. */
  aborted?: () => boolean;
  /** Runs instead of the upgrade when the client left meanwhile (release what `data` holds). */
  abandoned?: () => void;
}

/**
 * Completes an upgrade with the connection's `data`. Called from inside the route's
 * `upgrade` callback it upgrades at once; called later (after an await) it upgrades from the
 * next macrotask (`setImmediate`), outside uWebSockets.js's HTTP parsing. uWS v20.30 keeps one
 * "parsing HTTP" flag per app: an upgrade resumed in the microtasks of ANOTHER connection's
 * request handler is taken for that connection's upgrade and aborts the process
 * (docs/reliability.md "Async WebSocket upgrades"; test/http/async-upgrade.test.ts).
 */
export function acceptUpgrade<T>(res: uws.HttpResponse, hs: Handshake, data: T, context: uws.us_socket_context_t, o: AcceptUpgradeOptions = {}): void {
  const protocol = o.protocol ?? hs.protocol;
  const upgrade = () => res.upgrade<T>(data, hs.key, protocol, hs.extensions, context);
  if (res === upgradingNow) {
    // Inside uWS's own callback the socket is corked already.
    upgrade();
    return;
  }
  setImmediate(() => {
    if (o.aborted?.()) return o.abandoned?.();
    try {
      // Not inside `res.cork`: uWS v20.30's cork, after an upgrade that left the socket at the
      // same address, runs its HTTP connection-close logic on the new WebSocket and can close it
      // right after open (the client sees 1006; fixed upstream in 2026, not in the build on
      // npm). The upgrade corks the new socket itself, so the 101 and what `open` sends still
      // leave in one write; uWS.js prints a "writes must be made from within a corked callback"
      // warning on stderr for it (docs/reliability.md, "Async WebSocket upgrades").
      upgrade();
    } catch (err) {
      // A caller without `aborted` whose client left: uWS throws on the aborted response.
      if (!/must not be accessed after/.test((err as Error)?.message)) throw err;
      o.abandoned?.();
    }
  });
}

/**
 * Every header of a request (HTTP or WebSocket upgrade), lower-case names. On the fallback
 * binding, which has no `forEach`, only the headers the platform reads by name.
 */
export function readHeaders(req: uws.HttpRequest): Record<string, string> {
  const headers: Record<string, string> = {};
  try {
    req.forEach((k, v) => {
      headers[k] = v;
    });
  } catch {
    for (const h of FALLBACK_HEADERS) {
      const v = req.getHeader(h);
      if (v) headers[h] = v;
    }
  }
  return headers;
}

function readIp(res: uws.HttpResponse): string {
  try {
    return Buffer.from(res.getRemoteAddressAsText()).toString();
  } catch {
    return '';
  }
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:\-]{1,128}$/;

/** The caller's `X-Request-Id` when it is safe to echo and log, else a new one. */
export function requestIdFrom(incoming: string | undefined): string {
  return incoming && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const DEFAULT_AUTH_MESSAGES = AUTH_MESSAGES;

/** Parses `Authorization: Bearer <token>`; undefined when missing or malformed. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer[ ]+([^\s]+)\s*$/i.exec(header);
  return m ? m[1] : undefined;
}

/**
 * A NUL (`%00`) in a path parameter or the query reaches no handler: no store can keep it
 * (PostgreSQL text refuses it), so it is a 400 naming where it was (docs/reliability.md).
 */
export function refuseNul(params: Record<string, string>, query: URLSearchParams | undefined): void {
  for (const name in params) {
    if (params[name]!.includes('\0')) throw new ServiceError('bad_request', `NUL character (%00) in path parameter ${name}`);
  }
  if (!query) return;
  for (const [name, value] of query) {
    if (name.includes('\0')) throw new ServiceError('bad_request', 'NUL character (%00) in a query parameter name');
    if (value.includes('\0')) throw new ServiceError('bad_request', `NUL character (%00) in query parameter ${name}`);
  }
}

/**
 * The HTTP layer on one uWebSockets.js App: routing, request ids, body reading with limits
 * and content-type rules, authentication, the one error mapping, metrics and graceful
 * drain. Route modules only add `RouteSpec`s.
 */
export class HttpApp {
  readonly app: uws.TemplatedApp;
  readonly router = new Router();
  private listenSocket: uws.us_listen_socket | null = null;
  private inflight = 0;
  private drained: (() => void) | null = null;
  private closing = false;
  private stopping: Promise<void> | undefined;
  private closingSockets: Promise<void> | undefined;
  /** Every open WebSocket of every route (`ws`), with who closes it at shutdown. */
  private readonly sockets = new Map<uws.WebSocket<unknown>, WsShutdown>();
  /** When the last WebSocket closed during shutdown (for the linger before the last cut). */
  private lastShutdownClose = 0;
  /** The `going-away` sockets were closed (`stopAccepting`); every socket was (`closeSockets`). */
  private goneAway = false;
  private allGone = false;
  port = 0;
  /** While true (before migrations finish), unknown routes answer 503 instead of 404. */
  starting = false;
  /**
   * Answers a browser's page request (GET, `Accept: text/html`) for a path no route matches:
   * the console's client-side routes (`/agents/…`) load its page. Unset: the usual 404.
   */
  pageFallback?: (reply: Reply, headers: Record<string, string>) => void;
  /** How long a WebSocket that starts in its first message may wait to send it (`startDeadline`). */
  readonly wsStartTimeoutMs: number;
  /** How long a WebSocket may stay past its high-water mark without a drain (`stallWatch`). */
  readonly wsStallTimeoutMs: number;
  /** Per-prefix error envelopes, longest prefix first. */
  private envelopes: { prefix: string; envelope: ErrorEnvelope }[] = [];

  constructor(private readonly opts: HttpAppOptions) {
    this.app = uws.App();
    this.wsStartTimeoutMs = opts.wsStartTimeoutMs ?? WS_START_TIMEOUT_MS;
    this.wsStallTimeoutMs = opts.wsStallTimeoutMs ?? WS_STALL_TIMEOUT_MS;
    this.app.any('/*', (res, req) => this.dispatch(res, req));
  }

  route<I extends RouteInput = RouteInput>(spec: RouteSpec<I>): void {
    this.router.add(spec as unknown as RouteSpec);
  }

  /**
   * Answers errors under `prefix` (the path itself or below it) with `envelope` instead of
   * the native `{status, message}`. The longest matching prefix wins.
   */
  errorEnvelope(prefix: string, envelope: ErrorEnvelope): void {
    const p = prefix.replace(/\/+$/, '');
    this.envelopes = [...this.envelopes.filter((e) => e.prefix !== p), { prefix: p, envelope }].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /**
   * Listens on `host:port`, alone: uWebSockets.js's default listen sets SO_REUSEPORT on Linux,
   * which let a second server started on a port that one already held bind it too and take a
   * share of its connections without an error. The exclusive flag makes that a failed start.
   */
  listen(host: string, port: number, o: { shared?: boolean } = {}): Promise<number> {
    return new Promise((resolve, reject) => {
      const listen = this.app.listen as unknown as (host: string, port: number, options: number, cb: (token: uws.us_listen_socket | false) => void) => void;
      // `shared`: the workers of one node (PARLEY_WORKERS) listen on the port together, with
      // SO_REUSEPORT, after the node's main thread claimed it alone (D-SCALE-2).
      listen.call(this.app, host, port, o.shared ? 0 : LISTEN_EXCLUSIVE_PORT, (token) => {
        if (!token) return reject(new Error(`could not listen on ${host}:${port}`));
        this.listenSocket = token;
        this.port = uws.us_socket_local_port(token);
        resolve(this.port);
      });
    });
  }

  get inFlight(): number {
    return this.inflight;
  }

  /**
   * Mounts a WebSocket route: `guardFrames` (the documented frame limit with close 1009), upgrades
   * refused `503` once shutdown has begun, and the route's sockets tracked so that shutdown
   * closes them with a close code (`shutdown`, see `WsShutdown`) instead of cutting them.
   */
  ws<T>(pattern: string, behavior: uws.WebSocketBehavior<T>, o: { shutdown?: WsShutdown } = {}): void {
    const shutdown = o.shutdown ?? 'going-away';
    const { upgrade, open, close } = behavior;
    const sockets = this.sockets as Map<uws.WebSocket<T>, WsShutdown>;
    this.app.ws<T>(pattern, guardFrames({
      ...behavior,
      upgrade: (res, req, context) => {
        if (this.closing) {
          const r = this.shuttingDown(req.getUrl());
          res.cork(() => {
            res.writeStatus(`${r.status} ${STATUS_CODES[r.status] ?? 'Error'}`);
            for (const [k, v] of Object.entries(r.headers)) res.writeHeader(k, v);
            res.writeHeader('Content-Type', 'application/json').end(JSON.stringify(r.body), true);
          });
          return;
        }
        if (upgrade) {
          upgradingNow = res;
          try {
            return upgrade(res, req, context);
          } finally {
            upgradingNow = undefined;
          }
        }
        res.upgrade({} as T, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
      },
      open: (ws) => {
        sockets.set(ws, shutdown);
        open?.(ws);
        // Upgraded after its route's sockets were closed (an upgrade that was authenticating).
        if (sockets.has(ws) && (this.allGone || (shutdown === 'going-away' && this.goneAway))) this.goAway(ws);
      },
      close: (ws, code, message) => {
        sockets.delete(ws);
        if (this.closing) this.lastShutdownClose = performance.now();
        return close?.(ws, code, message);
      },
    }));
  }

  /** The answer to a request or upgrade that arrives once shutdown has begun: 503, in the path's envelope. */
  private shuttingDown(path: string): { status: number; body: unknown; headers: Record<string, string> } {
    const e = new ServiceError('unavailable', 'Shutting down: try again shortly', { headers: { 'Retry-After': '1' } });
    const hook = this.envelopes.find((h) => path === h.prefix || path.startsWith(h.prefix + '/'));
    if (!hook) return { status: e.status, body: { status: e.status, message: e.message }, headers: { ...e.headers } };
    const env = hook.envelope(e);
    return { status: env.status, body: env.body, headers: { ...e.headers, ...env.headers } };
  }

  /** Closes one socket 1001 (its route's `close` runs as for any close). */
  private goAway(ws: uws.WebSocket<unknown>): void {
    try {
      ws.cork(() => ws.end(WS_GOING_AWAY.code, WS_GOING_AWAY.reason));
    } catch {
      this.sockets.delete(ws); // already closed
    }
  }

  /**
   * Shutdown, first step: stops accepting (the listen socket closes; requests and upgrades on
   * connections already open answer `503` with `Retry-After`), lets in-flight requests finish
   * within the drain timeout, then closes the `going-away` routes' sockets 1001. The modules
   * close after this; `closeSockets` ends the rest.
   */
  stopAccepting(): Promise<void> {
    return (this.stopping ??= (async () => {
      this.closing = true;
      if (this.listenSocket) uws.us_listen_socket_close(this.listenSocket);
      this.listenSocket = null;
      if (this.inflight > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.opts.drainTimeoutMs ?? 10_000);
          this.drained = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      this.goneAway = true;
      for (const [ws, how] of [...this.sockets]) if (how === 'going-away') this.goAway(ws);
    })());
  }

  /**
   * Shutdown, last step (after the modules closed): closes every WebSocket still open 1001,
   * leaves the closed ones `WS_CLOSE_LINGER_MS` for their closing handshake, then closes every
   * connection.
   */
  closeSockets(): Promise<void> {
    return (this.closingSockets ??= (async () => {
      await this.stopAccepting();
      this.allGone = true;
      for (const ws of [...this.sockets.keys()]) this.goAway(ws);
      if (this.lastShutdownClose) {
        const linger = Math.min(WS_CLOSE_LINGER_MS, this.opts.drainTimeoutMs ?? 10_000) - (performance.now() - this.lastShutdownClose);
        if (linger > 0) await new Promise((r) => setTimeout(r, linger));
      }
      (this.app as unknown as { close(): void }).close(); // exists in v20.30, missing from its types
    })());
  }

  /** Both steps at once: for an app without modules to close in between. */
  async close(): Promise<void> {
    await this.stopAccepting();
    await this.closeSockets();
  }

  private dispatch(res: uws.HttpResponse, req: uws.HttpRequest): void {
    const started = performance.now();
    // Copy everything out of `req` now: it is invalid after this callback returns.
    const method = req.getMethod().toUpperCase();
    const rawUrl = req.getUrl();
    const q = rawUrl.indexOf('?'); // only the fallback imitation leaves the query on the URL
    const path = q >= 0 ? rawUrl.slice(0, q) : rawUrl;
    const headers = readHeaders(req);
    const ex = new Exchange(this, res, method, path, readQuery(req), headers, started);
    res.onAborted(ex.reply.abort);

    this.inflight++;
    if (this.closing) {
      // A request on a connection opened before shutdown began: refused, the connection closed.
      const r = this.shuttingDown(path);
      ex.reply.closeConnection = true;
      ex.reply.json(r.status, r.body, r.headers);
      this.finish(ex);
      return;
    }
    const spec = ex.spec;
    if (method === 'OPTIONS') {
      ex.reply.send(204, null, {
        'Access-Control-Allow-Methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
        'Access-Control-Allow-Headers': headers['access-control-request-headers'] ?? 'Authorization, Content-Type',
        'Access-Control-Max-Age': '600',
      });
      this.finish(ex);
      return;
    }
    // Collect the body synchronously (uWS requires onData before returning) while auth runs.
    const limit = spec?.bodyLimit ?? JSON_BODY_LIMIT;
    const declared = headers['content-length'] !== undefined ? Number(headers['content-length']) : undefined;
    const hasBody = BODY_METHODS.has(method) && (declared ? declared > 0 : headers['transfer-encoding'] !== undefined);
    if (hasBody) {
      if (declared !== undefined && declared > limit) {
        this.sendError(ex, new ServiceError('payload_too_large', `Request body exceeds ${limit} bytes`));
        this.finish(ex);
        return;
      }
      ex.bodyPromise = new Promise((resolve, reject) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let over = false;
        // uWS closes a body slower than ~16 KiB/s (measured); one trickled just faster could
        // hold its request, and its buffered bytes, for limit / 16 KiB seconds: the deadline
        // bounds it (docs/reliability.md "Slow clients").
        const bodyTimeoutMs = this.opts.bodyTimeoutMs ?? BODY_TIMEOUT_MS;
        const timer = bodyTimeoutMs > 0 ? setTimeout(() => {
          over = true;
          chunks.length = 0;
          ex.reply.closeConnection = true;
          reject(new ServiceError('request_timeout', `Request body not received within ${bodyTimeoutMs / 1000} s`));
        }, bodyTimeoutMs) : undefined;
        timer?.unref(); // an open request keeps nothing alive at shutdown but its socket
        if (timer) ex.reply.signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
        res.onData((ab, isLast) => {
          if (over) return;
          size += ab.byteLength;
          if (size > limit) {
            over = true;
            clearTimeout(timer);
            reject(new ServiceError('payload_too_large', `Request body exceeds ${limit} bytes`));
            return;
          }
          chunks.push(Buffer.from(ab.slice(0))); // uWS reuses the ArrayBuffer: copy it
          if (isLast) {
            clearTimeout(timer);
            resolve(Buffer.concat(chunks, size));
          }
        });
      });
      ex.bodyPromise.catch(() => {});
    }
    void this.serve(ex);
  }

  /** Runs the route and answers its result or its error; never rejects. */
  private async serve(ex: Exchange): Promise<void> {
    try {
      await this.run(ex);
    } catch (err) {
      const e = toServiceError(err);
      if (e.code === 'internal') ex.log.error({ err }, 'unhandled error');
      const reply = ex.reply;
      if (!reply.started) this.sendError(ex, e);
      else if (!reply.ended) reply.destroy(); // mid-stream failure: never a clean, truncated 200
    } finally {
      this.finish(ex);
    }
  }

  private async run(ex: Exchange): Promise<void> {
    const { spec, method, headers, reply } = ex;
    if (!spec) {
      if (!ex.allowed.length && this.pageFallback && (method === 'GET' || method === 'HEAD') && /\btext\/html\b/.test(headers['accept'] ?? '')) {
        this.pageFallback(reply, headers);
        return;
      }
      if (ex.allowed.length) throw new ServiceError('method_not_allowed', 'Method not allowed', { headers: { Allow: ex.allowed.join(', ') } });
      if (this.starting) throw new ServiceError('unavailable', 'Starting: try again shortly', { headers: { 'Retry-After': '1' } });
      throw new ServiceError('not_found', 'Not found');
    }
    const ctx = ex as unknown as Ctx;
    if (spec.auth !== 'none') {
      const header = headers['authorization'];
      if (header === undefined && spec.auth === 'optional') {
        // anonymous
      } else {
        const token = bearerToken(header);
        if (!token) throw new ServiceError('unauthenticated_bare', 'Unauthorized', { headers: { 'WWW-Authenticate': 'Bearer' } });
        ex.principal = await this.opts.authenticate(token, spec.authMessages ?? DEFAULT_AUTH_MESSAGES);
      }
    }
    refuseNul(ex.params, ex.rawQuery ? ex.query : undefined);
    const raw = ex.bodyPromise ? await ex.bodyPromise : undefined;
    ex.rawBody = raw;
    const kind = spec.body ?? 'none';
    if (kind !== 'none' && kind !== 'any') {
      const ct = headers['content-type'];
      if (!raw || raw.length === 0) {
        if (!spec.bodyOptional) throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
      } else if (kind === 'json') {
        if (!isJson(ct)) throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
        ctx.body = parseJson(raw);
      } else if (kind === 'json-or-msgpack') {
        if (isJson(ct)) ctx.body = parseJson(raw);
        else if (isMsgpack(ct)) ctx.body = parseMsgpack(raw);
        else throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
      } else if (kind === 'multipart') {
        if (mediaType(ct) !== 'multipart/form-data') throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
      }
    }
    if (spec.beta) requireBeta(ex.principal!);
    if (spec.input) ctx.input = readInput(spec.input, ctx, spec.bodyOptional === true);
    const result = await spec.handler(ctx);
    if (result && !reply.started) {
      if (result.status === 204 || result.body === undefined) reply.send(result.status, null, result.headers);
      else reply.json(result.status, result.body, result.headers);
    } else if (!reply.started && !reply.aborted) {
      throw new Error(`handler for ${spec.method} ${spec.path} returned nothing`);
    }
  }

  /** Once per request, however it ended: metrics, the debug line, the drain. */
  private finish(ex: Exchange): void {
    if (ex.settled) return;
    ex.settled = true;
    this.inflight--;
    const reply = ex.reply;
    const status = reply.aborted && !reply.started ? 499 : reply.status;
    const ms = performance.now() - ex.started;
    const route = ex.spec?.path ?? (ex.allowed.length ? ex.path : 'unmatched');
    this.opts.metrics.observe(ex.method, route, status, ms);
    if (this.opts.log.isLevelEnabled('debug')) ex.log.debug({ method: ex.method, route, status, ms: +ms.toFixed(2) }, 'request');
    if (this.inflight === 0 && this.drained) this.drained();
  }

  /** The base logger, for the per-request child (`Exchange.log`). */
  get baseLog(): Logger {
    return this.opts.log;
  }

  private sendError(ex: Exchange, e: ServiceError): void {
    const { reply, path } = ex;
    const hook = this.envelopes.find((h) => path === h.prefix || path.startsWith(h.prefix + '/'));
    if (hook) {
      if (e.status >= 500 && e.code !== 'internal') ex.log.warn({ code: e.code, err: e.cause ?? e.message }, 'dependency error');
      const env = hook.envelope(e);
      reply.json(env.status, env.body, env.headers);
      return;
    }
    if (e.code === 'unauthenticated_bare' || e.code === 'unsupported_media_type') {
      reply.send(e.status, null, e.headers);
      return;
    }
    if (e.code === 'invalid' && e.fields) {
      reply.json(422, e.fields, e.headers);
      return;
    }
    if (e.status >= 500 && e.code !== 'internal') ex.log.warn({ code: e.code, err: e.cause ?? e.message }, 'dependency error');
    reply.json(e.status, e.reason === undefined ? { status: e.status, message: e.message } : { status: e.status, message: e.message, reason: e.reason }, e.headers);
  }
}

const NO_INPUT: Input = { body: undefined, query: undefined, params: undefined, page: undefined };

/**
 * One request while it is served, and the route's `Ctx` (this object is the handler's `ctx`).
 * A class, not a literal with closures: its getters and methods are made once, not per
 * request, and what most requests never ask for (the query's parser, the request's logger,
 * the peer address, the abort signal) is made on first use (bench/README.md, http.ts pass).
 */
class Exchange {
  readonly reply: Reply;
  readonly requestId: string;
  readonly spec: RouteSpec | undefined;
  readonly params: Record<string, string>;
  readonly allowed: Method[];
  readonly route: string;
  /** The body on its way, when there is one. */
  bodyPromise?: Promise<Buffer | undefined>;
  /** The parsed body (`Ctx.body`). */
  body: unknown = undefined;
  rawBody?: Buffer;
  principal?: Principal;
  input: Input = NO_INPUT;
  settled = false;
  private _query?: URLSearchParams;
  private _log?: Logger;
  private _ip?: string;
  private _form?: Form;

  constructor(
    private readonly app: HttpApp,
    private readonly res: uws.HttpResponse,
    readonly method: string,
    readonly path: string,
    readonly rawQuery: string,
    readonly headers: Record<string, string>,
    readonly started: number,
  ) {
    this.requestId = requestIdFrom(headers['x-request-id']);
    this.reply = new Reply(res, this.requestId);
    const m = app.router.match(method, path);
    this.spec = m.spec;
    this.params = m.params;
    this.allowed = m.allowed;
    this.route = m.spec?.path ?? '';
  }

  get query(): URLSearchParams {
    return (this._query ??= new URLSearchParams(this.rawQuery));
  }

  get log(): Logger {
    return (this._log ??= this.app.baseLog.child({ requestId: this.requestId }));
  }

  /** The peer address; '' once the response is gone (uWS no longer holds the socket). */
  get ip(): string {
    return (this._ip ??= this.reply.ended || this.reply.aborted ? '' : readIp(this.res));
  }

  get signal(): AbortSignal {
    return this.reply.signal;
  }

  form(): Form {
    return (this._form ??= formFields(parseMultipart(this.rawBody ?? Buffer.alloc(0), this.headers['content-type'] ?? '')));
  }
}

/** Parses a route's declared input (`RouteInput`), in its documented order. */
function readInput(input: RouteInput, ctx: Ctx, bodyOptional: boolean): Input {
  const out: { [K in keyof Input]: unknown } = { ...NO_INPUT };
  if (input.page) out.page = pageRequest(ctx.query, input.page).req;
  if (input.query) {
    const present = Object.keys(input.query.shape).filter((k) => ctx.query.has(k));
    out.query = parse(input.query, Object.fromEntries(present.map((k) => [k, ctx.query.get(k)])), 'query');
  }
  if (input.params) out.params = parse(input.params, ctx.params, 'path');
  if (input.body) out.body = parse(input.body, ctx.body === undefined && bodyOptional ? {} : ctx.body, 'body');
  return out as Input;
}
