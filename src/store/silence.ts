import net from 'node:net';

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
 */
export interface SilenceWatch {
  /** postgres.js's `socket` option. */
  socket(options: { host: string[]; port: number[]; path?: string | false; ssl?: unknown }): net.Socket;
  timeoutMs: number;
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

export function watchSilence(timeoutMs: number): SilenceWatch {
  const watched = new Set<Watched>();
  let timer: NodeJS.Timeout | null = null;
  const watch: SilenceWatch = {
    timeoutMs,
    socket(options) {
      const socket = new net.Socket();
      // postgres.js writes its first message at once when it is given a socket; Node holds
      // writes until the connection is open, and postgres.js's connect timeout still applies.
      if (options.path) socket.connect(options.path);
      else {
        const host = options.host[0] ?? 'localhost';
        const port = options.port[0] ?? 5432;
        socket.connect(port, host);
        Object.assign(socket, { host, port }); // named in postgres.js's connection errors
      }
      if (options.ssl) return socket;
      const w: Watched = { socket, outstanding: 0, unanswered: false, since: Date.now() };
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
        heard(data);
      });
      socket.once('close', () => {
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
