/**
 * A resumed socket whose session lives on another worker of this node (`PARLEY_WORKERS`,
 * D-SCALE-2). The kernel spreads connections over the workers that share the port, so a
 * client's resume can land on a worker that does not hold its session; that worker keeps the
 * socket and carries its frames over a `MessagePort` to the worker that does, which attaches
 * the port as the session's client link. The client sees one address and one connection.
 *
 * Frames from the client (already policed by the socket's worker): `text`, `audio`, and
 * `detach` when the socket closes. Frames to the client: `msg`, `audio`, `close`. The owner
 * closes the port when the link ends (a detach, or the session closing the link).
 */
import type { MessagePort } from 'node:worker_threads';
import type { Logger } from '../log.ts';
import { ConnectRefused, type ClientLink, type LiveSession, type SessionMessage, type SessionRuntime } from '../sessions/runtime.ts';
import type { ServerMessage } from '../../actors/types.ts';

/** The port of one relayed socket. */
export type Relay = MessagePort;

/** From the socket's worker to the session's. */
export type RelayedFrame = { t: 'text'; text: string } | { t: 'audio'; buf: ArrayBuffer } | { t: 'detach'; how: 'clean' | 'drop' };

/** From the session's worker to the socket's. */
export type RelayedReply = { t: 'msg'; m: ServerMessage | SessionMessage } | { t: 'audio'; pcm: Uint8Array } | { t: 'close'; code: number; reason: string };

/** The socket's side: what the session sends through `relay` reaches the client's `link`. */
export function relayFrom(relay: Relay, link: ClientLink): void {
  relay.on('message', (r: RelayedReply) => {
    if (r.t === 'msg') link.message(r.m);
    else if (r.t === 'audio') link.audio(r.pcm);
    else link.close(r.code, r.reason);
  });
}

/**
 * The session's side: resumes the session for the relayed socket (`greet` sends its first
 * messages) and feeds it the socket's frames. A refusal (the session ended meanwhile, a wrong
 * secret) closes the client's socket with the usual code.
 */
export function serveRelay(
  runtime: SessionRuntime,
  port: MessagePort,
  sessionId: string,
  secret: string,
  o: { log: Logger; greet(link: ClientLink, live: LiveSession, resumed: boolean): void; deliverText(live: LiveSession, text: string): void },
): void {
  let closed = false;
  const link: ClientLink = {
    message: (m) => {
      if (!closed) port.postMessage({ t: 'msg', m } satisfies RelayedReply);
    },
    audio: (pcm) => {
      if (closed) return;
      const copy = pcm.slice();
      port.postMessage({ t: 'audio', pcm: copy } satisfies RelayedReply, [copy.buffer]);
    },
    close: (code, reason) => {
      if (closed) return;
      // The socket's worker ends the socket and answers `detach`, on which the port closes.
      port.postMessage({ t: 'close', code, reason } satisfies RelayedReply);
      closed = true;
    },
  };
  let live: LiveSession;
  try {
    live = runtime.resume(sessionId, secret);
  } catch (err) {
    if (!(err instanceof ConnectRefused)) o.log.error({ err }, 'relayed resume failed');
    const refused = err instanceof ConnectRefused ? err : new ConnectRefused(4500, 'Internal error');
    link.close(refused.code, refused.reason);
    port.on('message', (f: RelayedFrame) => {
      if (f.t === 'detach') port.close();
    });
    return;
  }
  port.on('message', (f: RelayedFrame) => {
    if (f.t === 'audio') live.handle.sendAudio(new Uint8Array(f.buf));
    else if (f.t === 'text') o.deliverText(live, f.text);
    else {
      closed = true;
      live.detach(link, f.how);
      port.close();
    }
  });
  live.attach(link);
  o.greet(link, live, true);
}
