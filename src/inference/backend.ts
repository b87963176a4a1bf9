/**
 * One connection to one inference backend: a grpc-js channel with keepalive and
 * reconnect backoff, a concurrency limit, a fast readiness check (a backend that is down
 * gives 503 within `connectTimeoutMs`, never a hang), metadata, deadlines, AbortSignal
 * cancellation and the error mapping. Calls are async iterators or promises.
 */
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  CapabilitiesRequestSchema,
  HealthRequestSchema,
  ServingStatus,
  SynthesizeRequestSchema,
  SynthesizeStreamRequestSchema,
  TranscribeRequestSchema,
  TranscribeStreamRequestSchema,
  GenerateRequestSchema,
  type AudioChunk,
  type CapabilitiesResponse,
  type GenerateResponse,
  type HealthResponse,
  type SynthesizeStreamResponse,
  type TranscribeResponse,
  type TranscribeStreamResponse,
} from '../gen/inference/v1/inference_pb.ts';
import { ServiceError } from '../errors.ts';
import { fromGrpcError } from './errors.ts';
import { createGrpcClient, type InferenceGrpcClient } from './grpc-service.ts';
import { Limiter } from './limiter.ts';

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
  /** Keepalive ping interval (default 30 s) and timeout (default 10 s). */
  keepaliveMs?: number;
  keepaliveTimeoutMs?: number;
  /** Reconnect backoff bounds (defaults 100 ms and 2 s). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

export type SynthesizeInput = MessageInitShape<typeof SynthesizeRequestSchema>;
export type GenerateInput = MessageInitShape<typeof GenerateRequestSchema>;
export type TranscribeConfigInput = MessageInitShape<typeof TranscribeRequestSchema>['config'] & {};

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
  /** Sends a frame of 16-bit little-endian PCM at the configured rate. */
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

const abortReason = (signal: AbortSignal) => signal.reason ?? Object.assign(new Error('aborted'), { name: 'AbortError' });

export class Backend {
  readonly client: InferenceGrpcClient;
  private readonly limiter: Limiter;
  private readonly o: Required<BackendOptions>;
  private closed = false;

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
      keepaliveMs: 30_000,
      keepaliveTimeoutMs: 10_000,
      initialBackoffMs: 100,
      maxBackoffMs: 2000,
      ...options,
    };
    this.limiter = new Limiter(this.o.maxConcurrentCalls, this.o.queueTimeoutMs);
    this.client = createGrpcClient(address, grpc.credentials.createInsecure(), {
      'grpc.keepalive_time_ms': this.o.keepaliveMs,
      'grpc.keepalive_timeout_ms': this.o.keepaliveTimeoutMs,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.initial_reconnect_backoff_ms': this.o.initialBackoffMs,
      'grpc.max_reconnect_backoff_ms': this.o.maxBackoffMs,
      'grpc.min_reconnect_backoff_ms': this.o.initialBackoffMs,
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
      'grpc.enable_retries': 0,
      'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
    });
  }

  /** Calls in flight through this client. */
  get inFlight(): number {
    return this.limiter.inUse;
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

  /** Resolves when the channel is connected; 503 after connectTimeoutMs. */
  private async ready(signal?: AbortSignal): Promise<void> {
    if (this.closed) throw new ServiceError('unavailable', 'Inference client closed');
    const ch = this.client.getChannel();
    if (ch.getConnectivityState(true) === grpc.connectivityState.READY) return;
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(abortReason(signal!));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.client.waitForReady(Date.now() + this.o.connectTimeoutMs, (err) => {
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(new ServiceError('unavailable', 'Inference backend unavailable', { cause: err }));
        else resolve();
      });
    });
  }

  /** Slot + readiness; the returned release must be called when the call ends. */
  private async begin(o: CallOptions): Promise<() => void> {
    o.signal?.throwIfAborted();
    const release = await this.limiter.acquire(o.signal);
    try {
      await this.ready(o.signal);
      return release;
    } catch (err) {
      release();
      throw err;
    }
  }

  private mapError(err: unknown, signal?: AbortSignal): unknown {
    if (signal?.aborted) return abortReason(signal);
    if (err instanceof ServiceError) return err;
    if (err && typeof err === 'object' && 'code' in err && typeof (err as grpc.ServiceError).code === 'number') return fromGrpcError(err as grpc.ServiceError);
    return err;
  }

  /** Reads a server stream as an async iterator; leaving the loop early cancels the call. */
  private async *read<T>(call: grpc.ClientReadableStream<T> | grpc.ClientDuplexStream<unknown, T>, o: CallOptions, release: () => void): AsyncGenerator<T> {
    // The slot is given back as soon as the call ends (status received or aborted), even
    // when the caller stops iterating without finishing the loop.
    call.on('status', release);
    const onAbort = () => {
      call.cancel();
      release();
    };
    o.signal?.addEventListener('abort', onAbort, { once: true });
    let finished = false;
    try {
      for await (const msg of call as AsyncIterable<T>) {
        // Messages already buffered when the caller aborted are dropped.
        if (o.signal?.aborted) throw abortReason(o.signal);
        yield msg;
      }
      finished = true;
    } catch (err) {
      finished = true;
      throw this.mapError(err, o.signal);
    } finally {
      o.signal?.removeEventListener('abort', onAbort);
      if (!finished) call.cancel();
      release();
    }
  }

  /** Synthesize: one request, audio chunks until the one marked `final`. */
  async *synthesize(req: SynthesizeInput, o: CallOptions = {}): AsyncGenerator<AudioChunk> {
    const release = await this.begin(o);
    const call = this.client.synthesize(create(SynthesizeRequestSchema, req), this.metadata(o), this.callOptions(o));
    yield* this.read(call, o, release);
  }

  /** Generate: text deltas, tool calls, then one finish event. */
  async *generate(req: GenerateInput, o: CallOptions = {}): AsyncGenerator<GenerateResponse> {
    const release = await this.begin(o);
    const call = this.client.generate(create(GenerateRequestSchema, req), this.metadata(o), this.callOptions(o));
    yield* this.read(call, o, release);
  }

  /** SynthesizeStream: sends `config` first; text and flushes go in through the session. */
  async synthesizeStream(config: SynthesizeInput, o: CallOptions = {}): Promise<SynthesisSession> {
    const release = await this.begin(o);
    const call = this.client.synthesizeStream(this.metadata(o), this.callOptions(o));
    call.on('error', () => {}); // surfaced by the iterator
    const write = (m: MessageInitShape<typeof SynthesizeStreamRequestSchema>) => {
      if (!call.writableEnded && !call.destroyed) call.write(create(SynthesizeStreamRequestSchema, m));
    };
    write({ event: { case: 'config', value: config } });
    const iter = this.read(call, o, release);
    return {
      send: (text) => write({ event: { case: 'text', value: text } }),
      flush: (id = 0) => write({ event: { case: 'flush', value: { id: BigInt(id) } } }),
      end: () => { if (!call.writableEnded) call.end(); },
      cancel: () => call.cancel(),
      [Symbol.asyncIterator]: () => iter,
    };
  }

  /** TranscribeStream: sends `config` first; audio frames and commits go in through the session. */
  async transcribeStream(config: TranscribeConfigInput, o: CallOptions = {}): Promise<TranscriptionSession> {
    const release = await this.begin(o);
    const call = this.client.transcribeStream(this.metadata(o), this.callOptions(o));
    call.on('error', () => {});
    const write = (m: MessageInitShape<typeof TranscribeStreamRequestSchema>) => {
      if (!call.writableEnded && !call.destroyed) call.write(create(TranscribeStreamRequestSchema, m));
    };
    write({ event: { case: 'config', value: config } });
    const iter = this.read(call, o, release);
    return {
      sendAudio: (pcm) => write({ event: { case: 'audio', value: pcm } }),
      commit: () => write({ event: { case: 'commit', value: {} } }),
      end: () => { if (!call.writableEnded) call.end(); },
      cancel: () => call.cancel(),
      [Symbol.asyncIterator]: () => iter,
    };
  }

  /** Transcribe: the whole recording (bytes) or a stream of byte pieces. */
  async transcribe(config: TranscribeConfigInput, audio: Uint8Array | AsyncIterable<Uint8Array>, o: CallOptions = {}): Promise<TranscribeResponse> {
    const release = await this.begin(o);
    try {
      return await new Promise<TranscribeResponse>((resolve, reject) => {
        const call = this.client.transcribe(this.metadata(o), this.callOptions(o, this.o.transcribeTimeoutMs), (err, res) => {
          o.signal?.removeEventListener('abort', onAbort);
          if (err) reject(this.mapError(err, o.signal));
          else resolve(res!);
        });
        const onAbort = () => call.cancel();
        o.signal?.addEventListener('abort', onAbort, { once: true });
        call.on('error', () => {});
        if (audio instanceof Uint8Array) {
          call.write(create(TranscribeRequestSchema, { config, audio }));
          call.end();
        } else {
          (async () => {
            call.write(create(TranscribeRequestSchema, { config }));
            for await (const piece of audio) {
              if (!call.write(create(TranscribeRequestSchema, { audio: piece }))) await new Promise((r) => call.once('drain', r));
            }
            call.end();
          })().catch((err) => { call.cancel(); reject(err); });
        }
      });
    } finally {
      release();
    }
  }

  private unary<R>(method: 'capabilities' | 'health', o: CallOptions): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      const cb = (err: grpc.ServiceError | null, res?: unknown) => {
        o.signal?.removeEventListener('abort', onAbort);
        if (err) reject(this.mapError(err, o.signal));
        else resolve(res as R);
      };
      const call = method === 'health'
        ? this.client.health(create(HealthRequestSchema), this.metadata(o), this.callOptions(o, this.o.unaryTimeoutMs), cb)
        : this.client.capabilities(create(CapabilitiesRequestSchema), this.metadata(o), this.callOptions(o, this.o.unaryTimeoutMs), cb);
      const onAbort = () => call.cancel();
      o.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** What the backend serves. */
  async capabilities(o: CallOptions = {}): Promise<CapabilitiesResponse> {
    await this.ready(o.signal);
    return this.unary('capabilities', o);
  }

  /** The backend's Health answer, or a 503 when it does not answer in time. */
  async health(o: CallOptions = {}): Promise<HealthResponse> {
    await this.ready(o.signal);
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
    this.client.close();
  }
}

