/**
 * Many realtime recognition streams over one gRPC call (TranscribeStreams, docs/inference.md
 * "Many recognition streams on one call"), for a backend that lists it in Capabilities. Each
 * stream is what a TranscribeStream call is to its caller (a `TranscriptionSession`): the same
 * events, its own end, cancellation and error. What changes is on the wire: the inputs of every
 * stream queued during one turn of the event loop (caller frames arriving from many sockets)
 * leave as one message at its end (`setImmediate`: no added wait), encoded here, and the backend
 * answers the same way. How many that gathers depends on the load: 1.2–1.7 inputs per message at
 * 20 sessions, 13–18 at 300 (bench/README.md, fourteenth pass), so the per-message cost
 * shrinks where it matters. grpc-js's per-message
 * work (its filter chain, framing, one HTTP/2 DATA frame and socket write) is then paid once per
 * phase instead of once per frame per session (bench/README.md, fourteenth pass).
 *
 * A stream takes a slot of the backend's limiter as a call does. Cancelling a stream is an input
 * on the call, not an HTTP/2 stream reset, so it spends none of the connection's reset budget.
 * The call ending (the backend gone, the connection lost) fails every stream open on it, as it
 * would have failed their calls; the next stream opens a new call.
 */
import * as grpc from '@grpc/grpc-js';
import { create, toBinary } from '@bufbuild/protobuf';
import {
  TranscribeStreamResponseSchema,
  TranscribeStreamsInputSchema,
  type TranscribeStreamResponse,
  type TranscribeStreamsInput,
  type TranscribeStreamsResponse,
} from '../gen/inference/v1/inference_pb.ts';
import { ServiceError } from '../errors.ts';
import { fromGrpcError } from './errors.ts';
import { varintLength, writeVarint } from './grpc-service.ts';
import type { CallOptions, TranscribeConfigInput, TranscriptionSession } from './backend.ts';

/** A TranscribeStreams call as grpc-js gives it (messages written as their encoded bytes). */
export type MuxCall = grpc.ClientDuplexStream<Buffer, TranscribeStreamsResponse>;

/** What the mux needs of its backend client. */
export interface MuxHost {
  /** A slot of the backend's limiter (rejects when none frees in time, or on abort); resolves to its release. */
  acquire(signal?: AbortSignal): Promise<() => void>;
  /** Starts a TranscribeStreams call on a ready connection (rejects with 503 when none is); `done` when it ends. */
  start(): Promise<{ call: MuxCall; done: () => void }>;
  /** The call was refused as unknown (UNIMPLEMENTED): the backend does not offer it after all. */
  unimplemented(): void;
}

const abortReason = (signal: AbortSignal) => signal.reason ?? Object.assign(new Error('aborted'), { name: 'AbortError' });
const statusError = (code: number, details: string) =>
  fromGrpcError(Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() }));

/** Input kinds, in the order of TranscribeStreamsInput's oneof. */
const AUDIO = 0;
const OTHER = 1;

/** One stream on the call. */
class MuxStream implements TranscriptionSession {
  readonly queue: TranscribeStreamResponse[] = [];
  ended = false;
  failure: unknown = null;
  /** The caller gave up (cancel, abort, left its loop): nothing more is read or sent. */
  abandoned = false;
  wake: (() => void) | null = null;
  timer: NodeJS.Timeout | null = null;
  onAbort: (() => void) | null = null;
  private readonly iter: AsyncGenerator<TranscribeStreamResponse>;

  constructor(
    readonly mux: RecognitionMux,
    readonly id: number,
    readonly release: () => void,
    readonly signal: AbortSignal | undefined,
  ) {
    this.iter = this.read();
  }

  sendAudio(pcm: Uint8Array): void {
    if (!this.abandoned && !this.ended) this.mux.queue(this.id, AUDIO, pcm);
  }

  commit(): void {
    if (!this.abandoned && !this.ended) this.mux.queue(this.id, OTHER, { case: 'commit', value: {} });
  }

  end(): void {
    if (!this.abandoned && !this.ended) this.mux.queue(this.id, OTHER, { case: 'end', value: {} });
  }

  cancel(): void {
    this.mux.cancel(this);
  }

  notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  [Symbol.asyncIterator](): AsyncGenerator<TranscribeStreamResponse> {
    return this.iter;
  }

  private async *read(): AsyncGenerator<TranscribeStreamResponse> {
    let finished = false;
    try {
      for (;;) {
        if (this.signal?.aborted) throw abortReason(this.signal);
        if (this.abandoned) throw statusError(grpc.status.CANCELLED, 'Call cancelled');
        const m = this.queue.shift();
        if (m) {
          yield m;
          continue;
        }
        if (this.failure) throw this.failure;
        if (this.ended) break;
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
      finished = true;
    } catch (err) {
      finished = true;
      throw err;
    } finally {
      if (!finished) this.cancel();
    }
  }
}

export class RecognitionMux {
  private readonly streams = new Map<number, MuxStream>();
  private nextId = 1;
  /** The call, or its start in progress. */
  private current: Promise<{ call: MuxCall; done: () => void }> | null = null;
  private call: MuxCall | null = null;
  private closed = false;
  /** Inputs not yet written: stream id, kind, audio bytes or the other event. */
  private ids: number[] = [];
  private kinds: number[] = [];
  private payloads: unknown[] = [];
  private scheduled = false;
  private readonly flushNow = () => this.flush();

  /** Messages written on the calls so far, and the inputs they carried. */
  readonly sent = { messages: 0, inputs: 0 };

  constructor(private readonly host: MuxHost) {}

  /** Streams open on the call. */
  get size(): number {
    return this.streams.size;
  }

  /** Opens a stream: a slot, the call (started if needed), then the `open` input. */
  async open(config: TranscribeConfigInput, o: CallOptions): Promise<TranscriptionSession> {
    o.signal?.throwIfAborted();
    if (this.closed) throw new ServiceError('unavailable', 'Inference client closed');
    const release = await this.host.acquire(o.signal);
    try {
      await this.ensureCall(o.signal);
    } catch (err) {
      release();
      throw err;
    }
    const s = new MuxStream(this, this.nextId++, release, o.signal);
    this.streams.set(s.id, s);
    if (o.signal) {
      s.onAbort = () => this.cancel(s);
      o.signal.addEventListener('abort', s.onAbort, { once: true });
    }
    if (o.timeoutMs) {
      s.timer = setTimeout(() => this.fail(s, statusError(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded'), true), o.timeoutMs);
      s.timer.unref();
    }
    this.queue(s.id, OTHER, { case: 'open', value: { config, requestId: o.requestId ?? '', teamId: o.teamId ?? '', traceparent: o.traceparent ?? '' } });
    return s;
  }

  private async ensureCall(signal?: AbortSignal): Promise<void> {
    if (!this.current) {
      const started = this.host.start();
      this.current = started;
      started.then(
        ({ call, done }) => this.attach(call, done, started),
        () => { if (this.current === started) this.current = null; },
      );
    }
    const current = this.current;
    if (!signal) {
      await current;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(abortReason(signal));
      signal.addEventListener('abort', onAbort, { once: true });
      current.then(
        () => { signal.removeEventListener('abort', onAbort); resolve(); },
        (err) => { signal.removeEventListener('abort', onAbort); reject(err); },
      );
    });
  }

  private attach(call: MuxCall, done: () => void, started: Promise<unknown>): void {
    this.call = call;
    if (this.scheduled === false && this.ids.length) this.schedule();
    let over = false;
    const end = (err: unknown) => {
      if (over) return;
      over = true;
      done();
      if (this.current === started) {
        this.current = null;
        this.call = null;
      }
      // Inputs queued for this call are lost with it; their streams fail below.
      this.ids.length = this.kinds.length = this.payloads.length = 0;
      const code = (err as { code?: unknown } | null)?.code;
      if (code === grpc.status.UNIMPLEMENTED) this.host.unimplemented();
      const failure = err && typeof code === 'number'
        ? fromGrpcError(err as grpc.ServiceError)
        : new ServiceError('unavailable', 'Inference backend ended the recognition call');
      for (const s of [...this.streams.values()]) this.fail(s, failure, false);
    };
    call.on('data', (m: TranscribeStreamsResponse) => this.receive(m));
    call.on('error', (err) => end(err));
    call.on('status', (st: grpc.StatusObject) => end(st.code === grpc.status.OK ? null : st));
    call.on('end', () => setImmediate(() => end(null)));
  }

  private receive(m: TranscribeStreamsResponse): void {
    for (const out of m.outputs) {
      const s = this.streams.get(Number(out.stream));
      if (!s) continue; // cancelled: dropped
      const ev = out.event;
      if (ev.case === 'status') {
        if (ev.value.code === grpc.status.OK) this.finish(s);
        else this.fail(s, statusError(ev.value.code, ev.value.message), false);
      } else if (ev.case !== undefined) {
        s.queue.push(create(TranscribeStreamResponseSchema, { event: ev }));
        s.notify();
      }
    }
  }

  /** The stream is over for this side: slot back, listeners off. */
  private settle(s: MuxStream): boolean {
    if (!this.streams.delete(s.id)) return false;
    if (s.timer) clearTimeout(s.timer);
    if (s.onAbort) s.signal?.removeEventListener('abort', s.onAbort);
    s.release();
    return true;
  }

  private finish(s: MuxStream): void {
    if (!this.settle(s)) return;
    s.ended = true;
    s.notify();
  }

  /** Fails a stream; `tell`: the backend still runs it and is told to stop. */
  private fail(s: MuxStream, err: unknown, tell: boolean): void {
    if (!this.settle(s)) return;
    if (tell) this.queue(s.id, OTHER, { case: 'cancel', value: {} });
    s.failure = err;
    s.ended = true;
    s.notify();
  }

  cancel(s: MuxStream): void {
    if (s.abandoned) return;
    s.abandoned = true;
    s.queue.length = 0;
    if (this.settle(s)) this.queue(s.id, OTHER, { case: 'cancel', value: {} });
    s.notify();
  }

  queue(id: number, kind: number, payload: unknown): void {
    this.ids.push(id);
    this.kinds.push(kind);
    this.payloads.push(payload);
    if (!this.scheduled && this.call) this.schedule();
  }

  private schedule(): void {
    this.scheduled = true;
    setImmediate(this.flushNow);
  }

  /**
   * Writes every queued input as one TranscribeStreamsRequest. Audio inputs are encoded here
   * (field 1 `stream`, field 3 `audio`: byte for byte what `toBinary` writes) into one buffer
   * with the others, which are rare (open, commit, end, cancel) and go through `toBinary`.
   */
  private flush(): void {
    this.scheduled = false;
    const call = this.call;
    const n = this.ids.length;
    if (!call || n === 0) return;
    const { ids, kinds, payloads } = this;
    const encoded: (Uint8Array | null)[] = new Array(n);
    const lengths: number[] = new Array(n);
    let total = 0;
    for (let i = 0; i < n; i++) {
      let len: number;
      if (kinds[i] === AUDIO) {
        const a = payloads[i] as Uint8Array;
        len = 1 + varintLength(ids[i]) + 1 + varintLength(a.length) + a.length;
        encoded[i] = null;
      } else {
        const bytes = toBinary(TranscribeStreamsInputSchema, create(TranscribeStreamsInputSchema, { stream: BigInt(ids[i]), event: payloads[i] as TranscribeStreamsInput['event'] }));
        encoded[i] = bytes;
        len = bytes.length;
      }
      lengths[i] = len;
      total += 1 + varintLength(len) + len;
    }
    const out = Buffer.allocUnsafe(total);
    let at = 0;
    for (let i = 0; i < n; i++) {
      out[at++] = 0x0a; // field 1 `inputs`, length-delimited
      at = writeVarint(out, at, lengths[i]);
      const e = encoded[i];
      if (e) {
        out.set(e, at);
        at += e.length;
      } else {
        const a = payloads[i] as Uint8Array;
        out[at++] = 0x08; // field 1 `stream`, varint
        at = writeVarint(out, at, ids[i]);
        out[at++] = 0x1a; // field 3 `audio`, length-delimited
        at = writeVarint(out, at, a.length);
        out.set(a, at);
        at += a.length;
      }
    }
    ids.length = kinds.length = payloads.length = 0;
    this.sent.messages++;
    this.sent.inputs += n;
    if (!call.writableEnded && !call.destroyed) call.write(out);
  }

  /** Ends the call (the client is closing): its open streams fail as their calls would. */
  close(): void {
    this.closed = true;
    this.call?.cancel();
  }
}
