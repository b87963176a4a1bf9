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
  /** A typed user turn; `audio: false` asks for a text-only reply. */
  sendUserMessage(text: string, options?: { audio?: boolean }): void;
  /** Tells the agent the user is active (typing): suppresses idle re-engagement. */
  sendActivity(): void;
  /** Stops the agent mid-reply. */
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

