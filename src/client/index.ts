/**
 * `parley/client`: the client SDK for browsers and Node. Pass the session creation response
 * unmodified to `start()`; it connects by `transport` and never falls back to another one.
 *
 * ```ts
 * import { start } from 'parley/client';
 * const convo = await start(await (await fetch('/my-backend/session')).json(), {
 *   onAudio: (pcm) => speaker.play(pcm),            // agent audio, 16 kHz Int16 PCM
 *   microphone: myMic,                              // { start(onFrame) → stop }
 * });
 * convo.on('transcript', (t) => console.log(t.role, t.text, t.final));
 * convo.sendUserMessage('Hello');
 * await convo.hangup();
 * ```
 *
 * Works in browsers (their `WebSocket`) and in Node 20 (the `ws` package, loaded on demand).
 * Wire protocol: docs/websocket-transport.md.
 */

/** The agent's state as the platform reports it. */
export type AgentState = 'initializing' | 'idle' | 'listening' | 'thinking' | 'speaking';

/** The response of `POST /v1/agent/sessions`, as returned by the server. */
export interface SessionResponse {
  session_id: string;
  transport: string;
  token: string;
  expires_at?: string;
  max_duration_seconds?: number;
  websocket_url?: string;
  livekit_url?: string;
  [key: string]: unknown;
}

export type ClientErrorCode = 'unsupported_transport' | 'unauthorized' | 'connection_failed' | 'not_connected';

/** Errors of the SDK carry a `code`. */
export class ClientError extends Error {
  constructor(
    readonly code: ClientErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ClientError';
  }
}

/** A microphone: started with a frame callback (16 kHz Int16 PCM), returns its stop function. */
export interface Microphone {
  start(onFrame: (pcm: Int16Array) => void): (() => void) | Promise<() => void>;
}

/** The minimal WebSocket shape the SDK needs (browser WebSocket and `ws` both fit). */
export interface WebSocketLike {
  binaryType: string;
  readyState: number;
  send(data: string | ArrayBufferLike | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
}
export type WebSocketFactory = new (url: string) => WebSocketLike;

export interface StartOptions {
  /** Agent audio, 16 kHz mono Int16 PCM, paced in real time by the server. */
  onAudio?: (pcm: Int16Array) => void;
  /** Started once connected; its frames are sent as caller audio. */
  microphone?: Microphone;
  /** WebSocket implementation (default: the global one, else the `ws` package). */
  WebSocket?: WebSocketFactory;
  /** Reconnect automatically after a dropped connection (default true). */
  reconnect?: boolean;
  /** Attempts before giving up (default 5); delays grow from 250 ms to 4 s. */
  maxReconnectAttempts?: number;
}

export interface Transcript {
  role: 'user' | 'agent';
  segmentId: string;
  text: string;
  final: boolean;
}

export interface ToolCallEvent {
  callId: string;
  toolName: string;
  source: string;
  input?: string;
  inputTruncated?: boolean;
  output?: string;
  outputTruncated?: boolean;
  error?: string;
}

export interface EndInfo {
  /** `user_hangup`, `agent_hangup`, `connection_lost`, or the platform's reason (`max_duration`, `ended_by_api`, …). */
  reason: string;
}

export interface ConversationEvents {
  state: AgentState;
  transcript: Transcript;
  toolCallStarted: ToolCallEvent;
  toolCallCompleted: ToolCallEvent;
  toolCallFailed: ToolCallEvent;
  error: { code: string; message?: string };
  audio: Int16Array;
  reconnecting: { attempt: number };
  reconnected: Record<string, never>;
  ended: EndInfo;
}

export interface Conversation {
  readonly sessionId: string;
  readonly state: AgentState;
  /** Settles when the conversation has ended. */
  readonly ended: Promise<EndInfo>;
  on<K extends keyof ConversationEvents>(event: K, listener: (e: ConversationEvents[K]) => void): () => void;
  /** A typed user turn; `audio: false` asks for a text-only reply. */
  sendUserMessage(text: string, options?: { audio?: boolean }): void;
  /** Tells the agent the user is active (typing): suppresses idle re-engagement. */
  sendActivity(): void;
  /** Stops the agent mid-reply. */
  interrupt(): void;
  /** Caller audio: 16 kHz mono 16-bit PCM (Int16Array or its little-endian bytes). */
  sendAudio(pcm: Int16Array | Uint8Array): void;
  /** Ends the conversation gracefully. */
  hangup(): Promise<EndInfo>;
}

const SUPPORTED = new Set(['websocket']);

async function defaultWebSocket(): Promise<WebSocketFactory> {
  const g = (globalThis as { WebSocket?: WebSocketFactory }).WebSocket;
  if (g) return g;
  const mod = 'ws'; // a variable: bundlers for browsers must not try to include it
  const ws = (await import(mod)) as { default?: WebSocketFactory; WebSocket?: WebSocketFactory };
  return (ws.WebSocket ?? ws.default)!;
}

/**
 * Joins the conversation described by `session` (the creation response, unmodified).
 * Resolves once connected; rejects with `ClientError`: `unsupported_transport` for a
 * transport this SDK does not speak (never a fallback), `unauthorized` for a used or
 * expired token, `connection_failed` otherwise.
 */
export async function start(session: SessionResponse, options: StartOptions = {}): Promise<Conversation> {
  if (!session || typeof session !== 'object' || !SUPPORTED.has(session.transport)) {
    throw new ClientError('unsupported_transport', `Unsupported transport: ${String(session?.transport)}`);
  }
  if (typeof session.websocket_url !== 'string' || typeof session.token !== 'string') throw new ClientError('connection_failed', 'The session response has no websocket_url or token');
  const WS = options.WebSocket ?? (await defaultWebSocket());
  const listeners = new Map<string, Set<(e: unknown) => void>>();
  const emit = <K extends keyof ConversationEvents>(k: K, e: ConversationEvents[K]) => {
    for (const l of listeners.get(k) ?? []) {
      try {
        l(e);
      } catch {
        // a listener's failure is its own
      }
    }
  };
  let state: AgentState = 'initializing';
  let socket: WebSocketLike | null = null;
  let resume = '';
  let sessionId = session.session_id;
  let finished = false;
  let hangingUp = false;
  let stopMic: (() => void) | null = null;
  let settleEnded!: (e: EndInfo) => void;
  const ended = new Promise<EndInfo>((r) => (settleEnded = r));
  const finish = (reason: string) => {
    if (finished) return;
    finished = true;
    stopMic?.();
    stopMic = null;
    const e = { reason };
    emit('ended', e);
    settleEnded(e);
  };

  const onMessage = (data: unknown) => {
    if (typeof data !== 'string') {
      const buf = data instanceof ArrayBuffer ? data : ArrayBuffer.isView(data) ? (data as Uint8Array).slice().buffer : null;
      if (!buf) return;
      const pcm = new Int16Array(buf, 0, buf.byteLength >> 1);
      options.onAudio?.(pcm);
      emit('audio', pcm);
      return;
    }
    let m: Record<string, unknown>;
    try {
      m = JSON.parse(data);
    } catch {
      return;
    }
    if (m.topic === 'lk.agent.state') {
      state = m.state as AgentState;
      emit('state', state);
    } else if (m.topic === 'lk.transcription') {
      emit('transcript', { role: m.role as Transcript['role'], segmentId: String(m.segmentId), text: String(m.text), final: m.final === true });
    } else if (m.topic === 'agent-event') {
      const tool = { callId: String(m.callId), toolName: String(m.toolName), source: String(m.toolSource) };
      if (m.type === 'tool.started') emit('toolCallStarted', { ...tool, input: m.input as string, ...(m.inputTruncated ? { inputTruncated: true } : {}) });
      else if (m.type === 'tool.completed') emit('toolCallCompleted', { ...tool, output: m.output as string, ...(m.outputTruncated ? { outputTruncated: true } : {}) });
      else if (m.type === 'tool.failed') emit('toolCallFailed', { ...tool, error: m.error as string });
      else if (m.type === 'error') emit('error', { code: String(m.code) });
    } else if (m.topic === 'session' && m.type === 'session.ended') {
      finish(String(m.reason));
    }
  };

  /** Opens one socket; resolves on `session.started`, rejects if it closes first. */
  const open = (url: string) =>
    new Promise<void>((resolve, reject) => {
      const ws = new WS(url);
      ws.binaryType = 'arraybuffer';
      let started = false;
      ws.onmessage = (ev) => {
        if (!started && typeof ev.data === 'string') {
          try {
            const m = JSON.parse(ev.data);
            if (m.topic === 'session' && m.type === 'session.started') {
              started = true;
              resume = m.resume;
              sessionId = m.sessionId;
              socket = ws;
              resolve();
              return;
            }
          } catch {
            // not JSON: fall through
          }
        }
        onMessage(ev.data);
      };
      ws.onerror = () => {};
      ws.onclose = (ev) => {
        if (!started) {
          reject(ev.code === 4401 ? new ClientError('unauthorized', ev.reason || 'Unauthorized') : Object.assign(new ClientError('connection_failed', ev.reason || `Connection closed (${ev.code})`), { closeCode: ev.code }));
          return;
        }
        if (socket === ws) socket = null;
        void onClosed(ev.code);
      };
    });

  const onClosed = async (code: number) => {
    if (finished) return;
    if (hangingUp) return finish('user_hangup');
    if (code === 1000 || options.reconnect === false) return finish(code === 1000 ? 'ended' : 'connection_lost');
    const max = options.maxReconnectAttempts ?? 5;
    for (let attempt = 1; attempt <= max && !finished; attempt++) {
      emit('reconnecting', { attempt });
      await new Promise((r) => setTimeout(r, Math.min(4000, 250 * 2 ** (attempt - 1))));
      const base = session.websocket_url!;
      const url = `${base}${base.includes('?') ? '&' : '?'}session_id=${encodeURIComponent(sessionId)}&resume=${encodeURIComponent(resume)}`;
      try {
        await open(url);
        emit('reconnected', {});
        return;
      } catch (err) {
        const c = (err as { closeCode?: number }).closeCode;
        if (err instanceof ClientError && (err.code === 'unauthorized' || c === 4404)) break;
      }
    }
    finish('connection_lost');
  };

  const base = session.websocket_url;
  await open(`${base}${base.includes('?') ? '&' : '?'}token=${encodeURIComponent(session.token)}`);

  const send = (m: object) => {
    if (!socket || finished) throw new ClientError('not_connected', 'The conversation is not connected');
    socket.send(JSON.stringify({ topic: 'client-event', ...m }));
  };

  const convo: Conversation = {
    get sessionId() {
      return sessionId;
    },
    get state() {
      return state;
    },
    ended,
    on(event, listener) {
      let set = listeners.get(event);
      if (!set) listeners.set(event, (set = new Set()));
      set.add(listener as (e: unknown) => void);
      return () => set!.delete(listener as (e: unknown) => void);
    },
    sendUserMessage(text, o = {}) {
      send({ type: 'user.message', text, ...(o.audio === false ? { audio: false } : {}) });
    },
    sendActivity() {
      send({ type: 'user.activity' });
    },
    interrupt() {
      send({ type: 'user.interrupt' });
    },
    sendAudio(pcm) {
      if (!socket || finished) return;
      const bytes = pcm instanceof Int16Array ? new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength) : pcm;
      socket.send(bytes);
    },
    async hangup() {
      if (finished) return ended;
      hangingUp = true;
      try {
        send({ type: 'user.hangup' });
      } catch {
        finish('user_hangup');
      }
      return ended;
    },
  };
  if (options.microphone) stopMic = await options.microphone.start((pcm) => convo.sendAudio(pcm));
  return convo;
}
