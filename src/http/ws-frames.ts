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
