import type uws from 'uWebSockets.js';

/**
 * WebSocket frame limits with a close code (docs/reliability.md, "WebSockets").
 *
 * uWebSockets.js refuses a message over `maxPayloadLength` by closing the TCP connection
 * without a close frame, so the client sees an abrupt 1006. `guardFrames` keeps the route's
 * documented limit but gives uWS headroom above it (the limit plus the smaller of the limit
 * and 1 MiB): a message in that band is refused by us with close 1009 "Message too big".
 * Beyond the headroom uWS still cuts the connection at the frame header (measured; not
 * fixable without patching uWS), which also bounds what one socket can make us buffer.
 */
export const WS_TOO_BIG = 1009;

/** The hard bound handed to uWS for a documented message limit. */
export function wsHardLimit(limit: number): number {
  return limit + Math.min(limit, 1024 * 1024);
}

export function guardFrames<T>(behavior: uws.WebSocketBehavior<T>): uws.WebSocketBehavior<T> {
  const limit = behavior.maxPayloadLength ?? 16 * 1024;
  const message = behavior.message;
  return {
    ...behavior,
    maxPayloadLength: wsHardLimit(limit),
    message: (ws, data, isBinary) => {
      if (data.byteLength > limit) {
        ws.end(WS_TOO_BIG, `Message too big: the limit is ${limit} bytes`);
        return;
      }
      return message?.(ws, data, isBinary);
    },
  };
}

/**
 * Close code of a socket that authenticates or starts in its first message and did not send it
 * within `PARLEY_WS_START_TIMEOUT_MS` (docs/reliability.md, "Slow clients").
 */
export const WS_START_TIMEOUT = 4408;

/** The close reason of `WS_START_TIMEOUT`. */
export function startTimeoutReason(ms: number): string {
  return `No first message within ${ms / 1000} s`;
}

/**
 * Arms one socket's start deadline: after `ms`, `end(4408, reason)` unless the returned
 * function (call it on the first message and on close) disarms it first. `ms` 0: no deadline.
 */
export function startDeadline(ms: number, end: (code: number, reason: string) => void): () => void {
  if (!(ms > 0)) return () => {};
  const timer = setTimeout(() => end(WS_START_TIMEOUT, startTimeoutReason(ms)), ms);
  timer.unref(); // the listening server keeps the process alive, not an idle socket
  return () => clearTimeout(timer);
}

/**
 * Close code of a socket whose client stopped reading: the platform's unsent bytes stayed past
 * the route's high-water mark for `PARLEY_WS_STALL_TIMEOUT_MS` without the client taking any
 * (docs/reliability.md, "Slow clients").
 */
export const WS_STALLED = 4008;

/**
 * Watches one socket for a client that stopped reading. Call `behind()` when a send finds the
 * socket past its high-water mark (the first call starts the clock) and `caughtUp()` when the
 * socket drains (uWS `drain`, or a send finds it below the mark); `sent(buffered, mark)` after
 * a send does whichever applies. After `ms` behind without a drain, `end(4008, reason)` closes
 * it; `stop()` on close (a later `behind()` does nothing). `ms` 0: never.
 */
export function stallWatch(ms: number, end: (code: number, reason: string) => void): { behind(): void; caughtUp(): void; sent(buffered: number, mark: number): void; stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  // Methods, not named arrow functions: one watch per socket, and under tsx a named arrow costs a
  // 256-byte property dictionary (bench/README.md, idle sessions).
  return {
    behind() {
      if (timer || !(ms > 0)) return;
      timer = setTimeout(() => end(WS_STALLED, `Client not reading: nothing taken for ${ms / 1000} s`), ms);
      timer.unref();
    },
    caughtUp() {
      clearTimeout(timer);
      timer = undefined;
    },
    sent(buffered, mark) {
      if (buffered > mark) this.behind();
      else this.caughtUp();
    },
    stop() {
      ms = 0; // closed: never armed again
      this.caughtUp();
    },
  };
}
