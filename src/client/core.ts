/**
 * What every transport of the SDK shares: listeners, the agent state, the mapping of the
 * wire protocol's messages (GAPS.md §5, as the websocket transport frames them: an object
 * with `topic`) to conversation events, and the end of the conversation.
 */
import type { AgentState, Conversation, ConversationEvents, EndInfo, StartOptions, Transcript } from './types.ts';

export interface Core {
  readonly state: AgentState;
  readonly finished: boolean;
  readonly ended: Promise<EndInfo>;
  emit<K extends keyof ConversationEvents>(k: K, e: ConversationEvents[K]): void;
  on<K extends keyof ConversationEvents>(event: K, listener: (e: ConversationEvents[K]) => void): () => void;
  /** One protocol message; unknown topics, types and fields are ignored. */
  handle(m: Record<string, unknown>): void;
  /** Agent audio, 16 kHz mono. */
  audio(pcm: Int16Array): void;
  /** Ends the conversation once (later calls do nothing). */
  finish(reason: string): void;
  /** Called at the end (the microphone's stop). */
  onFinish(fn: () => void): void;
}

export function createCore(options: StartOptions): Core {
  const listeners = new Map<string, Set<(e: unknown) => void>>();
  const finishers: (() => void)[] = [];
  let state: AgentState = 'initializing';
  let finished = false;
  let settleEnded!: (e: EndInfo) => void;
  const ended = new Promise<EndInfo>((r) => (settleEnded = r));
  const emit: Core['emit'] = (k, e) => {
    for (const l of listeners.get(k) ?? []) {
      try {
        l(e);
      } catch {
        // a listener's failure is its own
      }
    }
  };
  const finish = (reason: string) => {
    if (finished) return;
    finished = true;
    for (const f of finishers.splice(0)) {
      try {
        f();
      } catch {
        // best effort
      }
    }
    const e = { reason };
    emit('ended', e);
    settleEnded(e);
  };
  return {
    get state() {
      return state;
    },
    get finished() {
      return finished;
    },
    ended,
    emit,
    on(event, listener) {
      let set = listeners.get(event);
      if (!set) listeners.set(event, (set = new Set()));
      set.add(listener as (e: unknown) => void);
      return () => set!.delete(listener as (e: unknown) => void);
    },
    handle(m) {
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
        else if (m.type === 'session.ended') finish(String(m.reason));
      } else if (m.topic === 'session' && m.type === 'session.ended') {
        finish(String(m.reason));
      }
    },
    audio(pcm) {
      options.onAudio?.(pcm);
      emit('audio', pcm);
    },
    finish,
    onFinish(fn) {
      if (finished) fn();
      else finishers.push(fn);
    },
  };
}

/** What a transport provides to the conversation object. */
export interface TransportIo {
  sessionId(): string;
  /** A `client-event` message (without topic); throws `not_connected` when it cannot be sent. */
  send(m: Record<string, unknown>): void;
  /** Caller audio, 16 kHz mono; dropped when not connected. */
  sendAudio(pcm: Int16Array): void;
  /** Ends the conversation gracefully; settles with the end. */
  hangup(): Promise<EndInfo>;
}

/** The public conversation object over a core and a transport. */
export function conversationOf(core: Core, io: TransportIo): Conversation {
  return {
    get sessionId() {
      return io.sessionId();
    },
    get state() {
      return core.state;
    },
    ended: core.ended,
    on: (event, listener) => core.on(event, listener),
    sendUserMessage(text, o = {}) {
      io.send({ type: 'user.message', text, ...(o.audio === false ? { audio: false } : {}) });
    },
    sendActivity() {
      io.send({ type: 'user.activity' });
    },
    interrupt() {
      io.send({ type: 'user.interrupt' });
    },
    sendAudio(pcm) {
      if (core.finished) return;
      io.sendAudio(pcm instanceof Int16Array ? pcm : new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + (pcm.byteLength & ~1))));
    },
    hangup: () => (core.finished ? core.ended : io.hangup()),
  };
}
