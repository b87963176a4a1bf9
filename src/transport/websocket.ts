/**
 * The built-in `websocket` transport (docs/websocket-transport.md): one socket per client at
 * `/v1/agent/sessions/connect`. JSON text frames carry the docs/api/sessions.md messages (agent state,
 * transcripts, `agent-event`, `client-event`); binary frames carry audio, 16 kHz mono 16-bit
 * little-endian PCM both ways. The agent's audio arrives here already paced in real time.
 *
 * Backpressure: outgoing audio is dropped (and counted) while the socket holds more than
 * `AUDIO_HIGH_WATER_BYTES` unsent, so a stalled client never grows the heap; JSON messages
 * are always queued (they are small and rare) up to uWS's `maxBackpressure`, past which
 * uWS drops them. Stalled: a send, audio or JSON, finds more than `AUDIO_HIGH_WATER_BYTES`
 * unsent; a client that then takes nothing for `PARLEY_WS_STALL_TIMEOUT_MS` is closed 4008 (a
 * drop: the session's grace period applies), whether its agent is speaking or only JSON
 * (transcripts, events) backs up. Incoming audio is policed: a client may not send faster
 * than real time beyond a burst allowance; excess frames are dropped.
 */
import type uws from 'uWebSockets.js';
import type { ClientEvent } from '../../actors/session.ts';
import { SESSION_SAMPLE_RATE_HZ } from '../../actors/types.ts';
import { acceptUpgrade, readHandshake, readQuery, type HttpApp } from '../http/app.ts';
import type { Logger } from '../log.ts';
import { ConnectRefused, type ClientLink, type LiveSession, type SessionRuntime } from '../sessions/runtime.ts';
import { stallWatch } from '../http/ws-frames.ts';
import { relayFrom, type Relay, type RelayedFrame } from './relay.ts';

export const CONNECT_PATH = '/v1/agent/sessions/connect';
/**
 * Unsent bytes past which outgoing audio frames are dropped (≈ 2 s of audio), and past which a
 * send, audio or JSON, starts the stall clock (`stallWatch`).
 */
export const AUDIO_HIGH_WATER_BYTES = 64 * 1024;
/** Largest frame a client may send. */
export const MAX_FRAME_BYTES = 64 * 1024;
/** Caller audio allowed ahead of real time (a burst after a network stall). */
const INPUT_BURST_MS = 2_000;
const BYTES_PER_MS = (SESSION_SAMPLE_RATE_HZ * 2) / 1000;

/** Close codes of the transport. */
export const CLOSE = {
  ended: 1000,
  unauthorized: 4401,
  notLive: 4404,
  replaced: 4409,
  internal: 4500,
  capacity: 4503,
  /** A resume reached a node that does not hold the session; `session.moved` named the owner's URL. */
  moved: 4307,
} as const;

interface UserData {
  token: string;
  sessionId: string;
  resume: string;
  closed: boolean;
  link?: ClientLink;
  live?: LiveSession;
  /** Set when the session lives on a sibling worker of this node: the port carrying its frames. */
  relay?: Relay;
  /** Input policing: audio bytes accepted, and when counting started. */
  inBytes: number;
  inStart: number;
  /** Closes the socket 4008 when its client stops reading (`stallWatch`). */
  stall?: ReturnType<typeof stallWatch>;
  /**
   * What was handed over for this socket and not yet written (`writeOut`), in order: agent audio
   * frames, and JSON messages as their text. And the socket's handle.
   */
  out: (Uint8Array | string)[];
  ws?: uws.WebSocket<UserData>;
}

const CLIENT_TYPES = new Set(['user.message', 'user.activity', 'user.interrupt', 'user.hangup', 'client_tool.result']);

/** A client event from a text frame; malformed JSON and unknown types give null (ignored). */
export function parseClientEvent(text: string): ClientEvent | null {
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    return null;
  }
  if (!m || typeof m !== 'object' || Array.isArray(m)) return null;
  const e = m as Record<string, unknown>;
  if (typeof e.type !== 'string' || !CLIENT_TYPES.has(e.type)) return null;
  if (e.type === 'user.message') {
    if (typeof e.text !== 'string' || e.text.trim() === '') return null;
    return { type: 'user.message', text: e.text, ...(e.audio === false ? { audio: false } : {}) };
  }
  if (e.type === 'client_tool.result') {
    if (typeof e.callId !== 'string' || e.callId === '') return null;
    return { type: 'client_tool.result', callId: e.callId, ...('result' in e ? { result: e.result } : {}), ...(e.isError === true ? { isError: true } : {}) };
  }
  return { type: e.type as 'user.activity' | 'user.interrupt' | 'user.hangup' };
}

/** The first messages of a connection that reached its session (also sent through a relay). */
export function greet(link: ClientLink, live: LiveSession, resumed: boolean): void {
  link.message({ topic: 'session', type: 'session.started', sessionId: live.id, resume: live.resume, resumed, sampleRateHz: SESSION_SAMPLE_RATE_HZ });
  link.message({ topic: 'lk.agent.state', state: live.handle.state });
}

/** A client's text frame, delivered to its session (malformed and unknown messages are ignored). */
export function deliverText(live: LiveSession, text: string): void {
  const e = parseClientEvent(text);
  if (!e) return;
  // A client tool's answer goes to the call that waits for it, not through the conversation.
  if (e.type === 'client_tool.result') live.clientToolResult(e);
  else live.handle.send(e);
}

/**
 * Mounts the socket route. `siblings`, on a node of several workers (`PARLEY_WORKERS`), finds
 * the worker of this node that holds a session a resume asks for, and carries the socket's
 * frames there (`relay.ts`): one address stays one address.
 */
export function mountWebsocketTransport(http: HttpApp, runtime: SessionRuntime, log: Logger, siblings?: { relayTo(node: string, sessionId: string, secret: string): Relay | undefined }): WebsocketTransport {
  let droppedOut = 0;
  // Sockets relayed to a sibling worker's session: at shutdown their session's drain closes
  // them from there (`session.ended`, then 1000 `shutdown`), so this worker waits for that.
  const relayed = new Set<UserData>();
  let relaysClosed: (() => void) | undefined;
  /**
   * Everything a socket is sent, agent audio and JSON messages, is written once the code that
   * handed it over has run (a microtask), all of it in one socket write, in the order of the
   * calls: the frames a session's pacing tick hands over back to back (four 20 ms frames per
   * 80 ms tick, actors/playout.ts) with the transcript of the words they complete, a turn's
   * metrics with its `speaking` state, a final transcript with the next state. The frames stay
   * separate 20 ms messages. A socket write per frame, then per JSON message, were the largest
   * costs of a talking session on the platform's thread (bench/README.md, tenth and fifteenth
   * passes).
   */
  let pending: UserData[] = [];
  const writeOut = (d: UserData) => {
    const frames = d.out;
    if (frames.length === 0) return;
    d.out = [];
    // A closed socket's handle is invalid (uWS throws on any use of it).
    const ws = d.ws;
    if (d.closed || !ws) return;
    // Audio is dropped while the client is behind; JSON messages are always queued.
    const behind = ws.getBufferedAmount() > AUDIO_HIGH_WATER_BYTES;
    let json = false;
    let dropped = 0;
    ws.cork(() => {
      for (const f of frames) {
        if (typeof f === 'string') {
          ws.send(f, false);
          json = true;
        } else if (behind) dropped++;
        else ws.send(f, true);
      }
    });
    if (dropped > 0) {
      const before = droppedOut;
      droppedOut += dropped;
      // Warned at the first drop and every 1,024 after it.
      if (Math.floor((before - 1) / 1024) !== Math.floor((droppedOut - 1) / 1024)) log.warn({ dropped: droppedOut }, 'websocket client too slow: agent audio frames dropped');
    }
    // JSON backs up too when no audio flows (a silent agent, text-only replies): past the mark it
    // starts the stall clock, so a client that reads nothing is closed 4008 rather than have its
    // messages dropped at uWS's 4 MiB.
    if (json) d.stall?.sent(ws.getBufferedAmount(), AUDIO_HIGH_WATER_BYTES);
    else if (behind) d.stall?.behind();
    else d.stall?.caughtUp();
  };
  const writeAll = () => {
    const sockets = pending;
    pending = [];
    for (const d of sockets) writeOut(d);
  };
  const queue = (d: UserData, f: Uint8Array | string) => {
    if (d.out.push(f) > 1) return;
    if (pending.push(d) === 1) queueMicrotask(writeAll);
  };
  http.ws<UserData>(CONNECT_PATH, {
    compression: 0,
    maxPayloadLength: MAX_FRAME_BYTES,
    maxBackpressure: 4 * 1024 * 1024,
    idleTimeout: 60,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => {
      res.onAborted(() => {});
      // Copy everything out of `req` now: it is invalid after this callback returns. The
      // token is checked after the upgrade so that refusals reach the client as close codes.
      const q = new URLSearchParams(readQuery(req));
      const hs = readHandshake(req);
      const data: UserData = { token: q.get('token') ?? '', sessionId: q.get('session_id') ?? '', resume: q.get('resume') ?? '', closed: false, inBytes: 0, inStart: 0, out: [] };
      acceptUpgrade<UserData>(res, hs, data, context);
    },
    open: (ws) => {
      const d = ws.getUserData();
      d.ws = ws;
      const refuse = (code: number, reason: string) => {
        if (!d.closed) {
          // What was handed over before the close goes first (`session.ended` before 1000).
          writeOut(d);
          d.closed = true;
          ws.cork(() => ws.end(code, reason));
        }
      };
      const link: ClientLink = {
        message(m) {
          if (d.closed) return;
          queue(d, JSON.stringify(m));
        },
        audio(pcm) {
          if (d.closed) return;
          // The frame is not copied: queued agent audio is never written to (actors/playout.ts).
          queue(d, pcm);
        },
        close(code, reason) { refuse(code, reason); },
      };
      d.link = link;
      d.stall = stallWatch(http.wsStallTimeoutMs, (code, reason) => {
        log.warn({ sessionId: d.live?.id ?? d.sessionId, stallTimeoutMs: http.wsStallTimeoutMs }, 'websocket client not reading: closed 4008, resume allowed');
        refuse(code, reason);
      });
      const attach = (live: LiveSession, resumed: boolean) => {
        if (d.closed) {
          // The client left while we were connecting: that is a drop, the grace period applies.
          live.attach(link);
          live.detach(link, 'drop');
          return;
        }
        d.live = live;
        d.inStart = Date.now();
        live.attach(link);
        greet(link, live, resumed);
      };
      const fail = (err: unknown) => {
        if (err instanceof ConnectRefused) return refuse(err.code, err.reason);
        log.error({ err }, 'session connect failed');
        refuse(CLOSE.internal, 'Internal error');
      };
      if (d.sessionId || d.resume) {
        try {
          attach(runtime.resume(d.sessionId, d.resume), true);
        } catch (err) {
          if (!(err instanceof ConnectRefused && err.code === CLOSE.notLive)) return fail(err);
          // Not live here: another node may hold it (session registry). Another worker of this
          // node gets the socket's frames (D-SCALE-2); another node's client reconnects there
          // itself (D-SESS-5): no media is proxied between nodes.
          runtime.locateOwner(d.sessionId, d.resume).then((owner) => {
            if (d.closed) return;
            const relay = siblings?.relayTo(owner.node, d.sessionId, d.resume);
            if (relay) {
              d.relay = relay;
              relayed.add(d);
              d.inStart = Date.now();
              relayFrom(relay, link);
              return;
            }
            link.message({ topic: 'session', type: 'session.moved', sessionId: d.sessionId, url: owner.url });
            refuse(CLOSE.moved, 'Session is live on another node');
          }, fail);
        }
      } else {
        runtime.connect(d.token).then((live) => attach(live, false), fail);
      }
    },
    message: (ws, message, isBinary) => {
      const d = ws.getUserData();
      const live = d.live;
      const relay = d.relay;
      if (!live && !relay) return;
      if (isBinary) {
        const allowed = (Date.now() - d.inStart + INPUT_BURST_MS) * BYTES_PER_MS;
        if (d.inBytes + message.byteLength > allowed) return; // faster than real time: dropped
        d.inBytes += message.byteLength;
        // uWS reuses the ArrayBuffer after this callback. To a worker, a copy (an ArrayBuffer of
        // its own, transferred). Here, no copy: the session reads a frame during `sendAudio`
        // only (the recorder and the recognizer's batch copy what they keep), so a frame costs
        // no allocation of its own (bench/README.md, twenty-third pass).
        if (relay) {
          const frame = message.slice(0);
          relay.postMessage({ t: 'audio', buf: frame } satisfies RelayedFrame, [frame]);
        } else live!.handle.sendAudio(new Uint8Array(message));
        return;
      }
      const text = Buffer.from(message).toString('utf8');
      if (relay) relay.postMessage({ t: 'text', text } satisfies RelayedFrame);
      else deliverText(live!, text);
    },
    drain: (ws) => ws.getUserData().stall?.caughtUp(),
    close: (ws, code) => {
      const d = ws.getUserData();
      d.closed = true;
      d.stall?.stop();
      // A close frame from the client (1000 normal, 1005 without a code) is the user leaving;
      // anything else (1006 abnormal, 1001 going away, timeouts) is a drop: reconnect allowed.
      const how = code === 1000 || code === 1005 ? 'clean' : 'drop';
      if (d.live && d.link) d.live.detach(d.link, how);
      if (d.relay) {
        // The owner closes the port once it has detached (a close here could lose the message).
        d.relay.postMessage({ t: 'detach', how } satisfies RelayedFrame);
        relayed.delete(d);
        if (relayed.size === 0) relaysClosed?.();
      }
    },
  } as uws.WebSocketBehavior<UserData>, { shutdown: 'owner' });
  return {
    relaysClosed: async (timeoutMs) => {
      if (relayed.size === 0) return;
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        relaysClosed = resolve;
        timer = setTimeout(resolve, timeoutMs);
      });
      clearTimeout(timer);
    },
  };
}

/** What the sessions module keeps of the transport. */
export interface WebsocketTransport {
  /**
   * Resolves when every socket relayed to a sibling worker's session has been closed (by that
   * session's end, at shutdown: all workers drain together), or after `timeoutMs`.
   */
  relaysClosed(timeoutMs: number): Promise<void>;
}
