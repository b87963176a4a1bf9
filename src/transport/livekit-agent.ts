/**
 * The `livekit` transport, agent side (docs/api/sessions.md): for each LiveKit session the node that
 * created it joins the session's room as the agent participant (`agent-<session_id>`) with
 * @livekit/rtc-node, waits for the caller (`caller-<session_id>`) until the session's
 * `expires_at`, then starts the session through the runtime (the same `connect` the websocket
 * transport uses: the session token is consumed, the session turns `active`).
 *
 * On the wire, behind the same `ClientLink` as the websocket transport:
 * - audio: the agent publishes one microphone track fed from the session's 16 kHz PCM
 *   (resampled to `publishRateHz` when that differs); it subscribes to the caller's audio
 *   track, asks for 16 kHz mono and converts whatever arrives (downmix, resample) to the
 *   session's 16 kHz mono PCM;
 * - `lk.agent.state`: a participant attribute of the agent (sticky);
 * - `lk.transcription`: one text stream per update, attributes `lk.segment_id` and
 *   `lk.transcription_final` (`"true"`/`"false"`); user transcripts are sent on behalf of the
 *   caller's identity (the sender's identity gives the role);
 * - `agent-event`: reliable data packets, one JSON object each (the websocket frame without
 *   `topic`); `client-event` packets from the caller are parsed like websocket text frames.
 *
 * The caller leaving on purpose (client-initiated disconnect) ends the session as
 * `user_hangup`; any other departure starts the reconnect grace period, and the caller joining
 * again reattaches. When the session ends the agent sends `session.ended` on `agent-event` and
 * leaves the room. rtc-node is loaded only when a LiveKit session is dispatched.
 */
import { AccessToken } from 'livekit-server-sdk';
import type { ClientEvent } from '../../actors/session.ts';
import { SESSION_SAMPLE_RATE_HZ, type ServerMessage } from '../../actors/types.ts';
import type { ClientLink, LiveSession, SessionMessage, SessionRuntime } from '../sessions/runtime.ts';
import { ConnectRefused } from '../sessions/runtime.ts';
import { createResampler, int16ToPcmBytes, pcmBytesToInt16, type Resampler } from '../audio/index.ts';
import type { Logger } from '../log.ts';
import { callerIdentity, livekitMinter, roomName, type LivekitConfig } from './livekit.ts';
import { parseClientEvent } from './websocket.ts';

export const AGENT_STATE_ATTRIBUTE = 'lk.agent.state';
export const TOPICS = { agentEvent: 'agent-event', clientEvent: 'client-event', transcription: 'lk.transcription' } as const;
export const SEGMENT_ID_ATTRIBUTE = 'lk.segment_id';
export const FINAL_ATTRIBUTE = 'lk.transcription_final';
/** Agent audio queued in the room's audio source before frames are dropped (a stalled room never grows the heap). */
export const AUDIO_QUEUE_MS = 200;

/** The agent's participant identity in the session's room. */
export function agentIdentity(sessionId: string): string {
  return `agent-${sessionId}`;
}

/**
 * A token for the agent participant: its room only, publish (audio, data), subscribe, and
 * update its own attributes (`lk.agent.state`); kind `agent`.
 */
export async function mintAgentToken(cfg: Pick<LivekitConfig, 'apiKey' | 'apiSecret'>, sessionId: string, ttlSeconds: number, room: string = roomName(sessionId)): Promise<string> {
  const at = new AccessToken(cfg.apiKey, cfg.apiSecret, { identity: agentIdentity(sessionId), name: 'agent', ttl: Math.max(1, Math.ceil(ttlSeconds)), attributes: { [AGENT_STATE_ATTRIBUTE]: 'initializing' } });
  at.kind = 'agent';
  at.addGrant({ room, roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true, canUpdateOwnMetadata: true, agent: true, roomCreate: false, roomAdmin: false, roomList: false, roomRecord: false });
  return at.toJwt();
}

// ---------------------------------------------------------------------------------------------
// Message mapping (pure)

/** One room operation for one message of the session. */
export type RoomAction =
  | { kind: 'attributes'; attributes: Record<string, string> }
  | { kind: 'data'; topic: string; payload: Uint8Array }
  | { kind: 'text'; topic: string; text: string; attributes: Record<string, string>; senderIdentity?: string };

const encoder = new TextEncoder();

/**
 * What a session message becomes in the room (docs/api/sessions.md). `session.started` and
 * `session.moved` belong to the websocket transport and have no LiveKit form (null).
 */
export function roomActionFor(m: ServerMessage | SessionMessage, sessionId: string): RoomAction | null {
  if (m.topic === 'lk.agent.state') return { kind: 'attributes', attributes: { [AGENT_STATE_ATTRIBUTE]: m.state } };
  if (m.topic === 'lk.transcription') {
    return {
      kind: 'text',
      topic: TOPICS.transcription,
      text: m.text,
      attributes: { [SEGMENT_ID_ATTRIBUTE]: m.segmentId, [FINAL_ATTRIBUTE]: m.final ? 'true' : 'false' },
      ...(m.role === 'user' ? { senderIdentity: callerIdentity(sessionId) } : {}),
    };
  }
  if (m.topic === 'agent-event') {
    const { topic: _topic, ...event } = m;
    return { kind: 'data', topic: TOPICS.agentEvent, payload: encoder.encode(JSON.stringify(event)) };
  }
  if (m.topic === 'session' && m.type === 'session.ended') {
    return { kind: 'data', topic: TOPICS.agentEvent, payload: encoder.encode(JSON.stringify({ type: 'session.ended', reason: m.reason })) };
  }
  return null;
}

/** A `client-event` data packet as the session takes it; other topics, malformed JSON and unknown types give null. */
export function decodeClientPacket(payload: Uint8Array, topic: string | undefined): ClientEvent | null {
  if (topic !== TOPICS.clientEvent) return null;
  return parseClientEvent(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString('utf8'));
}

// ---------------------------------------------------------------------------------------------
// Audio conversion (pure)

/** Caller audio frames (any rate, any channel count) → the session's 16 kHz mono PCM bytes. */
export class InboundAudio {
  private resampler: Resampler | null = null;

  push(frame: { data: Int16Array; sampleRate: number; channels: number }): Uint8Array {
    let mono = frame.data;
    const ch = Math.max(1, frame.channels);
    if (ch > 1) {
      mono = new Int16Array(Math.floor(frame.data.length / ch));
      for (let i = 0; i < mono.length; i++) {
        let sum = 0;
        for (let c = 0; c < ch; c++) sum += frame.data[i * ch + c];
        mono[i] = Math.round(sum / ch);
      }
    }
    if (frame.sampleRate !== SESSION_SAMPLE_RATE_HZ) {
      if (!this.resampler || this.resampler.fromHz !== frame.sampleRate) this.resampler = createResampler(frame.sampleRate, SESSION_SAMPLE_RATE_HZ);
      mono = this.resampler.push(mono);
    }
    return int16ToPcmBytes(mono);
  }
}

/** The session's 16 kHz PCM bytes → samples at the published track's rate. */
export class OutboundAudio {
  private readonly resampler: Resampler | null;

  constructor(readonly rateHz: number = SESSION_SAMPLE_RATE_HZ) {
    this.resampler = rateHz === SESSION_SAMPLE_RATE_HZ ? null : createResampler(SESSION_SAMPLE_RATE_HZ, rateHz);
  }

  push(pcm: Uint8Array): Int16Array {
    const samples = pcmBytesToInt16(pcm);
    return this.resampler ? this.resampler.push(samples) : samples;
  }
}

// ---------------------------------------------------------------------------------------------
// The link

/** The room operations the agent link performs (`rtcRoomPort` adapts an rtc-node Room). */
export interface RoomPort {
  setAttributes(attributes: Record<string, string>): Promise<void>;
  publishData(topic: string, payload: Uint8Array): Promise<void>;
  sendText(topic: string, text: string, attributes: Record<string, string>, senderIdentity?: string): Promise<void>;
  /** Queues agent audio at the track's rate; false when the queue is full and the frame was dropped. */
  captureAudio(samples: Int16Array): boolean;
  /** Drops agent audio not yet played (the agent stopped speaking). */
  clearAudio(): void;
  /** Leaves the room. */
  disconnect(): Promise<void>;
}

/**
 * A `ClientLink` over a LiveKit room. Room operations run one after another in message order
 * (a transcript never overtakes the state change before it); audio goes straight to the
 * track's source.
 */
export class LivekitLink implements ClientLink {
  private queue: Promise<void> = Promise.resolve();
  private closed = false;
  private speaking = false;
  private droppedFrames = 0;
  private readonly out: OutboundAudio;

  constructor(
    private readonly port: RoomPort,
    private readonly sessionId: string,
    private readonly log: Pick<Logger, 'warn'>,
    publishRateHz: number = SESSION_SAMPLE_RATE_HZ,
    private readonly onClose?: (code: number, reason: string) => void,
  ) {
    this.out = new OutboundAudio(publishRateHz);
  }

  message(m: ServerMessage | SessionMessage): void {
    if (this.closed) return;
    if (m.topic === 'lk.agent.state') {
      // Leaving `speaking` (done, or interrupted): audio still queued in the source is dropped.
      if (this.speaking && m.state !== 'speaking') this.port.clearAudio();
      this.speaking = m.state === 'speaking';
    }
    const action = roomActionFor(m, this.sessionId);
    if (action) this.run(action);
  }

  audio(pcm: Uint8Array): void {
    if (this.closed) return;
    if (!this.port.captureAudio(this.out.push(pcm))) {
      this.droppedFrames++;
      if ((this.droppedFrames & 1023) === 1) this.log.warn({ dropped: this.droppedFrames }, 'livekit room too slow: agent audio frames dropped');
    }
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose?.(code, reason);
    this.queue = this.queue.then(() => this.port.disconnect()).catch((err) => this.log.warn({ err }, 'livekit room not left cleanly'));
  }

  /** Settles once every queued room operation has run (tests, shutdown). */
  flushed(): Promise<void> {
    return this.queue;
  }

  private run(a: RoomAction) {
    this.queue = this.queue
      .then(() => {
        if (a.kind === 'attributes') return this.port.setAttributes(a.attributes);
        if (a.kind === 'data') return this.port.publishData(a.topic, a.payload);
        return this.port.sendText(a.topic, a.text, a.attributes, a.senderIdentity);
      })
      .catch((err) => this.log.warn({ err, kind: a.kind }, 'livekit room operation failed'));
  }
}

// ---------------------------------------------------------------------------------------------
// The agent participant (needs a LiveKit server)

type Rtc = typeof import('@livekit/rtc-node');
type Room = InstanceType<Rtc['Room']>;

/** An rtc-node room and its audio source as a `RoomPort`. */
function rtcRoomPort(rtc: Rtc, room: Room, source: InstanceType<Rtc['AudioSource']>): RoomPort {
  const local = () => {
    if (!room.localParticipant) throw new Error('not connected to the room');
    return room.localParticipant;
  };
  return {
    setAttributes: (attributes) => local().setAttributes(attributes),
    publishData: (topic, payload) => local().publishData(payload, { reliable: true, topic }),
    async sendText(topic, text, attributes, senderIdentity) {
      const writer = await local().streamText({ topic, attributes, ...(senderIdentity ? { senderIdentity } : {}) });
      await writer.write(text);
      await writer.close();
    },
    captureAudio(samples) {
      if (source.closed || samples.length === 0) return true;
      if (source.queuedDuration > AUDIO_QUEUE_MS) return false;
      source.captureFrame(new rtc.AudioFrame(samples, source.sampleRate, 1, samples.length)).catch(() => {});
      return true;
    },
    clearAudio: () => source.clearQueue(),
    async disconnect() {
      await source.close().catch(() => {});
      await room.disconnect();
    },
  };
}

export interface LivekitAgentsOptions {
  config: LivekitConfig;
  runtime: Pick<SessionRuntime, 'connect'>;
  log: Logger;
  /** Rate of the published track; default 16 kHz (LiveKit encodes Opus at 48 kHz from it). */
  publishRateHz?: number;
  /** rtc-node, injectable; loaded on the first dispatch by default. */
  loadRtc?: () => Promise<Rtc>;
}

/**
 * A phone call whose media is in a LiveKit room (the livekit-sip carrier): the agent joins
 * `room`, waits for the phone's SIP participant `caller` until `deadline`, then `start()`s the
 * session (the phone-call service starts it directly: no session token). The phone leaving
 * the room, for any reason, is a hang-up (`user_hangup`): phones do not rejoin.
 */
export interface CallDispatch {
  sessionId: string;
  room: string;
  caller: string;
  deadline: Date;
  maxDurationSeconds: number;
  start(): Promise<LiveSession>;
  /** The agent could not join, the phone never appeared, or the session did not start. */
  onFailed(reason: 'join_failed' | 'caller_absent' | 'start_failed', err?: unknown): void;
}

interface Join {
  sessionId: string;
  room: string;
  caller: string;
  deadline: Date;
  ttlSeconds: number;
  start(): Promise<LiveSession>;
  /** A phone: any departure is a hang-up. */
  phone: boolean;
  onFailed?: CallDispatch['onFailed'];
}

/** Joins session rooms as the agent. One instance per node. */
export class LivekitAgents {
  private readonly rooms = new Set<Room>();
  private closing = false;
  /** rtc-node (the options' `loadRtc`, else the package); tests may swap it before the first dispatch. */
  loadRtc: () => Promise<Rtc>;

  constructor(private readonly o: LivekitAgentsOptions) {
    this.loadRtc = o.loadRtc ?? (() => import('@livekit/rtc-node'));
  }

  /** Sends the agent to the session's room (in the background; failures are logged). */
  dispatch(session: { id: string; expires_at: Date; max_duration_seconds: number }, sessionToken: string): void {
    const ttlSeconds = (session.expires_at.getTime() - Date.now()) / 1000 + session.max_duration_seconds + 60;
    this.join({ sessionId: session.id, room: roomName(session.id), caller: callerIdentity(session.id), deadline: session.expires_at, ttlSeconds, phone: false, start: () => this.o.runtime.connect(sessionToken) })
      .catch((err) => this.o.log.error({ err, sessionId: session.id }, 'livekit agent failed to join'));
  }

  /** Sends the agent to a phone call's room (in the background; failures reach `onFailed`). */
  dispatchCall(c: CallDispatch): void {
    const ttlSeconds = (c.deadline.getTime() - Date.now()) / 1000 + c.maxDurationSeconds + 60;
    this.join({ sessionId: c.sessionId, room: c.room, caller: c.caller, deadline: c.deadline, ttlSeconds, phone: true, start: c.start, onFailed: c.onFailed }).catch((err) => {
      this.o.log.error({ err, sessionId: c.sessionId }, 'livekit agent failed to join a call');
      c.onFailed('join_failed', err);
    });
  }

  private async join(j: Join): Promise<void> {
    if (this.closing) return j.onFailed?.('join_failed');
    const rtc = await this.loadRtc();
    const log = this.o.log.child({ sessionId: j.sessionId });
    const caller = j.caller;
    const session = { id: j.sessionId, expires_at: j.deadline };
    const room = new rtc.Room();
    this.rooms.add(room);
    room.once('disconnected', () => this.rooms.delete(room));
    await room.connect(this.o.config.url, await mintAgentToken(this.o.config, j.sessionId, j.ttlSeconds, j.room), { autoSubscribe: true, dynacast: false });
    const rate = this.o.publishRateHz ?? SESSION_SAMPLE_RATE_HZ;
    const source = new rtc.AudioSource(rate, 1, AUDIO_QUEUE_MS * 2);
    const track = rtc.LocalAudioTrack.createAudioTrack('agent', source);
    await room.localParticipant!.publishTrack(track, new rtc.TrackPublishOptions({ source: rtc.TrackSource.SOURCE_MICROPHONE }));
    const port = rtcRoomPort(rtc, room, source);
    await port.setAttributes({ [AGENT_STATE_ATTRIBUTE]: 'initializing' });

    // Wait for the caller until the session's connect deadline.
    const present = () => [...room.remoteParticipants.values()].some((p) => p.identity === caller);
    if (!present()) {
      const joined = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => done(false), Math.max(0, session.expires_at.getTime() - Date.now()));
        const onJoin = (p: { identity: string }) => p.identity === caller && done(true);
        const onGone = () => done(false);
        const done = (v: boolean) => {
          clearTimeout(timer);
          room.off('participantConnected', onJoin);
          room.off('disconnected', onGone);
          resolve(v);
        };
        room.on('participantConnected', onJoin);
        room.on('disconnected', onGone);
      });
      if (!joined) {
        log.info({}, 'caller never joined the livekit room');
        await port.disconnect().catch(() => {});
        j.onFailed?.('caller_absent');
        return;
      }
    }

    let live: LiveSession;
    try {
      live = await j.start();
    } catch (err) {
      if (!(err instanceof ConnectRefused)) log.error({ err }, 'livekit session failed to start');
      await port.publishData(TOPICS.agentEvent, encoder.encode(JSON.stringify({ type: 'error', code: 'internal_error' }))).catch(() => {});
      await port.disconnect().catch(() => {});
      j.onFailed?.('start_failed', err);
      return;
    }
    let left = false;
    const link = new LivekitLink(port, session.id, log, rate, () => {
      left = true;
    });
    const attach = () => {
      live.attach(link);
      link.message({ topic: 'lk.agent.state', state: live.handle.state });
    };
    attach();
    // A session that ends while the caller is away (hung up, grace period over) has no link
    // to close: the agent still says so and leaves the room.
    void live.handle.ended.then((e) => {
      if (left) return;
      link.message({ topic: 'session', type: 'session.ended', reason: e.reason });
      link.close(1000, e.reason);
    });

    // Caller audio: every audio track the caller publishes, as 16 kHz mono.
    const inbound = new InboundAudio();
    const listen = (t: InstanceType<Rtc['RemoteAudioTrack']>) => {
      const stream = new rtc.AudioStream(t, { sampleRate: SESSION_SAMPLE_RATE_HZ, numChannels: 1 });
      (async () => {
        for await (const frame of stream) {
          if (left) break;
          live.handle.sendAudio(inbound.push(frame));
        }
      })().catch((err) => log.warn({ err }, 'caller audio stream failed'));
    };
    room.on('trackSubscribed', (t, _pub, p) => {
      if (p.identity === caller && t.kind === rtc.TrackKind.KIND_AUDIO) listen(t as InstanceType<Rtc['RemoteAudioTrack']>);
    });
    for (const p of room.remoteParticipants.values()) {
      if (p.identity !== caller) continue;
      for (const pub of p.trackPublications.values()) if (pub.track && pub.track.kind === rtc.TrackKind.KIND_AUDIO) listen(pub.track as InstanceType<Rtc['RemoteAudioTrack']>);
    }
    room.on('dataReceived', (payload, p, _kind, topic) => {
      if (p?.identity !== caller) return;
      const e = decodeClientPacket(payload, topic);
      if (!e) return;
      if (e.type === 'client_tool.result') live.clientToolResult(e);
      else live.handle.send(e);
    });
    room.on('participantDisconnected', (p) => {
      if (p.identity !== caller || left) return;
      live.detach(link, j.phone || p.disconnectReason === rtc.DisconnectReason.CLIENT_INITIATED ? 'clean' : 'drop');
    });
    room.on('participantConnected', (p) => {
      if (p.identity === caller && !left && !j.phone) attach();
    });
    room.on('disconnected', () => {
      if (!left) live.detach(link, 'drop');
    });
  }

  /** Leaves every room (the sessions themselves are drained by the runtime). */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.rooms].map((r) => r.disconnect()));
  }
}

/**
 * The session API's `mintTransportToken` with the agent: mints the caller's room token
 * (`livekitMinter`) and sends the agent to the room to wait for the caller.
 */
export function livekitSessionMinter(cfg: LivekitConfig, agents: LivekitAgents) {
  const mint = livekitMinter(cfg);
  return async (session: { id: string; expires_at: Date; max_duration_seconds: number; end_user_id?: string | null }, sessionToken: string) => {
    const minted = await mint(session, sessionToken);
    agents.dispatch(session, sessionToken);
    return minted;
  };
}
