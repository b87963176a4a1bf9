/**
 * The uWebSockets.js plumbing shared by family C's WebSocket routes (`stream-input`,
 * `multi-stream-input`, `speech-to-text/realtime`): an upgrade that copies the request and
 * may refuse it with an HTTP answer in the family envelope, and a JSON text socket with
 * backpressure for the session objects, which know nothing of uWS.
 *
 * Contracts (uWS): `onAborted` is registered first; headers, query and path parameters are
 * copied out of `req` before any `await`; every write made outside a uWS callback is corked.
 */
import { STATUS_CODES } from 'node:http';
import type uws from 'uWebSockets.js';
import { acceptUpgrade, readHandshake, readHeaders, readQuery, requestIdFrom, type HttpApp } from '../../http/app.ts';
import type { Logger } from '../../log.ts';
import { toElevenLabsError } from './errors.ts';
import { stallWatch, startDeadline } from '../../http/ws-frames.ts';

/** Unsent bytes on a socket above which a session stops producing until `drain`. */
export const WS_HIGH_WATER_BYTES = 1024 * 1024;
/** Largest client frame (docs/api/compat.md: 32 MiB; uWS closes the socket beyond it). */
export const WS_MAX_FRAME_BYTES = 32 * 1024 * 1024;
/** Connection lifetime of every family C socket (docs/api/compat.md: 3600 s). */
export const WS_LIFETIME_MS = 3600 * 1000;
/** Close of a socket that reached its lifetime: normal, with this reason. */
export const LIFETIME_CLOSE = { code: 1000, reason: 'connection lifetime reached' } as const;
/** Close of a socket idle past its `inactivity_timeout`: normal, with this reason. */
export const INACTIVITY_CLOSE = { code: 1000, reason: 'inactivity timeout' } as const;

/**
 * The time limits of family C's sockets. Tests shorten them; the platform uses the defaults.
 */
export interface SocketTimers {
  /** Connection lifetime; default `WS_LIFETIME_MS` (3600 s). */
  lifetimeMs?: number;
  /** How long one second of `inactivity_timeout` lasts; default 1000. */
  secondMs?: number;
}

/** What an upgrade handler may read: copies of the request's parts. */
export interface UpgradeRequest {
  /** Lower-cased header names. */
  headers: Record<string, string>;
  query: URLSearchParams;
  /** Path parameters in pattern order (`:voice_id` → params[0]). */
  params: string[];
  requestId: string;
}

/** A JSON text socket as the sessions see it. */
export interface JsonSocket {
  /** Sends one JSON text frame; returns a promise while the client is behind (resolve = send more). */
  send(frame: Record<string, unknown>): Promise<void> | undefined;
  /** Closes with a code and reason (once; later calls do nothing). */
  end(code: number, reason: string): void;
  readonly closed: boolean;
}

/** What a session does with its socket's events. */
export interface SocketSession {
  /** A text frame (binary frames arrive as text too: the protocols are JSON only). */
  onMessage(text: string): void;
  /** The client went away, or the server closed the socket. */
  onClose(): void;
  /**
   * The connection lifetime was reached: say so in-band, then close with `LIFETIME_CLOSE`.
   * Without it the socket is closed with `LIFETIME_CLOSE` and nothing is sent.
   */
  onExpire?(): void;
  /**
   * No client message for the socket's inactivity time. Without it the socket is closed with
   * `INACTIVITY_CLOSE`; a session that is finishing on its own may ignore it.
   */
  onInactive?(): void;
}

interface UserData<S> {
  state: S;
  requestId: string;
  socket?: JsonSocket & { markClosed(): void; drained(): void };
  session?: SocketSession;
  lifetime?: NodeJS.Timeout;
  idle?: NodeJS.Timeout;
  idleMs?: number;
  /** Client messages so far (the inactivity clock checks none came while it was firing). */
  messages: number;
  /** Disarms the start deadline of a keyless socket (its first message came, or it closed). */
  started?: () => void;
}

/**
 * Mounts a JSON WebSocket route. `accept` runs before the upgrade (authentication,
 * handshake parameters); what it throws is answered as an HTTP error in the family
 * envelope and the socket is never opened. `open` makes the session for an accepted socket.
 *
 * Every socket lives at most `lifetimeMs` from its opening (docs/api/compat.md). When
 * `inactivityMs` gives a time for a socket's state, the socket also ends after that long
 * without a client message (every message restarts the count).
 */
export function mountJsonSocket<S>(
  http: HttpApp,
  pattern: string,
  paramCount: number,
  o: {
    /**
     * A state returned at once (not a promise) upgrades the socket inside uWS's own upgrade
     * callback, corked: a deferred upgrade cannot be corked in uWS v20.30 and costs ~4 times
     * the CPU (`acceptUpgrade`, src/http/app.ts). Keyless sockets take that path.
     */
    accept(r: UpgradeRequest): S | Promise<S>;
    open(socket: JsonSocket, state: S, requestId: string): SocketSession;
    log: Logger;
    idleTimeoutS?: number;
    lifetimeMs?: number;
    inactivityMs?(state: S): number | undefined;
    /**
     * True for a socket whose handshake carried no credential (its first message must): such a
     * socket is closed 4408 unless that message comes within `http.wsStartTimeoutMs`.
     */
    keyless?(state: S): boolean;
  },
): void {
  const lifetimeMs = o.lifetimeMs ?? WS_LIFETIME_MS;
  const armIdle = (d: UserData<S>) => {
    if (d.idleMs === undefined || d.socket?.closed) return;
    if (d.idle) return void d.idle.refresh();
    d.idle = setTimeout(() => {
      // After a stall of this process the timer can fire before uWS has read a message that
      // came in time: judge after the poll phase has read what already arrived.
      const seen = d.messages;
      setImmediate(() => {
        if (d.socket?.closed || d.messages !== seen) return; // a message came: armIdle re-armed the clock
        if (d.session?.onInactive) d.session.onInactive();
        else d.socket?.end(INACTIVITY_CLOSE.code, INACTIVITY_CLOSE.reason);
      });
    }, d.idleMs);
    d.idle.unref(); // the listening server keeps the process alive, not an idle socket
  };
  http.ws<UserData<S>>(pattern, {
    compression: 0,
    maxPayloadLength: WS_MAX_FRAME_BYTES,
    maxBackpressure: 64 * 1024 * 1024,
    idleTimeout: o.idleTimeoutS ?? 120,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => {
      let aborted = false;
      res.onAborted(() => (aborted = true));
      // Copy everything out of `req` now: it is invalid after this callback returns.
      const headers = readHeaders(req);
      const query = new URLSearchParams(readQuery(req));
      const params: string[] = [];
      for (let i = 0; i < paramCount; i++) params.push(safeDecode(req.getParameter(i) ?? ''));
      const hs = readHandshake(req);
      const requestId = requestIdFrom(headers['x-request-id']);
      const accepted = (state: S) => {
        if (aborted) return;
        acceptUpgrade<UserData<S>>(res, hs, { state, requestId, messages: 0 }, context, { aborted: () => aborted });
      };
      const refused = (err: unknown) => {
        if (aborted) return;
        const e = toElevenLabsError(err);
        if (e.internal !== undefined) o.log.error({ err: e.internal }, 'compat socket upgrade failed');
        res.cork(() => {
          res.writeStatus(`${e.status} ${STATUS_CODES[e.status] ?? 'Error'}`);
          res.writeHeader('X-Request-Id', requestId);
          for (const [k, v] of Object.entries(e.headers)) res.writeHeader(k, v);
          res.writeHeader('Content-Type', 'application/json').end(JSON.stringify(e.body));
        });
      };
      let got: S | Promise<S>;
      try {
        got = o.accept({ headers, query, params, requestId });
      } catch (err) {
        return refused(err);
      }
      // Settled at once (a keyless socket): upgraded now, inside this callback.
      if (!(got instanceof Promise)) return accepted(got);
      got.then(accepted, refused);
    },
    open: (ws) => {
      const d = ws.getUserData();
      let closed = false;
      let waiters: (() => void)[] = [];
      const stall = stallWatch(http.wsStallTimeoutMs, (code, reason) => socket.end(code, reason));
      const release = () => {
        stall.stop();
        const w = waiters;
        waiters = [];
        for (const f of w) f();
      };
      const socket = {
        get closed() {
          return closed;
        },
        send(frame: Record<string, unknown>): Promise<void> | undefined {
          if (closed) return undefined;
          ws.cork(() => ws.send(JSON.stringify(frame), false));
          if (ws.getBufferedAmount() <= WS_HIGH_WATER_BYTES) return undefined;
          stall.behind();
          return new Promise<void>((resolve) => waiters.push(resolve));
        },
        end(code: number, reason: string): void {
          if (closed) return;
          closed = true;
          ws.cork(() => ws.end(code, reason));
          release();
        },
        markClosed(): void {
          closed = true;
          release();
        },
        drained: release,
      };
      d.socket = socket;
      d.session = o.open(socket, d.state, d.requestId);
      if (socket.closed) return; // the session refused at once (a format the native rules refuse)
      d.lifetime = setTimeout(() => {
        if (socket.closed) return;
        if (d.session?.onExpire) d.session.onExpire();
        else socket.end(LIFETIME_CLOSE.code, LIFETIME_CLOSE.reason);
      }, lifetimeMs);
      d.lifetime.unref();
      d.idleMs = o.inactivityMs?.(d.state);
      armIdle(d);
      if (o.keyless?.(d.state)) d.started = startDeadline(http.wsStartTimeoutMs, (code, reason) => socket.end(code, reason));
    },
    message: (ws, message) => {
      const d = ws.getUserData();
      d.started?.();
      d.messages++;
      armIdle(d);
      // Decoding copies the frame out of uWS's buffer, which is reused after this callback.
      d.session?.onMessage(Buffer.from(message).toString('utf8'));
    },
    drain: (ws) => ws.getUserData().socket?.drained(),
    close: (ws) => {
      const d = ws.getUserData();
      clearTimeout(d.lifetime);
      clearTimeout(d.idle);
      d.started?.();
      d.socket?.markClosed();
      d.session?.onClose();
    },
  } as uws.WebSocketBehavior<UserData<S>>);
}

function safeDecode(v: string): string {
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** An in-band error frame's parts for any failure: the family's message and HTTP status. */
export function errorFrame(err: unknown): { error: string; code: number } {
  const e = toElevenLabsError(err);
  const detail = e.body.detail;
  const message = Array.isArray(detail) ? detail.map((f) => `${f.loc.slice(1).join('.')}: ${f.msg}`).join('; ') : detail.message;
  return { error: message, code: e.status };
}

/** The reason a socket's work is aborted with (an `AbortError`). */
export function abortError(message: string): Error {
  return Object.assign(new Error(message), { name: 'AbortError' });
}

/**
 * A socket's cancellation, its `AbortController` made on first use: a socket that never sends
 * its first message (an idle crowd) needs no controller and no abort at its close
 * (docs/reliability.md, "Slow clients", "Under load"). An abort before the first `signal()`
 * is remembered and the signal comes out aborted.
 */
export class LazyAbort {
  private ac: AbortController | null = null;
  private abortedFor: string | null = null;

  signal(): AbortSignal {
    if (!this.ac) {
      this.ac = new AbortController();
      if (this.abortedFor !== null) this.ac.abort(abortError(this.abortedFor));
    }
    return this.ac.signal;
  }

  abort(message: string): void {
    if (this.ac) this.ac.abort(abortError(message));
    else this.abortedFor ??= message;
  }
}
