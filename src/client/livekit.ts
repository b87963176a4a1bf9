/**
 * The SDK's `livekit` transport (docs/api/sessions.md): join `livekit_url` with `token`, publish the
 * microphone, hear the agent's track; `agent-event` / `client-event` data packets, the
 * `lk.transcription` text streams (`lk.segment_id`, `lk.transcription_final`; the sender's
 * identity gives the role) and the agent's `lk.agent.state` attribute.
 *
 * The room itself comes from a `LivekitRoomFactory`: pass one in `options.livekit.roomFactory`
 * (Node, tests, a custom media stack), or let the SDK build one on the `livekit-client`
 * package (browsers), loaded on demand. Reconnection is LiveKit's own (no resume secret).
 */
import { conversationOf, createCore, startMicrophone } from './core.ts';
import { ClientError, type Conversation, type SessionResponse, type StartOptions } from './types.ts';

export const AGENT_STATE_ATTRIBUTE = 'lk.agent.state';
const HANGUP_GRACE_MS = 3_000;

/** What the room reports to the SDK. */
export interface LivekitHandlers {
  /** A data packet (reliable); `senderIdentity` undefined when the server sent it. */
  data(topic: string | undefined, payload: Uint8Array, senderIdentity: string | undefined): void;
  /** A complete text stream with its attributes. */
  text(topic: string, text: string, attributes: Record<string, string>, senderIdentity: string): void;
  /** Attributes of a participant changed (also reported once for those present at join). */
  attributes(changed: Record<string, string>, identity: string): void;
  /** Agent audio, 16 kHz mono, when the room decodes it (browsers play the track themselves). */
  audio(pcm: Int16Array): void;
  reconnecting(): void;
  reconnected(): void;
  /** The connection ended; `byClient` when this side left. */
  disconnected(byClient: boolean): void;
}

/** A LiveKit room as the SDK uses it. */
export interface LivekitRoom {
  /** Joins; resolves with the local participant's identity. Rejects on failure (`unauthorized: true` for a refused token). */
  connect(url: string, token: string, handlers: LivekitHandlers): Promise<{ identity: string }>;
  /** A reliable data packet on `topic`. */
  publishData(topic: string, payload: Uint8Array): Promise<void>;
  /** Caller audio frames (16 kHz mono), when the app feeds the microphone itself (`options.microphone`). */
  sendAudio?(pcm: Int16Array): void;
  /** Publishes the device's microphone (used when `options.microphone` is not given). */
  enableMicrophone?(): Promise<void>;
  disconnect(): Promise<void>;
}

export type LivekitRoomFactory = () => LivekitRoom;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export async function startLivekit(session: SessionResponse, options: StartOptions): Promise<Conversation> {
  const factory = options.livekit?.roomFactory ?? (await livekitClientFactory());
  if (!factory) throw new ClientError('unsupported_transport', 'The livekit transport needs the livekit-client package or options.livekit.roomFactory');
  if (typeof session.livekit_url !== 'string' || typeof session.token !== 'string') throw new ClientError('connection_failed', 'The session response has no livekit_url or token');
  const core = createCore(options);
  const room = factory();
  let identity = '';
  let connected = false;
  let hangingUp = false;
  let leaving = false;
  const leave = () => {
    if (leaving) return;
    leaving = true;
    room.disconnect().catch(() => {});
  };
  core.onFinish(leave);

  const handlers: LivekitHandlers = {
    data(topic, payload) {
      if (topic !== 'agent-event') return;
      let m: unknown;
      try {
        m = JSON.parse(decoder.decode(payload));
      } catch {
        return;
      }
      if (m && typeof m === 'object' && !Array.isArray(m)) core.handle({ ...(m as Record<string, unknown>), topic: 'agent-event' });
    },
    text(topic, text, attributes, sender) {
      if (topic !== 'lk.transcription') return;
      core.handle({ topic: 'lk.transcription', role: sender === identity ? 'user' : 'agent', segmentId: attributes['lk.segment_id'] ?? '', text, final: attributes['lk.transcription_final'] === 'true' });
    },
    attributes(changed, who) {
      if (who !== identity && typeof changed[AGENT_STATE_ATTRIBUTE] === 'string') core.handle({ topic: 'lk.agent.state', state: changed[AGENT_STATE_ATTRIBUTE] });
    },
    audio: (pcm) => core.audio(pcm),
    reconnecting: () => core.emit('reconnecting', { attempt: 1 }),
    reconnected: () => core.emit('reconnected', {}),
    disconnected(byClient) {
      connected = false;
      core.finish(hangingUp || byClient ? 'user_hangup' : 'connection_lost');
    },
  };
  try {
    identity = (await room.connect(session.livekit_url, session.token, handlers)).identity;
    connected = true;
  } catch (err) {
    leave();
    if ((err as { unauthorized?: boolean }).unauthorized) throw new ClientError('unauthorized', 'The room refused the token');
    throw new ClientError('connection_failed', `Could not join the room: ${(err as Error)?.message ?? String(err)}`);
  }

  const send = (m: Record<string, unknown>) => {
    if (!connected || core.finished) throw new ClientError('not_connected', 'The conversation is not connected');
    room.publishData('client-event', encoder.encode(JSON.stringify(m))).catch(() => {});
  };
  const convo = conversationOf(core, {
    sessionId: () => session.session_id,
    send,
    sendAudio: (pcm) => {
      if (connected) room.sendAudio?.(pcm);
    },
    async hangup() {
      hangingUp = true;
      try {
        send({ type: 'user.hangup' });
      } catch {
        core.finish('user_hangup');
      }
      // The agent answers with `session.ended` and leaves; if it cannot, leave anyway.
      const timer = setTimeout(() => core.finish('user_hangup'), HANGUP_GRACE_MS);
      core.onFinish(() => clearTimeout(timer));
      return core.ended;
    },
  }, options);
  // A room that takes no PCM (livekit-client in browsers) captures the device over WebRTC itself:
  // a microphone hook (`browserMicrophone()`) has nowhere to send, so the room's own is used.
  if (options.microphone && room.sendAudio) await startMicrophone(core, convo, options);
  else await room.enableMicrophone?.();
  return convo;
}

/**
 * A room factory on the `livekit-client` package (a dependency; browsers), or null when it
 * cannot be loaded. Agent audio plays through an `<audio>` element the package creates
 * (`track.attach()`).
 */
async function livekitClientFactory(): Promise<LivekitRoomFactory | null> {
  let lk: typeof import('livekit-client');
  try {
    lk = await import('livekit-client');
  } catch {
    return null;
  }
  return () => {
    const room = new lk.Room();
    let leftByUs = false;
    return {
      async connect(url, token, h) {
        room.on(lk.RoomEvent.DataReceived, (payload, participant, _kind, topic) => h.data(topic, payload, participant?.identity));
        room.on(lk.RoomEvent.ParticipantAttributesChanged, (changed, p) => h.attributes(changed, p.identity));
        room.on(lk.RoomEvent.TrackSubscribed, (track) => {
          if (track.kind === lk.Track.Kind.Audio && typeof document !== 'undefined') document.body.appendChild(track.attach());
        });
        room.on(lk.RoomEvent.Reconnecting, () => h.reconnecting());
        room.on(lk.RoomEvent.Reconnected, () => h.reconnected());
        room.on(lk.RoomEvent.Disconnected, () => h.disconnected(leftByUs));
        room.registerTextStreamHandler('lk.transcription', async (reader, from) => {
          h.text('lk.transcription', await reader.readAll(), reader.info.attributes ?? {}, from.identity);
        });
        try {
          await room.connect(url, token);
        } catch (err) {
          throw Object.assign(err as object, { unauthorized: /401|not ?allowed|unauthori[sz]ed/i.test(String((err as Error)?.message)) });
        }
        for (const p of room.remoteParticipants.values()) if (p.attributes) h.attributes(p.attributes, p.identity);
        return { identity: room.localParticipant.identity };
      },
      publishData: (topic, payload) => room.localParticipant.publishData(Uint8Array.from(payload), { reliable: true, topic }),
      enableMicrophone: async () => { await room.localParticipant.setMicrophoneEnabled(true); },
      async disconnect() {
        leftByUs = true;
        await room.disconnect();
      },
    };
  };
}
