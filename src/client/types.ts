/** Public types of `parley/client` (re-exported by `index.ts`). */
import type { LivekitRoomFactory } from './livekit.ts';

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

/**
 * - `unsupported_transport`: the session names a transport this SDK does not speak (never a fallback).
 * - `unauthorized`: the session token was used, expired or refused.
 * - `connection_failed`: the platform could not be reached or closed the connection while joining.
 * - `not_connected`: a message was sent after the end or while disconnected.
 * - `session_refused`: the platform answered the session creation with an error (`status`, and
 *   the platform's message: `Origin not allowed`, `Agent is not public`, …).
 * - `audio_unavailable`: the browser audio helpers cannot run: no microphone, permission denied
 *   (the cause is the browser's `NotAllowedError`), no Web Audio, or the worklet did not load.
 */
export type ClientErrorCode = 'unsupported_transport' | 'unauthorized' | 'connection_failed' | 'not_connected' | 'session_refused' | 'audio_unavailable';

/** Errors of the SDK carry a `code`; `session_refused` also the HTTP `status` (and `retryAfterMs` on 429 and 503). */
export class ClientError extends Error {
  // `declare`: set in the constructor, with no field initialisers for a bundler to emit helpers for.
  declare readonly code: ClientErrorCode;
  declare readonly status?: number;
  declare readonly retryAfterMs?: number;
  constructor(code: ClientErrorCode, message: string, details: { status?: number; retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'ClientError';
    this.code = code;
    if (details.status !== undefined) this.status = details.status;
    if (details.retryAfterMs !== undefined) this.retryAfterMs = details.retryAfterMs;
  }
}

/** A microphone: started with a frame callback (16 kHz Int16 PCM), returns its stop function. */
export interface Microphone {
  start(onFrame: (pcm: Int16Array) => void): (() => void) | Promise<() => void>;
}

/**
 * Where the agent's audio plays (`browserSpeaker()` in browsers, or your own). The SDK calls
 * `stop()` when the agent is interrupted, by the caller's speech (the agent goes from
 * `speaking` to `listening`), by `interrupt()` or by a typed message during a reply, and
 * drops audio of the interrupted reply that is still on its way.
 */
export interface Speaker {
  /** Agent audio, 16 kHz mono Int16 PCM, in order; plays after what is already queued. */
  play(pcm: Int16Array): void;
  /** Drops everything not yet played, at once. */
  stop(): void;
  /** Called once when the conversation ends. */
  close?(): void;
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
  /** Plays the agent's audio and is stopped on interruptions (see `Speaker`). */
  speaker?: Speaker;
  /** WebSocket implementation (default: the global one, else the `ws` package). */
  WebSocket?: WebSocketFactory;
  /** Reconnect automatically after a dropped connection (default true). */
  reconnect?: boolean;
  /** Attempts before giving up (default 5); delays grow from 250 ms to 4 s. */
  maxReconnectAttempts?: number;
  /**
   * Transport `livekit`: the room to join. Default: the `livekit-client` package (browsers),
   * loaded on demand; without it and without `roomFactory`, `start` fails with
   * `unsupported_transport`.
   */
  livekit?: { roomFactory?: LivekitRoomFactory };
  /**
   * Client tools answered automatically, by tool name: the handler gets the call's
   * parameters; what it returns (or resolves to) is sent back as the result, a throw (or
   * rejection) as an error result carrying its message. Calls with `expectsResponse: false`
   * run the handler and send nothing. A call no handler and no `clientToolCall` listener
   * takes is answered with an error result, so the agent does not wait for its timeout.
   */
  clientTools?: Record<string, ClientToolHandler>;
}

/** A client tool the agent calls (agent-event `client_tool.call`). */
export interface ClientToolCall {
  callId: string;
  toolName: string;
  params: Record<string, unknown>;
  /** When false the call is fire-and-forget: no result is expected. */
  expectsResponse: boolean;
}

/** Answers one client tool call; the return value is the result (any JSON value). */
export type ClientToolHandler = (params: Record<string, unknown>, call: ClientToolCall) => unknown;

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

/** One turn's latency, from the end of the caller's speech (or a typed message) to the agent's first audio; null where a part did not happen. */
export interface TurnMetrics {
  turnId: number;
  recognitionMs: number | null;
  /** The eagerness wait. */
  decideMs: number | null;
  modelMs: number | null;
  synthesisMs: number | null;
  totalMs: number | null;
  /** What the platform itself added. */
  platformMs: number | null;
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
  /** The agent calls a client tool; answer with `sendClientToolResult` (or use `clientTools`). */
  clientToolCall: ClientToolCall;
  /** A turn's latency split, sent as the agent starts answering. */
  turnMetrics: TurnMetrics;
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
  /**
   * A typed user turn; `audio: false` asks for a text-only reply. Interrupts a reply in
   * progress. Sent while the agent is still `initializing`, it waits until the agent is live.
   */
  sendUserMessage(text: string, options?: { audio?: boolean }): void;
  /** Tells the agent the user is active (typing): suppresses idle re-engagement. */
  sendActivity(): void;
  /** Stops the agent mid-reply (and the `speaker`, at once). */
  interrupt(): void;
  /** Caller audio: 16 kHz mono 16-bit PCM (Int16Array or its little-endian bytes). */
  sendAudio(pcm: Int16Array | Uint8Array): void;
  /**
   * Answers a client tool call: `result` is any JSON value; `{ isError: true }` reports a
   * failure (with `result` as its detail, if given). Unknown or already answered ids are
   * ignored by the platform.
   */
  sendClientToolResult(callId: string, result: unknown, options?: { isError?: boolean }): void;
  /** Ends the conversation gracefully. */
  hangup(): Promise<EndInfo>;
}

