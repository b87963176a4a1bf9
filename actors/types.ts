/**
 * What a session actor needs and produces. Actors see only these interfaces: the runtime
 * (`src/sessions/runtime.ts`) adapts the inference client, the transport and the store to them;
 * tests pass fakes from `test/fixtures/`.
 */
import type { Clock } from './clock.ts';

/** Agent state as the client sees it (docs/api/sessions.md `lk.agent.state`). */
export type AgentState = 'initializing' | 'idle' | 'listening' | 'thinking' | 'speaking';

/** Sample rate of all audio at the actor boundary: 16 kHz, mono, 16-bit little-endian PCM. */
export const SESSION_SAMPLE_RATE_HZ = 16_000;

export interface Timed {
  text: string;
  startMs: number;
  endMs: number;
}

/** Events of a realtime transcription stream. */
export type SttEvent =
  | { type: 'speech_started'; atMs: number }
  | { type: 'partial'; text: string }
  | { type: 'committed'; text: string }
  | { type: 'speech_ended'; atMs: number };

export interface SttStream extends AsyncIterable<SttEvent> {
  /** A frame of 16 kHz PCM bytes, read during the call only (the caller may reuse its buffer). */
  sendAudio(pcm: Uint8Array): void;
  end(): void;
  cancel(): void;
}

/** Events of a live synthesis stream: audio (16 kHz PCM) with the characters it speaks. */
export type TtsEvent =
  | { type: 'audio'; pcm: Uint8Array; offsetMs: number; chars: Timed[] }
  | { type: 'flushed' };

export interface TtsStream extends AsyncIterable<TtsEvent> {
  send(text: string): void;
  flush(): void;
  /** Speak what is left, then end the iteration. */
  end(): void;
  cancel(): void;
}

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  role: ChatRole;
  content: string;
  toolCalls?: { id: string; name: string; argumentsJson: string }[];
  toolCallId?: string;
  name?: string;
}

export interface ToolSpec {
  name: string;
  description: string;
  parametersJsonSchema: string;
}

export type LlmEvent =
  | { type: 'text'; text: string }
  | { type: 'tool_call'; id: string; name: string; argumentsJson: string }
  | { type: 'finish'; reason: string };

/** Inference as a session uses it. Aborting the signal cancels the call. */
export interface SessionBackend {
  transcribe(o: { language: string; signal: AbortSignal }): Promise<SttStream>;
  generate(o: { messages: ChatMessage[]; tools: ToolSpec[]; signal: AbortSignal }): AsyncIterable<LlmEvent>;
  synthesize(o: { voiceId: string; language: string; signal: AbortSignal }): Promise<TtsStream>;
}

/** Messages a session sends to its client (the websocket transport frames them as JSON). */
export type ServerMessage =
  | { topic: 'lk.agent.state'; state: AgentState }
  | { topic: 'lk.transcription'; role: 'user' | 'agent'; segmentId: string; text: string; final: boolean }
  | { topic: 'agent-event'; type: 'tool.started'; callId: string; toolName: string; toolSource: string; input: string; inputTruncated?: boolean }
  | { topic: 'agent-event'; type: 'tool.completed'; callId: string; toolName: string; toolSource: string; output: string; outputTruncated?: boolean }
  | { topic: 'agent-event'; type: 'tool.failed'; callId: string; toolName: string; toolSource: string; error: string }
  | { topic: 'agent-event'; type: 'client_tool.call'; callId: string; toolName: string; params: Record<string, unknown>; expectsResponse: boolean }
  | ({ topic: 'agent-event'; type: 'turn.metrics' } & TurnMetrics)
  | { topic: 'agent-event'; type: 'error'; code: 'provider_error' | 'internal_error' };

/** Where a session's output goes. Audio is already paced to real time when it arrives here. */
export interface SessionOutput {
  message(m: ServerMessage): void;
  /**
   * One frame of the agent's audio, sent a little ahead of `playAt`: the clock time (ms) at
   * which the pacing schedule plays it. After an event-loop stall frames go out late and
   * together, but their `playAt`s stay contiguous (`playout.ts`).
   */
  audio(pcm: Uint8Array, playAt: number): void;
}

/** A durable record entry (`session_items`, docs/api/sessions.md). */
export interface SessionItem {
  /** A message, a tool call or its result, or (sessions on a custom LLM) a failure of the agent's LLM endpoint. */
  type: 'message' | 'tool_call' | 'tool_result' | 'llm.endpoint_error';
  payload: Record<string, unknown>;
}

/** Latency of one turn, from the end of the caller's speech to the agent's first audio. */
export interface TurnMetrics {
  turn_id: number;
  /**
   * End of speech (the arrival of the audio where it ended; for audio older than the ~5 s a
   * session keeps, as if the audio since came in real time) → the recognizer said it ended.
   */
  recognition_ms: number | null;
  /** The eagerness wait before answering. */
  decide_ms: number | null;
  /** Generate call → first text (or tool call). */
  model_ms: number | null;
  /** First text sent to synthesis → first audio back. */
  synthesis_ms: number | null;
  /** End of speech (or the reply's start, for typed turns) → first audio sent to the client. */
  total_ms: number | null;
  /** total − recognition − decide − model − synthesis: what the platform itself added. */
  platform_ms: number | null;
}

/**
 * One turn's moments on the session's clock (ms since the epoch), handed to `onTurn` beside its
 * metrics and not stored: with the backend's own timings of the same calls (the native
 * backend's `PARLEY_BACKEND_TIMINGS`), bench/sessions.ts measures what the platform adds without
 * taking the backend's parts from the platform's side.
 */
export interface TurnTimeline {
  sessionId: string;
  turnId: number;
  /** The caller's end of speech: the arrival of that audio (null for turns not spoken). */
  speechEndedAt: number | null;
  /** When the recognizer's end-of-speech event was handled. */
  recognizedAt: number | null;
  decideMs: number | null;
  /** The reply started: the model asked (or the fixed text taken). */
  startedAt: number;
  /** The model's text events read up to its first speakable text (0: none, e.g. a fixed text). */
  textEventsToSpeakable: number;
  firstSpeakableAt: number | null;
  /** The first text sent to synthesis. */
  firstTtsAt: number | null;
  /** The first audio back from synthesis, sent to the client in the same step. */
  firstAudioAt: number | null;
}

/** Everything a session runs with, resolved once from the record and the pinned config. */
export interface SessionPlan {
  sessionId: string;
  /** The system prompt with variables rendered (override applied). */
  systemPrompt: string;
  /** Context lines added to the system message before each reply (world context, language pin). */
  context(now: number): string[];
  /** `off`: silent; `fixed`: spoken verbatim; `prompt`: generated from the instructions. Rendered. */
  firstMessage: { mode: 'off' } | { mode: 'fixed'; text: string } | { mode: 'prompt'; prompt: string };
  /** Set: the session ends with this reason once the first message has been spoken (a voicemail left). */
  endAfterFirstMessage?: string;
  language: string;
  voiceId: string;
  /** Wait after the caller stops before answering. */
  decideMs: number;
  interruptible: boolean;
  /** How long the caller must speak over the agent before it stops. */
  bargeInMs: number;
  maxDurationMs: number;
  hangUpTool: boolean;
  /** Re-engage: nudge after `afterMs` of silence, end after as much again. Null when disabled. */
  reengage: { afterMs: number; nudge: string; farewell: string | null } | null;
  toolEvents: boolean;
}

/** What a tool call came to, as the history, the events and the model see it. */
export interface ToolOutcome {
  status: 'completed' | 'failed' | 'cancelled';
  /** The response the model may see (already shaped by `error_handling`); null when none. */
  output: string | null;
  error: string | null;
  outputTruncated?: boolean;
  latencyMs: number;
  /** End the session once this turn has been spoken, with this reason (hang-up, cold transfer). */
  endSession?: string;
}

/**
 * A tool the runtime offers a session besides `hang_up_call`: webhook tools, client tools and
 * system tools such as `transfer_call`. The actor decides when a call runs (execution mode)
 * and what the model is told; `execute` does the work and never throws (failures are outcomes).
 */
export interface SessionTool {
  spec: ToolSpec;
  source: 'system' | 'webhook' | 'client';
  mode: 'blocking' | 'fire_and_forget' | 'background';
  execute(argsJson: string, o: { callId: string; signal: AbortSignal }): Promise<ToolOutcome>;
}

export interface SessionDeps {
  backend: SessionBackend;
  /** Tools offered to the model, besides `hang_up_call` (which the plan switches on). */
  tools?: SessionTool[];
  output: SessionOutput;
  /**
   * Every caller frame handed to the session, as it comes (call recording taps it here); read
   * during the call only, like `sendAudio`'s.
   */
  onCallerAudio?(pcm: Uint8Array): void;
  /**
   * Knowledge retrieval: passages for the caller's latest text, best first, already within the
   * context budget. Called before each reply to a caller turn; a rejection (or the signal's
   * abort) means the turn proceeds without them.
   */
  retrieve?(query: string, signal: AbortSignal): Promise<string[]>;
  /** Durable writes; called in order, never awaited by the actor. */
  record(items: SessionItem[]): void;
  clock: Clock;
  /** Turn metrics as each turn starts speaking, with the turn's timeline. */
  onTurn?(m: TurnMetrics, timeline: TurnTimeline): void;
  log?: { info?(obj: object, msg: string): void; warn(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

/** How a session ended. */
export interface SessionEnd {
  status: 'completed' | 'failed';
  reason: string;
  turns: TurnMetrics[];
}
