/**
 * What every transport of the SDK shares: listeners, the agent state, the mapping of the
 * wire protocol's messages (docs/api/sessions.md, as the websocket transport frames them: an object
 * with `topic`) to conversation events, and the end of the conversation.
 */
import { ClientError, type AgentState, type ClientToolCall, type Conversation, type ConversationEvents, type EndInfo, type StartOptions, type Transcript } from './types.ts';

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
  /** How many listeners an event has. */
  listenerCount(event: keyof ConversationEvents): number;
  /** Runs after each `clientToolCall` event (the automatic answers; set by `conversationOf`). */
  onClientToolCall: ((call: ClientToolCall) => void) | null;
  /**
   * The caller interrupted the reply in progress (`interrupt()`, a typed message): the speaker
   * stops, and agent audio is dropped until the next agent state, which the platform sends
   * after the last audio of the interrupted reply.
   */
  interrupted(): void;
}

export function createCore(options: StartOptions): Core {
  const listeners = new Map<string, Set<(e: unknown) => void>>();
  const finishers: (() => void)[] = [];
  let state: AgentState = 'initializing';
  let finished = false;
  let dropAudio = false;
  const speaker = options.speaker;
  const stopSpeaker = () => {
    try {
      speaker?.stop();
    } catch {
      // the speaker's failure is its own
    }
  };
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
    try {
      speaker?.close?.();
    } catch {
      // best effort
    }
    emit('ended', e);
    settleEnded(e);
  };
  const core: Core = {
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
        const before = state;
        state = m.state as AgentState;
        // Barge-in: the caller spoke over the agent, whose queued audio must not play on
        // (unless the caller's own interrupt already stopped it).
        if (before === 'speaking' && state === 'listening' && !dropAudio) stopSpeaker();
        dropAudio = false;
        emit('state', state);
      } else if (m.topic === 'lk.transcription') {
        emit('transcript', { role: m.role as Transcript['role'], segmentId: String(m.segmentId), text: String(m.text), final: m.final === true });
      } else if (m.topic === 'agent-event') {
        const tool = { callId: String(m.callId), toolName: String(m.toolName), source: String(m.toolSource) };
        if (m.type === 'tool.started') emit('toolCallStarted', { ...tool, input: m.input as string, ...(m.inputTruncated ? { inputTruncated: true } : {}) });
        else if (m.type === 'tool.completed') emit('toolCallCompleted', { ...tool, output: m.output as string, ...(m.outputTruncated ? { outputTruncated: true } : {}) });
        else if (m.type === 'tool.failed') emit('toolCallFailed', { ...tool, error: m.error as string });
        else if (m.type === 'client_tool.call') {
          const params = m.params && typeof m.params === 'object' && !Array.isArray(m.params) ? (m.params as Record<string, unknown>) : {};
          const call: ClientToolCall = { callId: String(m.callId), toolName: String(m.toolName), params, expectsResponse: m.expectsResponse !== false };
          emit('clientToolCall', call);
          core.onClientToolCall?.(call);
        } else if (m.type === 'turn.metrics') {
          const ms = (k: string) => (typeof m[k] === 'number' ? (m[k] as number) : null);
          emit('turnMetrics', { turnId: Number(m.turn_id), recognitionMs: ms('recognition_ms'), decideMs: ms('decide_ms'), modelMs: ms('model_ms'), synthesisMs: ms('synthesis_ms'), totalMs: ms('total_ms'), platformMs: ms('platform_ms') });
        } else if (m.type === 'error') emit('error', { code: String(m.code) });
        else if (m.type === 'session.ended') finish(String(m.reason));
      } else if (m.topic === 'session' && m.type === 'session.ended') {
        finish(String(m.reason));
      }
    },
    audio(pcm) {
      options.onAudio?.(pcm);
      emit('audio', pcm);
      if (speaker && !dropAudio && !finished) {
        try {
          speaker.play(pcm);
        } catch {
          // the speaker's failure is its own
        }
      }
    },
    interrupted() {
      if (state !== 'speaking' && state !== 'thinking') return;
      stopSpeaker();
      dropAudio = true;
    },
    finish,
    onFinish(fn) {
      if (finished) fn();
      else finishers.push(fn);
    },
    listenerCount: (event) => listeners.get(event)?.size ?? 0,
    onClientToolCall: null,
  };
  return core;
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

/**
 * Answers client tool calls with `options.clientTools` (see StartOptions): the handler's
 * value as the result, its error as an error result; a call nobody takes gets an error
 * result. A result that cannot be sent (disconnected, ended) is dropped: the platform then
 * times the call out.
 */
function answerClientTools(core: Core, send: (callId: string, result: unknown, isError: boolean) => void, tools: StartOptions['clientTools']): void {
  core.onClientToolCall = (call) => {
    const handler = tools && Object.hasOwn(tools, call.toolName) ? tools[call.toolName] : undefined;
    if (!handler) {
      if (call.expectsResponse && core.listenerCount('clientToolCall') === 0) send(call.callId, `Client tool ${call.toolName} is not defined on the client`, true);
      return;
    }
    void (async () => {
      try {
        const result = await handler(call.params, call);
        if (call.expectsResponse) send(call.callId, result === undefined ? null : result, false);
      } catch (err) {
        if (call.expectsResponse) send(call.callId, err instanceof Error ? err.message : String(err), true);
      }
    })();
  };
}

/** The public conversation object over a core and a transport. */
export function conversationOf(core: Core, io: TransportIo, options: StartOptions = {}): Conversation {
  const sendResult = (callId: string, result: unknown, isError: boolean) =>
    io.send({ type: 'client_tool.result', callId, ...(result !== undefined ? { result } : {}), ...(isError ? { isError: true } : {}) });
  answerClientTools(core, (callId, result, isError) => {
    if (core.finished) return;
    try {
      sendResult(callId, result, isError);
    } catch {
      // not connected: dropped (the platform times the call out)
    }
  }, options.clientTools);
  // Typed messages sent while the agent is still `initializing` (its recognizer opening) wait for
  // its first state after that: the platform acts on conversation messages only once it is live.
  const early: Record<string, unknown>[] = [];
  core.on('state', (state) => {
    if (state === 'initializing' || early.length === 0) return;
    for (const m of early.splice(0)) {
      try {
        io.send(m);
      } catch {
        // disconnected again: lost with the connection, as any message would be
      }
    }
  });
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
      const m = { type: 'user.message', text, ...(o.audio === false ? { audio: false } : {}) };
      if (core.state === 'initializing' && !core.finished) {
        early.push(m);
        return;
      }
      io.send(m);
      core.interrupted(); // a typed message interrupts a reply in progress
    },
    sendActivity() {
      io.send({ type: 'user.activity' });
    },
    interrupt() {
      io.send({ type: 'user.interrupt' });
      core.interrupted();
    },
    sendAudio(pcm) {
      if (core.finished) return;
      io.sendAudio(pcm instanceof Int16Array ? pcm : new Int16Array(pcm.buffer.slice(pcm.byteOffset, pcm.byteOffset + (pcm.byteLength & ~1))));
    },
    sendClientToolResult(callId, result, o = {}) {
      sendResult(callId, result, o.isError === true);
    },
    hangup: () => (core.finished ? core.ended : io.hangup()),
  };
}

/**
 * Starts `options.microphone` on a joined conversation, stopped at its end. A microphone that
 * cannot start ends the conversation (nobody could speak in it) and rejects with
 * `audio_unavailable` (or the microphone's own `ClientError`).
 */
export async function startMicrophone(core: Core, convo: Conversation, options: StartOptions): Promise<void> {
  if (!options.microphone) return;
  try {
    const stop = await options.microphone.start((pcm) => convo.sendAudio(pcm));
    core.onFinish(stop);
  } catch (err) {
    convo.hangup().catch(() => {});
    if (err instanceof ClientError) throw err;
    throw new ClientError('audio_unavailable', `The microphone could not start: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
}
