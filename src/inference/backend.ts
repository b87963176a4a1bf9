/**
 * The connections to one inference backend: a small pool of grpc-js channels (each its own
 * HTTP/2 connection) with keepalive and reconnect backoff, a concurrency limit, a fast
 * readiness check (a backend that is down gives 503 within `connectTimeoutMs`, never a
 * hang), metadata, deadlines, AbortSignal cancellation within each connection's stream-reset
 * budget, and the error mapping. Calls are async iterators or promises.
 *
 * Why a reset budget: the backend's HTTP/2 server (Node's nghttp2 since the "rapid reset"
 * fix, CVE-2023-44487) closes a connection that receives more than ~1,000 RST_STREAM frames
 * in a burst (then ~33 a second), failing every stream on it. A cancellation is one
 * RST_STREAM, so each connection spends at most `resetBurst` of them at once and
 * `resetRatePerS` after that; cancellations beyond it are deferred (the caller is released
 * at once; the stream is half-closed and drained so it usually ends by itself, and is reset
 * when the budget allows). See docs/inference.md, "Cancellation bursts".
 */
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  CapabilitiesRequestSchema,
  DesignVoiceRequestSchema,
  HealthRequestSchema,
  SaveVoiceRequestSchema,
  ServingStatus,
  SynthesizeRequestSchema,
  SynthesizeStreamRequestSchema,
  TranscribeRequestSchema,
  TranscribeStreamRequestSchema,
  GenerateRequestSchema,
  type AudioChunk,
  type CapabilitiesResponse,
  type DesignVoiceResponse,
  type GenerateResponse,
  type HealthResponse,
  type SaveVoiceResponse,
  type SynthesizeStreamResponse,
  type TranscribeResponse,
  type TranscribeStreamResponse,
} from '../gen/inference/v1/inference_pb.ts';
import { ServiceError } from '../errors.ts';
import { fromGrpcError } from './errors.ts';
import { createGrpcClient, type InferenceGrpcClient } from './grpc-service.ts';
import { Limiter } from './limiter.ts';
import { abortReason, statusError } from './stream-mux.ts';
import { RecognitionMux, type MuxCall } from './recognition-mux.ts';
import { WriteBacklog } from './write-backlog.ts';
import { SynthesisMux, type SynthesisMuxCall } from './synthesis-mux.ts';
import { GenerationMux, type GenerationMuxCall } from './generation-mux.ts';

/** Per-call options: cancellation, deadline and the metadata the backend receives. */
export interface CallOptions {
  /** Aborting cancels the call; the call then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Overall deadline of the call in milliseconds (default: per RPC, see BackendOptions). */
  timeoutMs?: number;
  /** W3C trace context, sent as `traceparent`. */
  traceparent?: string;
  /** Sent as `x-request-id`. */
  requestId?: string;
  /** Sent as `x-team-id`. */
  teamId?: string;
}

export interface BackendOptions {
  /** Calls in flight at once (default 1000); more wait up to `queueTimeoutMs` (default 2000), then 503. */
  maxConcurrentCalls?: number;
  queueTimeoutMs?: number;
  /** How long a call waits for the channel to connect before 503 (default 1500). */
  connectTimeoutMs?: number;
  /** Default deadlines: unary calls (Capabilities, Health) 5 s; Transcribe 120 s; streams none. */
  unaryTimeoutMs?: number;
  transcribeTimeoutMs?: number;
  /** Default deadline of DesignVoice and SaveVoice (default 60 s: a provider designs in seconds). */
  designTimeoutMs?: number;
  /** Keepalive ping interval (default 30 s) and timeout (default 10 s). */
  keepaliveMs?: number;
  keepaliveTimeoutMs?: number;
  /** Reconnect backoff bounds (defaults 100 ms and 2 s). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** HTTP/2 connections to the backend (default 4); each call takes the least loaded one. */
  channels?: number;
  /** Stream resets (cancellations) a connection sends at once (default 900) and per second after that (default 30). */
  resetBurst?: number;
  resetRatePerS?: number;
  /**
   * Realtime recognition streams share one TranscribeStreams call, and live synthesis streams one
   * SynthesizeStreams call, when the backend lists that RPC in Capabilities (default true); false,
   * or a backend without it: one TranscribeStream / SynthesizeStream call each.
   */
  multiplex?: boolean;
}

export type SynthesizeInput = MessageInitShape<typeof SynthesizeRequestSchema>;
export type GenerateInput = MessageInitShape<typeof GenerateRequestSchema>;
export type TranscribeConfigInput = MessageInitShape<typeof TranscribeRequestSchema>['config'] & {};
export type DesignVoiceInput = MessageInitShape<typeof DesignVoiceRequestSchema>;
export type SaveVoiceInput = MessageInitShape<typeof SaveVoiceRequestSchema>;

/** A live synthesis call (SynthesizeStream). Iterate it for chunks and flush events. */
export interface SynthesisSession extends AsyncIterable<SynthesizeStreamResponse> {
  /** Appends text (pieces are concatenated as given). */
  send(text: string): void;
  /** Speak everything sent so far; a `flushed` event with this id follows its audio. */
  flush(id?: number | bigint): void;
  /** Half-closes: what is left is spoken, then the iteration ends. */
  end(): void;
  /** Cancels the call. */
  cancel(): void;
}

/** A realtime transcription call (TranscribeStream). Iterate it for events. */
export interface TranscriptionSession extends AsyncIterable<TranscribeStreamResponse> {
  /**
   * Sends a frame of 16-bit little-endian PCM at the configured rate. The frame is read during
   * the call only: the caller may reuse its buffer once it returns.
   */
  sendAudio(pcm: Uint8Array): void;
  /** Commits what was heard so far (a `committed` event follows). */
  commit(): void;
  end(): void;
  cancel(): void;
}

/** Health of one backend as the platform sees it. */
export interface BackendHealth {
  address: string;
  ok: boolean;
  /** The backend's own answer when it gave one. */
  status?: HealthResponse;
  error?: string;
  /** Calls this client has in flight to it. */
  inFlight: number;
}


/** A token bucket: `burst` tokens, refilled at `ratePerS`. */
export class ResetBudget {
  private tokens: number;
  private last = Date.now();
  constructor(
    private readonly burst: number,
    private readonly ratePerS: number,
  ) {
    this.tokens = burst;
  }

  take(): boolean {
    const now = Date.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.ratePerS) / 1000);
    this.last = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

type AnyCall = grpc.ClientReadableStream<unknown> | grpc.ClientDuplexStream<unknown, unknown> | grpc.ClientWritableStream<unknown>;

/** One HTTP/2 connection of the pool. */
interface Conn {
  client: InferenceGrpcClient;
  /** Streams open on it (until their status arrives). */
  calls: number;
  budget: ResetBudget;
  /** Abandoned streams waiting for reset budget. */
  deferred: Set<{ call: AnyCall; done: () => boolean }>;
  timer: NodeJS.Timeout | null;
}

/** A call in flight: its connection, the slot, and whether it has ended. */
interface Tracked {
  conn: Conn;
  call: AnyCall;
  /** True once the caller abandoned it (cancel, abort, leaving the loop). */
  abandoned: () => boolean;
  /** Gives the slot back and stops the call (within the connection's reset budget). */
  abandon: () => void;
  /** Received messages not yet read (readable calls). */
  inbox: Inbox;
  take: () => unknown;
}

interface Inbox {
  queue: unknown[];
  ended: boolean;
  failure: unknown;
  wake: (() => void) | null;
}

/**
 * The HTTP/2 receive window of the connection that carries the calls many streams share (the
 * muxes'), on the connection and on each stream (HTTP/2's default is 64 KB; grpc-js's
 * `grpc-node.flow_control_window` sets both). One SynthesizeStreams call carries every
 * session's replies: at 64 KB it waited for a window update every 64 KB of them, and a new
 * reply's first audio queued behind the others' (at 1,000 sessions, 0.2–3 s at p50;
 * bench/README.md, sixteenth pass (c)). What the shared calls hold here is bounded by each stream's
 * credit, not by this window. The pool's connections keep HTTP/2's 64 KB: there a window bounds
 * what a per-call stream whose reader stopped (a slow `POST /v1/tts` client) holds on the
 * platform. See docs/inference.md, "Flow control".
 */
export const SHARED_RECEIVE_WINDOW_BYTES = 4 * 1024 * 1024;
/** What waits to leave on the shared calls (Backend.sendBacklog). */
export interface SendBacklog {
  recognition: { bytes: number; ageMs: number };
  /** Its inputs are text and credits: the age only. */
  synthesis: { bytes: number; ageMs: number };
}
const NO_BACKLOG = { bytes: 0, ageMs: 0 };

/** Per call, what grpc-js may keep for a transparent retry (one second of 16 kHz caller audio). */
export const RETRY_BUFFER_PER_CALL_BYTES = 32 * 1024;
/** What a stream the caller cancelled ends with (as if the backend had seen the cancellation). */
const cancelledError = () => statusError(grpc.status.CANCELLED, 'Call cancelled');

export class Backend {
  /** The first connection's raw client (the others are in the pool). */
  readonly client: InferenceGrpcClient;
  private readonly conns: Conn[];
  private readonly limiter: Limiter;
  private readonly o: Required<BackendOptions>;
  private closed = false;
  private nextConn = 0;
  /** The connection of the shared calls (the muxes'), opened with the first of them. */
  private shared: Conn | null = null;
  /** The backend's Capabilities question about the shared calls (TranscribeStreams, SynthesizeStreams, GenerateStreams), while asked. */
  private muxAsked: Promise<void> | null = null;
  private mux: RecognitionMux | null = null;
  private synthMux: SynthesisMux | null = null;
  private genMux: GenerationMux | null = null;

  constructor(
    readonly address: string,
    options: BackendOptions = {},
  ) {
    this.o = {
      maxConcurrentCalls: 1000,
      queueTimeoutMs: 2000,
      connectTimeoutMs: 1500,
      unaryTimeoutMs: 5000,
      transcribeTimeoutMs: 120_000,
      designTimeoutMs: 60_000,
      keepaliveMs: 30_000,
      keepaliveTimeoutMs: 10_000,
      initialBackoffMs: 100,
      maxBackoffMs: 2000,
      channels: 4,
      resetBurst: 900,
      resetRatePerS: 30,
      multiplex: true,
      ...options,
    };
    this.limiter = new Limiter(this.o.maxConcurrentCalls, this.o.queueTimeoutMs);
    this.conns = Array.from({ length: Math.max(1, Math.floor(this.o.channels)) }, () => this.connect());
    this.client = this.conns[0].client;
  }

  /** A connection of its own (a channel with a local subchannel pool), with `extra` options. */
  private connect(extra: grpc.ChannelOptions = {}): Conn {
    return {
      client: createGrpcClient(this.address, grpc.credentials.createInsecure(), {
        'grpc.keepalive_time_ms': this.o.keepaliveMs,
        'grpc.keepalive_timeout_ms': this.o.keepaliveTimeoutMs,
        'grpc.keepalive_permit_without_calls': 1,
        'grpc.initial_reconnect_backoff_ms': this.o.initialBackoffMs,
        'grpc.max_reconnect_backoff_ms': this.o.maxBackoffMs,
        'grpc.min_reconnect_backoff_ms': this.o.initialBackoffMs,
        'grpc.max_receive_message_length': 64 * 1024 * 1024,
        'grpc.max_send_message_length': 64 * 1024 * 1024,
        ...extra,
        // Each channel gets its own connection (grpc-js shares one between equal channels otherwise).
        'grpc.use_local_subchannel_pool': 1,
        // Transparent retries only (no retry policy): a call the backend refused or that never
        // left the client (e.g. sent as a connection closes) is started again by grpc-js.
        'grpc.enable_retries': 1,
        // What grpc-js keeps of a call for that retry, until the backend's response headers
        // commit the call (default 256 KB per call): a streaming call to a backend that sends
        // its headers only with its first response (a recognizer, at the first speech) kept
        // every audio frame until then. Past this much the call commits: a refusal comes
        // before the first messages, so the retry still covers it.
        'grpc.per_rpc_retry_buffer_size': RETRY_BUFFER_PER_CALL_BYTES,
        'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
      }),
      calls: 0,
      budget: new ResetBudget(this.o.resetBurst, this.o.resetRatePerS),
      deferred: new Set(),
      timer: null,
    };
  }

  /** Calls in flight through this client. */
  get inFlight(): number {
    return this.limiter.inUse;
  }

  /**
   * What the calls carrying live streams have written that has not left for this backend yet
   * (docs/inference.md, "Send backlog"): recognition's bytes (caller audio) and, for recognition
   * and synthesis, how long the oldest waiting write has waited. Recognition streams on calls of
   * their own (a backend without TranscribeStreams) count too, read at most every 100 ms; live
   * synthesis on calls of its own does not.
   */
  sendBacklog(): SendBacklog {
    const r = this.mux?.backlog() ?? NO_BACKLOG;
    const s = this.synthMux?.backlog() ?? NO_BACKLOG;
    const own = this.ownCallsBacklog();
    return { recognition: { bytes: r.bytes + own.bytes, ageMs: Math.max(r.ageMs, own.ageMs) }, synthesis: { bytes: 0, ageMs: s.ageMs } };
  }

  /** Recognition streams on calls of their own (a backend without TranscribeStreams), each with its writes' backlog. */
  private readonly ownCalls = new Set<WriteBacklog>();
  private ownCallsLast = { at: -Infinity, bytes: 0, ageMs: 0 };

  /** Their backlog summed: read at most every 100 ms (it walks every such stream). */
  private ownCallsBacklog(): { bytes: number; ageMs: number } {
    const now = performance.now();
    const last = this.ownCallsLast;
    if (now - last.at < 100) return last;
    let bytes = 0;
    let ageMs = 0;
    for (const w of this.ownCalls) {
      bytes += w.bytes;
      ageMs = Math.max(ageMs, w.ageMs(now));
    }
    this.ownCallsLast = { at: now, bytes, ageMs };
    return this.ownCallsLast;
  }

  /** Streams still open on the wire, per connection of the pool (abandoned ones included until they end; the shared calls' connection apart). */
  get openStreams(): number[] {
    return this.conns.map((c) => c.calls);
  }

  private metadata(o: CallOptions): grpc.Metadata {
    const md = new grpc.Metadata();
    if (o.traceparent) md.set('traceparent', o.traceparent);
    if (o.requestId) md.set('x-request-id', o.requestId);
    if (o.teamId) md.set('x-team-id', o.teamId);
    return md;
  }

  private callOptions(o: CallOptions, defaultTimeoutMs?: number): grpc.CallOptions {
    const t = o.timeoutMs ?? defaultTimeoutMs;
    return t ? { deadline: Date.now() + t } : {};
  }

  /**
   * The least loaded connection that is not failing (ties: connected first, then round
   * robin). Idle connections of the pool are asked to connect, so all of them get used.
   */
  private pick(): Conn {
    let best: Conn | null = null;
    let bestRank = 0;
    const n = this.conns.length;
    const from = this.nextConn++ % n;
    for (let i = 0; i < n; i++) {
      const c = this.conns[(from + i) % n];
      const state = c.client.getChannel().getConnectivityState(true);
      const failing = state === grpc.connectivityState.TRANSIENT_FAILURE || state === grpc.connectivityState.SHUTDOWN;
      // Lower is better: failing connections last, then by load, connected ones first on ties.
      const rank = (failing ? 1e9 : 0) + c.calls * 2 + (state === grpc.connectivityState.READY ? 0 : 1);
      if (!best || rank < bestRank) {
        best = c;
        bestRank = rank;
      }
    }
    return best!;
  }

  /** Resolves when the connection is up; 503 after connectTimeoutMs. */
  private async ready(conn: Conn, signal?: AbortSignal): Promise<void> {
    if (this.closed) throw new ServiceError('unavailable', 'Inference client closed');
    if (conn.client.getChannel().getConnectivityState(true) === grpc.connectivityState.READY) return;
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(abortReason(signal!));
      signal?.addEventListener('abort', onAbort, { once: true });
      conn.client.waitForReady(Date.now() + this.o.connectTimeoutMs, (err) => {
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(new ServiceError('unavailable', 'Inference backend unavailable', { cause: err }));
        else resolve();
      });
    });
  }

  /** Slot + a ready connection; the returned release must be called when the call ends. */
  private async begin(o: CallOptions): Promise<{ conn: Conn; release: () => void }> {
    o.signal?.throwIfAborted();
    const release = await this.limiter.acquire(o.signal);
    try {
      const conn = this.pick();
      await this.ready(conn, o.signal);
      return { conn, release };
    } catch (err) {
      release();
      throw err;
    }
  }

  /**
   * Follows a started call: the slot is given back when its status arrives (whether or not
   * anyone reads it), when the signal aborts, or when the caller abandons it. Messages of a
   * readable call are queued from the start (up to 16, then the stream pauses) for `read()`.
   */
  private track(conn: Conn, call: AnyCall, release: () => void, signal?: AbortSignal): Tracked {
    let ended = false;
    let abandoned = false;
    const inbox: Inbox = { queue: [], ended: false, failure: null, wake: null };
    const notify = () => {
      const w = inbox.wake;
      inbox.wake = null;
      w?.();
    };
    conn.calls++;
    const onAbort = () => abandon();
    const finish = () => {
      if (ended) return;
      ended = true;
      conn.calls--;
      signal?.removeEventListener('abort', onAbort);
      release();
    };
    call.on('status', finish);
    call.on('error', (err: unknown) => {
      inbox.failure = err;
      inbox.ended = true;
      notify();
    });
    const readable = 'resume' in call ? (call as grpc.ClientReadableStream<unknown>) : null;
    if (readable) {
      readable.on('data', (m: unknown) => {
        if (abandoned) return; // drained, dropped
        inbox.queue.push(m);
        if (inbox.queue.length >= 16) readable.pause();
        notify();
      });
      readable.on('end', () => {
        inbox.ended = true;
        notify();
      });
    }
    const abandon = () => {
      if (abandoned) return;
      abandoned = true;
      signal?.removeEventListener('abort', onAbort);
      release();
      inbox.queue.length = 0;
      readable?.resume();
      notify();
      if (!ended) this.stop(conn, call, () => ended);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    return {
      conn,
      call,
      abandoned() { return abandoned; },
      abandon,
      take() {
        const m = inbox.queue.shift();
        if (readable?.isPaused() && inbox.queue.length < 8 && !abandoned) readable.resume();
        return m;
      },
      inbox,
    };
  }

  /** Cancels a call now if the connection's reset budget allows, else defers the reset. */
  private stop(conn: Conn, call: AnyCall, ended: () => boolean): void {
    if (this.closed || conn.budget.take()) {
      call.cancel();
      return;
    }
    // Over budget: half-close (the readable side is already drained), so the backend usually
    // ends the call by itself; reset it when the budget allows.
    if ('end' in call && 'writableEnded' in call && !call.writableEnded && !call.destroyed) call.end();
    conn.deferred.add({ call, done: ended });
    conn.timer ??= setInterval(() => this.drainDeferred(conn), 100).unref();
  }

  private drainDeferred(conn: Conn): void {
    for (const d of conn.deferred) {
      if (d.done()) {
        conn.deferred.delete(d);
        continue;
      }
      if (!this.closed && !conn.budget.take()) break;
      conn.deferred.delete(d);
      d.call.cancel();
    }
    if (conn.deferred.size === 0 && conn.timer) {
      clearInterval(conn.timer);
      conn.timer = null;
    }
  }

  private mapError(err: unknown, signal?: AbortSignal): unknown {
    if (signal?.aborted) return abortReason(signal);
    if (err instanceof ServiceError) return err;
    if (err && typeof err === 'object' && 'code' in err && typeof (err as grpc.ServiceError).code === 'number') return fromGrpcError(err as grpc.ServiceError);
    return err;
  }

  /** Reads a server stream as an async iterator; leaving the loop early cancels the call. */
  private async *read<T>(t: Tracked, o: CallOptions): AsyncGenerator<T> {
    let finished = false;
    try {
      for (;;) {
        // Messages already buffered when the caller aborted or cancelled are dropped.
        if (o.signal?.aborted) throw abortReason(o.signal);
        if (t.abandoned()) throw cancelledError();
        if (t.inbox.queue.length) {
          yield t.take() as T;
          continue;
        }
        if (t.inbox.failure) throw t.inbox.failure;
        if (t.inbox.ended) break;
        await new Promise<void>((resolve) => (t.inbox.wake = resolve));
      }
      finished = true;
    } catch (err) {
      finished = true;
      throw this.mapError(err, o.signal);
    } finally {
      if (!finished) t.abandon();
    }
  }

  /** Synthesize: one request, audio chunks until the one marked `final`. */
  async *synthesize(req: SynthesizeInput, o: CallOptions = {}): AsyncGenerator<AudioChunk> {
    const { conn, release } = await this.begin(o);
    const call = conn.client.synthesize(create(SynthesizeRequestSchema, req), this.metadata(o), this.callOptions(o));
    yield* this.read<AudioChunk>(this.track(conn, call, release, o.signal), o);
  }

  /**
   * Generate: text deltas, tool calls, then one finish event. Over a GenerateStreams call shared
   * with other generations when the backend offers it.
   */
  async *generate(req: GenerateInput, o: CallOptions = {}): AsyncGenerator<GenerateResponse> {
    if (this.genMuxKnown) {
      yield* await this.generationMux().open(req, o);
      return;
    }
    if (this.genMuxKnown === null) void this.askMultiplex();
    const { conn, release } = await this.begin(o);
    const call = conn.client.generate(create(GenerateRequestSchema, req), this.metadata(o), this.callOptions(o));
    yield* this.read<GenerateResponse>(this.track(conn, call, release, o.signal), o);
  }

  /**
   * SynthesizeStream: sends `config` first; text and flushes go in through the session. Over a
   * SynthesizeStreams call shared with other streams when the backend offers it.
   */
  async synthesizeStream(config: SynthesizeInput, o: CallOptions = {}): Promise<SynthesisSession> {
    if (this.synthMuxKnown) return this.synthesisMux().open(config, o);
    if (this.synthMuxKnown === null) void this.askMultiplex();
    const { conn, release } = await this.begin(o);
    const call = conn.client.synthesizeStream(this.metadata(o), this.callOptions(o));
    const t = this.track(conn, call as unknown as AnyCall, release, o.signal);
    const write = (m: MessageInitShape<typeof SynthesizeStreamRequestSchema>) => {
      if (!t.abandoned() && !call.writableEnded && !call.destroyed) call.write(create(SynthesizeStreamRequestSchema, m));
    };
    write({ event: { case: 'config', value: config } });
    const iter = this.read<SynthesizeStreamResponse>(t, o);
    return {
      send: (text) => write({ event: { case: 'text', value: text } }),
      flush: (id = 0) => write({ event: { case: 'flush', value: { id: BigInt(id) } } }),
      end: () => { if (!call.writableEnded) call.end(); },
      cancel: t.abandon,
      [Symbol.asyncIterator]: () => iter,
    };
  }

  /** Streams of TranscribeStreams calls open now (0 when the backend does not offer it). */
  get multiplexedStreams(): number {
    return this.mux?.size ?? 0;
  }

  /** TranscribeStreams messages written so far and the stream inputs they carried. */
  get multiplexedSent(): { messages: number; inputs: number } {
    return { ...(this.mux?.sent ?? { messages: 0, inputs: 0 }) };
  }

  /** Streams of SynthesizeStreams calls open now, and the audio received for them not yet taken. */
  get synthesisStreams(): { open: number; bufferedBytes: number } {
    return { open: this.synthMux?.size ?? 0, bufferedBytes: this.synthMux?.buffered ?? 0 };
  }

  /** Generations open on GenerateStreams calls now, and the messages written on them with the inputs they carried. */
  get generationStreams(): { open: number; messages: number; inputs: number } {
    return { open: this.genMux?.size ?? 0, ...(this.genMux?.sent ?? { messages: 0, inputs: 0 }) };
  }

  /** SynthesizeStreams messages written so far, the stream inputs they carried, credit grants among them. */
  get synthesisSent(): { messages: number; inputs: number; credits: number } {
    return { ...(this.synthMux?.sent ?? { messages: 0, inputs: 0, credits: 0 }) };
  }

  /**
   * Whether the backend offers TranscribeStreams, SynthesizeStreams and GenerateStreams: asked of
   * Capabilities once, in the background, with the first recognition or synthesis stream or
   * generation. Streams that start before the answer use their own call (a session's stream must
   * not wait a round trip more to open). A failed question is asked again with the next stream.
   */
  private muxKnown: boolean | null = null;
  private synthMuxKnown: boolean | null = null;
  private genMuxKnown: boolean | null = null;

  private askMultiplex(): Promise<void> {
    if (!this.o.multiplex || (this.muxKnown !== null && this.synthMuxKnown !== null && this.genMuxKnown !== null)) return Promise.resolve();
    if (this.muxAsked) return this.muxAsked;
    const asked: Promise<void> = this.capabilities().then(
      (c) => {
        if (this.muxAsked !== asked) return;
        this.muxKnown ??= c.rpcs.includes('TranscribeStreams');
        this.synthMuxKnown ??= c.rpcs.includes('SynthesizeStreams');
        this.genMuxKnown ??= c.rpcs.includes('GenerateStreams');
      },
      () => { if (this.muxAsked === asked) this.muxAsked = null; },
    );
    this.muxAsked = asked;
    return asked;
  }

  /** Resolves to whether recognition streams go over TranscribeStreams from now on (asking if needed). */
  multiplexKnown(): Promise<boolean> {
    return this.askMultiplex().then(() => this.muxKnown ?? false);
  }

  /** Resolves to whether generations go over GenerateStreams from now on (asking if needed). */
  generationMultiplexKnown(): Promise<boolean> {
    return this.askMultiplex().then(() => this.genMuxKnown ?? false);
  }

  /** Resolves to whether synthesis streams go over SynthesizeStreams from now on (asking if needed). */
  synthesisMultiplexKnown(): Promise<boolean> {
    return this.askMultiplex().then(() => this.synthMuxKnown ?? false);
  }

  /**
   * Opens a call that many streams share (the muxes'), counted on its connection until `done`.
   * These calls have a connection of their own with a wide receive window
   * (SHARED_RECEIVE_WINDOW_BYTES): their streams are flow-controlled by credit, not by HTTP/2.
   */
  private async sharedCall<C>(open: (client: Conn['client']) => C): Promise<{ call: C; done: () => void }> {
    // A mux first used after the client closed (a turn's generation during shutdown) must not
    // open a connection that nothing closes: it would keep the process alive.
    if (this.closed) throw new ServiceError('unavailable', 'Inference client closed');
    const conn = (this.shared ??= this.connect({ 'grpc-node.flow_control_window': SHARED_RECEIVE_WINDOW_BYTES }));
    await this.ready(conn);
    // Closed while the connection got ready (`close` closed it): no call is started on it.
    if (this.closed) throw new ServiceError('unavailable', 'Inference client closed');
    conn.calls++;
    const call = open(conn.client);
    let done = false;
    return { call, done: () => { if (!done) { done = true; conn.calls--; } } };
  }

  private synthesisMux(): SynthesisMux {
    return (this.synthMux ??= new SynthesisMux({
      acquire: (signal) => this.limiter.acquire(signal),
      start: () => this.sharedCall((c) => c.synthesizeStreams(new grpc.Metadata()) as unknown as SynthesisMuxCall),
      unimplemented: () => { this.synthMuxKnown = false; },
    }));
  }

  private generationMux(): GenerationMux {
    return (this.genMux ??= new GenerationMux({
      acquire: (signal) => this.limiter.acquire(signal),
      start: () => this.sharedCall((c) => c.generateStreams(new grpc.Metadata()) as unknown as GenerationMuxCall),
      unimplemented: () => { this.genMuxKnown = false; },
    }));
  }

  private recognitionMux(): RecognitionMux {
    return (this.mux ??= new RecognitionMux({
      acquire: (signal) => this.limiter.acquire(signal),
      start: () => this.sharedCall((c) => c.transcribeStreams(new grpc.Metadata()) as unknown as MuxCall),
      unimplemented: () => { this.muxKnown = false; },
    }));
  }

  /**
   * TranscribeStream: sends `config` first; audio frames and commits go in through the session.
   * Over a TranscribeStreams call shared with other streams when the backend offers it.
   */
  async transcribeStream(config: TranscribeConfigInput, o: CallOptions = {}): Promise<TranscriptionSession> {
    if (this.muxKnown) return this.recognitionMux().open(config, o);
    if (this.muxKnown === null) void this.askMultiplex();
    const { conn, release } = await this.begin(o);
    const call = conn.client.transcribeStream(this.metadata(o), this.callOptions(o));
    const t = this.track(conn, call as unknown as AnyCall, release, o.signal);
    // What this call's writes wait to send counts in `sendBacklog` while the call lives.
    const waiting = new WriteBacklog();
    this.ownCalls.add(waiting);
    call.on('close', () => this.ownCalls.delete(waiting));
    call.on('status', () => this.ownCalls.delete(waiting));
    const sent = () => waiting.sent();
    const write = (m: MessageInitShape<typeof TranscribeStreamRequestSchema>, size = 0) => {
      if (t.abandoned() || call.writableEnded || call.destroyed) return;
      waiting.written(size);
      call.write(create(TranscribeStreamRequestSchema, m), sent);
    };
    write({ event: { case: 'config', value: config } });
    const iter = this.read<TranscribeStreamResponse>(t, o);
    return {
      // A copy: grpc-js may hold the message until an earlier write has gone (the caller may reuse `pcm`).
      sendAudio(pcm) { write({ event: { case: 'audio', value: pcm.slice() } }, pcm.length); },
      commit() { write({ event: { case: 'commit', value: {} } }); },
      end() { if (!call.writableEnded) call.end(); },
      cancel: t.abandon,
      [Symbol.asyncIterator]: () => iter,
    };
  }

  /** Transcribe: the whole recording (bytes) or a stream of byte pieces. */
  async transcribe(config: TranscribeConfigInput, audio: Uint8Array | AsyncIterable<Uint8Array>, o: CallOptions = {}): Promise<TranscribeResponse> {
    const { conn, release } = await this.begin(o);
    return new Promise<TranscribeResponse>((resolve, reject) => {
      let t: Tracked | null = null;
      const onAbort = () => reject(abortReason(o.signal!));
      const call = conn.client.transcribe(this.metadata(o), this.callOptions(o, this.o.transcribeTimeoutMs), (err, res) => {
        o.signal?.removeEventListener('abort', onAbort);
        if (err) reject(this.mapError(err, o.signal));
        else resolve(res!);
      });
      t = this.track(conn, call as unknown as AnyCall, release, o.signal);
      o.signal?.addEventListener('abort', onAbort, { once: true });
      if (audio instanceof Uint8Array) {
        call.write(create(TranscribeRequestSchema, { config, audio }));
        call.end();
      } else {
        (async () => {
          call.write(create(TranscribeRequestSchema, { config }));
          for await (const piece of audio) {
            if (t.abandoned()) return;
            if (!call.write(create(TranscribeRequestSchema, { audio: piece }))) await new Promise((r) => call.once('drain', r));
          }
          if (!t.abandoned()) call.end();
        })().catch((err) => { t!.abandon(); reject(err); });
      }
    });
  }

  /** A unary call that takes a slot like any model call (DesignVoice, SaveVoice). */
  private async modelCall<R>(method: 'designVoice' | 'saveVoice', req: unknown, o: CallOptions): Promise<R> {
    const { conn, release } = await this.begin(o);
    return new Promise<R>((resolve, reject) => {
      const onAbort = () => reject(abortReason(o.signal!));
      const cb = (err: grpc.ServiceError | null, res?: unknown) => {
        o.signal?.removeEventListener('abort', onAbort);
        if (err) reject(this.mapError(err, o.signal));
        else resolve(res as R);
      };
      const options = this.callOptions(o, this.o.designTimeoutMs);
      const call = method === 'designVoice'
        ? conn.client.designVoice(req as never, this.metadata(o), options, cb)
        : conn.client.saveVoice(req as never, this.metadata(o), options, cb);
      this.track(conn, call as unknown as AnyCall, release, o.signal);
      o.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Candidate voices for a description (DesignVoice). */
  designVoice(req: DesignVoiceInput, o: CallOptions = {}): Promise<DesignVoiceResponse> {
    return this.modelCall('designVoice', create(DesignVoiceRequestSchema, req), o);
  }

  /** The lasting id of a designed voice (SaveVoice). */
  saveVoice(req: SaveVoiceInput, o: CallOptions = {}): Promise<SaveVoiceResponse> {
    return this.modelCall('saveVoice', create(SaveVoiceRequestSchema, req), o);
  }

  private unary<R>(method: 'capabilities' | 'health', o: CallOptions): Promise<R> {
    const conn = this.conns[0];
    return new Promise<R>((resolve, reject) => {
      const cb = (err: grpc.ServiceError | null, res?: unknown) => {
        o.signal?.removeEventListener('abort', onAbort);
        if (err) reject(this.mapError(err, o.signal));
        else resolve(res as R);
      };
      const call = method === 'health'
        ? conn.client.health(create(HealthRequestSchema), this.metadata(o), this.callOptions(o, this.o.unaryTimeoutMs), cb)
        : conn.client.capabilities(create(CapabilitiesRequestSchema), this.metadata(o), this.callOptions(o, this.o.unaryTimeoutMs), cb);
      const onAbort = () => call.cancel();
      o.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** What the backend serves. */
  async capabilities(o: CallOptions = {}): Promise<CapabilitiesResponse> {
    await this.ready(this.conns[0], o.signal);
    return this.unary('capabilities', o);
  }

  /** The backend's Health answer, or a 503 when it does not answer in time. */
  async health(o: CallOptions = {}): Promise<HealthResponse> {
    await this.ready(this.conns[0], o.signal);
    return this.unary('health', { timeoutMs: 2000, ...o });
  }

  /** Health as a value, never throwing. */
  async check(o: CallOptions = {}): Promise<BackendHealth> {
    try {
      const status = await this.health(o);
      return { address: this.address, ok: status.status === ServingStatus.SERVING, status, inFlight: this.inFlight };
    } catch (err) {
      return { address: this.address, ok: false, error: err instanceof Error ? err.message : String(err), inFlight: this.inFlight };
    }
  }

  close(): void {
    this.closed = true;
    this.mux?.close();
    this.synthMux?.close();
    this.genMux?.close();
    for (const c of this.shared ? [...this.conns, this.shared] : this.conns) {
      this.drainDeferred(c); // closing: what waits for budget is reset now
      c.client.close();
    }
  }
}

