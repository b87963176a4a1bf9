import net from 'node:net';
import { Duplex } from 'node:stream';

/**
 * A bound on a Postgres server that stops answering without closing the connection (a
 * black-holed network: a partition, a dropped route). Such a connection is neither refused nor
 * reset, so the driver waits on it for as long as TCP does (minutes), and every query on it
 * hangs with its request. postgres.js has no query timeout; this watches the pool's sockets
 * instead (its `socket` option): a connection that has a query outstanding and has heard
 * nothing from the server for `timeoutMs` is destroyed with `ETIMEDOUT`, which fails its
 * queries as a dropped connection (a `503` with `Retry-After`, `toServiceError`) and lets the
 * pool reconnect.
 *
 * "Outstanding" is counted from the protocol: Sync and simple-Query messages sent against
 * ReadyForQuery messages received (a query pipelined behind one that was answered is still
 * outstanding), and any message sent since the server was last heard (a statement's
 * Parse/Describe/Flush, sent before its Sync when it is first described). Any byte from the server (rows streaming, a notice, a notification) restarts
 * the clock, so a query that returns rows for longer is not cut; one that computes silently
 * for longer than the bound is (a lock wait too). `timeoutMs` is read at each check: 0 turns
 * the watch off (migrations run with it off). Over TLS (`sslmode`) the protocol cannot be read
 * and postgres.js replaces the socket: such connections are not watched.
 *
 * The same switch bounds the wait for a connection while the server cannot be reached. The
 * pool queues a query when every connection is busy connecting, and a failed connect fails
 * only the one query it was opened for: the next connect takes the next query in line. During
 * a black-holed outage under load, where each connect waits for the connect timeout (3 s), a
 * query at place N waited N ÷ pool size × 3 s (100 queries on 10 connections: 30 s). So:
 * - after a connect that ended without a byte from the server (refused or timed out), the
 *   pool reconnects for its next query at once rather than after its backoff (`unreachable`,
 *   read by `src/store/db.ts`): a refusing server fails the queue as fast as it refuses;
 * - after a connect timed out (a silent server), the connects under way fail with it, and
 *   every connect the pool opens fails at once with `DB_UNREACHABLE` (a connection error:
 *   `503` + `Retry-After`) without touching the network, so the queue empties in
 *   milliseconds. Meanwhile a probe of the watch's own, carrying nobody's query, asks the
 *   server again and again (an SSLRequest, which any Postgres answers with one byte before
 *   any authentication; each bounded by the connect timeout); its answer, or a refusal, ends
 *   the silence for the pool. Requests in the moment between the network healing and the
 *   probe's answer still get the `503`.
 * So a query waits for a connection at most about one connect timeout.
 */
export interface SilenceWatch {
  /** postgres.js's `socket` option. */
  socket(options: { host: string[]; port: number[]; path?: string | false; ssl?: unknown }): net.Socket | Duplex;
  timeoutMs: number;
  /**
   * Whether the pool's last connect ended without a byte from the server (refused, timed out):
   * the pool then reconnects at once for the queries waiting (`src/store/db.ts`), each failing
   * as fast as the server refuses, or at once while it is silent.
   */
  readonly unreachable: boolean;
}


interface Watched {
  socket: net.Socket;
  /** Requests sent that the server has not finished answering. */
  outstanding: number;
  /**
   * A message sent since the server was last heard (a Parse/Describe/Flush awaiting its
   * description has no Sync yet, so `outstanding` does not count it).
   */
  unanswered: boolean;
  /** When the server was last heard from, or the first request went out after a silence. */
  since: number;
}

/**
 * `connectTimeoutMs`: how long a probe of a silent server waits for its answer (the pool's
 * connect timeout).
 */
export function watchSilence(timeoutMs: number, connectTimeoutMs = 3000): SilenceWatch {
  const watched = new Set<Watched>();
  let timer: NodeJS.Timeout | null = null;
  /** Set when a connect timed out without a byte from the server; cleared by any answer. */
  let silentSince: number | null = null;
  /** The last connect of the pool ended without a byte from the server (refused or timed out). */
  let lastUnanswered = false;
  let probing = false;
  /** The pool's sockets that have not heard from the server yet. */
  const connecting = new Set<net.Socket>();
  const heardFrom = () => {
    silentSince = null;
    lastUnanswered = false;
  };
  /** Asks a silent server, again and again, until it answers, refuses or the watch is off. */
  const probe = (target: Target) => {
    if (probing) return;
    probing = true;
    const socket = connectTo(target);
    socket.unref();
    let done = false;
    const end = (how: 'answered' | 'refused' | 'silent') => {
      if (done) return;
      done = true;
      probing = false;
      clearTimeout(deadline);
      socket.destroy();
      // Refused (or reset): the server is not silent any more; the pool's connects find out
      // for themselves, each at once.
      if (how !== 'silent') silentSince = null;
      if (how === 'answered') heardFrom();
      if (silentSince !== null && watch.timeoutMs > 0) setImmediate(() => probe(target));
    };
    const deadline = setTimeout(() => end('silent'), connectTimeoutMs);
    deadline.unref();
    socket.once('data', () => end('answered'));
    socket.on('error', () => end('refused'));
    socket.once('close', () => end('refused'));
    socket.write(SSL_REQUEST);
  };
  const watch: SilenceWatch = {
    timeoutMs,
    get unreachable() {
      return lastUnanswered && watch.timeoutMs > 0;
    },
    socket(options) {
      const target: Target = { path: options.path, host: options.host[0] ?? 'localhost', port: options.port[0] ?? 5432 };
      if (!options.ssl && silentSince !== null && watch.timeoutMs > 0) return refused(silentSince);
      const socket = connectTo(target);
      if (options.ssl) return socket;
      const w: Watched = { socket, outstanding: 0, unanswered: false, since: Date.now() };
      let heardOnce = false;
      let failed = false;
      connecting.add(socket);
      socket.once('error', () => (failed = true));
      // The first message sent (startup, cancel request) has no type byte; the rest do.
      const sent = framer(true, (type) => {
        if (type === 0x58 /* X: Terminate */) return;
        if (w.outstanding === 0 && !w.unanswered) w.since = Date.now();
        w.unanswered = true;
        if (type === 0x53 /* S: Sync */ || type === 0x51 /* Q: Query */) w.outstanding++;
      });
      const heard = framer(false, (type) => {
        if (type === 0x5a /* Z: ReadyForQuery */ && w.outstanding > 0) w.outstanding--;
      });
      const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
      socket.write = ((chunk: unknown, ...rest: unknown[]) => {
        sent(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Uint8Array));
        return write(chunk, ...rest);
      }) as typeof socket.write;
      socket.on('data', (data: Buffer) => {
        w.since = Date.now();
        w.unanswered = false;
        if (!heardOnce) {
          heardOnce = true;
          connecting.delete(socket);
          heardFrom();
        }
        heard(data);
      });
      // Registered before the driver's own listener: the state is set when it asks for its
      // reconnect delay.
      socket.once('close', () => {
        connecting.delete(socket);
        if (!heardOnce) lastUnanswered = true;
        // Closed unanswered and without a socket error: the driver's connect timeout, a silent
        // server (a refusal or a reset is a socket error).
        if (!heardOnce && !failed && silentSince === null && watch.timeoutMs > 0) {
          silentSince = Date.now();
          probe(target);
          // The other connects under way go to the same server: their queries fail now too,
          // rather than each after its own connect timeout. (On a later turn, as in `refused`.)
          const others = [...connecting];
          const err = unreachableError(silentSince);
          connecting.clear();
          setImmediate(() => others.forEach((o) => o.destroy(err)));
        }
        watched.delete(w);
        if (watched.size === 0 && timer) {
          clearInterval(timer);
          timer = null;
        }
      });
      watched.add(w);
      if (!timer) {
        timer = setInterval(() => {
          const limit = watch.timeoutMs;
          if (!(limit > 0)) return;
          const now = Date.now();
          for (const x of watched) {
            if ((x.outstanding > 0 || x.unanswered) && now - x.since >= limit) {
              watched.delete(x);
              // A reset, not a FIN: what is still unsent is discarded rather than delivered (and
              // run) whenever the network heals. The driver hears the error first.
              x.socket.emit('error', Object.assign(new Error(`Postgres did not answer for ${limit} ms: connection dropped`), { code: 'ETIMEDOUT' }));
              x.socket.resetAndDestroy();
            }
          }
        }, 250);
        timer.unref();
      }
      return socket;
    },
  };
  return watch;
}

interface Target {
  path?: string | false;
  host: string;
  port: number;
}

/** Postgres's SSLRequest: answered with one byte (`S` or `N`) before any authentication. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);

function connectTo(t: Target): net.Socket {
  const socket = new net.Socket();
  // postgres.js writes its first message at once when it is given a socket; Node holds
  // writes until the connection is open, and postgres.js's connect timeout still applies.
  if (t.path) socket.connect(t.path);
  else {
    socket.connect(t.port, t.host);
    Object.assign(socket, { host: t.host, port: t.port }); // named in postgres.js's connection errors
  }
  return socket;
}

/**
 * A connection that fails at once, without touching the network: what the pool gets while the
 * server is taken as unreachable. It takes the driver's startup message and then errors, which
 * fails the query the connection was opened for as a connection error and closes it. It errors
 * only after the driver has flushed that message (the driver writes on a later turn of the
 * event loop and, if its connection closes before, keeps the unsent bytes and a stale timer,
 * and its next connect on that connection object never sends its startup).
 */
function refused(since: number): Duplex {
  const fail = () => socket.destroy(unreachableError(since));
  // If the driver never writes (it always does), fail anyway.
  const fallback = setTimeout(fail, 100);
  const socket = new Duplex({
    read() {},
    write(_chunk, _enc, done) {
      done();
      clearTimeout(fallback);
      setImmediate(fail);
    },
  });
  return socket;
}

function unreachableError(since: number): Error {
  return Object.assign(new Error(`Postgres unreachable: a connect had no answer within the connect timeout at ${new Date(since).toISOString()}, none heard since`), { code: 'DB_UNREACHABLE' });
}

/**
 * Follows the message boundaries of one direction of the Postgres protocol (a type byte and a
 * length, then the body) without keeping the bodies, and tells each message's type.
 */
function framer(untypedFirst: boolean, onType: (type: number) => void): (chunk: Uint8Array) => void {
  let skip = 0;
  let first = untypedFirst;
  let head: number[] = [];
  return (chunk) => {
    let i = 0;
    while (i < chunk.length) {
      if (skip > 0) {
        const n = Math.min(skip, chunk.length - i);
        skip -= n;
        i += n;
        continue;
      }
      head.push(chunk[i++]!);
      const need = first ? 4 : 5;
      if (head.length < need) continue;
      const at = first ? 0 : 1;
      const len = ((head[at]! << 24) | (head[at + 1]! << 16) | (head[at + 2]! << 8) | head[at + 3]!) >>> 0;
      if (!first) onType(head[0]!);
      first = false;
      skip = Math.max(0, len - 4);
      head = [];
    }
  };
}
