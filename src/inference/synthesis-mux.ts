/**
 * Many live synthesis streams over one gRPC call (SynthesizeStreams, docs/inference.md "Many
 * synthesis streams on one call"), for a backend that lists it in Capabilities. Each stream is
 * what a SynthesizeStream call is to its caller (a `SynthesisSession`): the same chunks and
 * flushed events, its own end, cancellation and error. As with recognition (recognition-mux.ts,
 * D-SCALE-5), the inputs of every stream queued during one turn of the event loop leave as one
 * message at its end (`setImmediate`), and the backend answers the same way, so a turn's call
 * setup (a new HTTP/2 stream, its headers, its status) and the per-message cost of the agent's
 * audio are shared by every talking session (D-SCALE-6).
 *
 * Flow control: on its own call, a stream's audio was held back by HTTP/2 (the stream's receive
 * window) while its caller played it at real time. On a shared call that window is everyone's,
 * so each stream has its own credit, in bytes of audio: `SYNTHESIS_WINDOW_BYTES` when it opens,
 * granted again as its caller takes chunks (`SYNTHESIS_GRANT_BYTES` at a time). The backend sends
 * a stream's chunks only while it has credit; what a stream holds here is at most its window and
 * one chunk.
 *
 * A stream takes a slot of the backend's limiter as a call does. Cancelling a stream is an input
 * on the call (no HTTP/2 stream reset). The call ending (the backend gone, the connection lost)
 * fails every stream open on it, as it would have failed their calls; the next stream opens a
 * new call.
 */
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  SynthesizeStreamResponseSchema,
  SynthesizeStreamsInputSchema,
  SynthesizeStreamsRequestSchema,
  type SynthesizeStreamResponse,
  type SynthesizeStreamsInput,
  type SynthesizeStreamsRequest,
  type SynthesizeStreamsResponse,
} from '../gen/inference/v1/inference_pb.ts';
import { ServiceError } from '../errors.ts';
import { fromGrpcError } from './errors.ts';
import type { CallOptions, SynthesisSession, SynthesizeInput } from './backend.ts';

/** A SynthesizeStreams call as grpc-js gives it. */
export type SynthesisMuxCall = grpc.ClientDuplexStream<SynthesizeStreamsRequest, SynthesizeStreamsResponse>;

/** What the mux needs of its backend client (as recognition-mux.ts's MuxHost). */
export interface SynthesisMuxHost {
  acquire(signal?: AbortSignal): Promise<() => void>;
  start(): Promise<{ call: SynthesisMuxCall; done: () => void }>;
  unimplemented(): void;
}

/**
 * A stream's first credit: 2 s of 16 kHz 16-bit audio (what a session asks for; ~1.3 s at
 * 24 kHz). A reply's first seconds arrive at once, the rest as the caller plays them.
 */
export const SYNTHESIS_WINDOW_BYTES = 64 * 1024;
/** Credit is granted again once the caller has taken this much audio since the last grant. */
export const SYNTHESIS_GRANT_BYTES = 16 * 1024;

const abortReason = (signal: AbortSignal) => signal.reason ?? Object.assign(new Error('aborted'), { name: 'AbortError' });
const statusError = (code: number, details: string) =>
  fromGrpcError(Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() }));

type Event = NonNullable<MessageInitShape<typeof SynthesizeStreamsInputSchema>['event']>;

/** One stream on the call. */
class SynthesisStream implements SynthesisSession {
  readonly queue: SynthesizeStreamResponse[] = [];
  ended = false;
  failure: unknown = null;
  abandoned = false;
  /** Audio taken by the caller since the last grant. */
  taken = 0;
  wake: (() => void) | null = null;
  timer: NodeJS.Timeout | null = null;
  onAbort: (() => void) | null = null;
  private readonly iter: AsyncGenerator<SynthesizeStreamResponse>;

  constructor(
    readonly mux: SynthesisMux,
    readonly id: number,
    readonly release: () => void,
    readonly signal: AbortSignal | undefined,
  ) {
    this.iter = this.read();
  }

  private live(): boolean {
    return !this.abandoned && !this.ended;
  }

  send(text: string): void {
    if (this.live()) this.mux.queue(this.id, { case: 'text', value: text });
  }

  flush(id: number | bigint = 0): void {
    if (this.live()) this.mux.queue(this.id, { case: 'flush', value: { id: BigInt(id) } });
  }

  end(): void {
    if (this.live()) this.mux.queue(this.id, { case: 'end', value: {} });
  }

  cancel(): void {
    this.mux.cancel(this);
  }

  notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  [Symbol.asyncIterator](): AsyncGenerator<SynthesizeStreamResponse> {
    return this.iter;
  }

  /** The caller took `m`: its audio is credit again once enough has gathered. */
  private took(m: SynthesizeStreamResponse): void {
    if (m.event.case !== 'chunk') return;
    this.taken += m.event.value.audio.length;
    if (this.taken >= SYNTHESIS_GRANT_BYTES && this.live()) {
      this.mux.queue(this.id, { case: 'credit', value: this.taken });
      this.taken = 0;
    }
  }

  private async *read(): AsyncGenerator<SynthesizeStreamResponse> {
    let finished = false;
    try {
      for (;;) {
        if (this.signal?.aborted) throw abortReason(this.signal);
        if (this.abandoned) throw statusError(grpc.status.CANCELLED, 'Call cancelled');
        const m = this.queue.shift();
        if (m) {
          this.took(m);
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

export class SynthesisMux {
  private readonly streams = new Map<number, SynthesisStream>();
  private nextId = 1;
  private current: Promise<{ call: SynthesisMuxCall; done: () => void }> | null = null;
  private call: SynthesisMuxCall | null = null;
  private closed = false;
  /** Inputs not yet written. */
  private inputs: SynthesizeStreamsInput[] = [];
  private scheduled = false;
  private readonly flushNow = () => this.flush();

  /** Messages written on the calls so far, the inputs they carried, and the credit inputs among them. */
  readonly sent = { messages: 0, inputs: 0, credits: 0 };

  constructor(private readonly host: SynthesisMuxHost) {}

  /** Streams open on the call. */
  get size(): number {
    return this.streams.size;
  }

  /** Audio bytes received and not yet taken by their callers, over every open stream. */
  get buffered(): number {
    let n = 0;
    for (const s of this.streams.values()) for (const m of s.queue) if (m.event.case === 'chunk') n += m.event.value.audio.length;
    return n;
  }

  /** Opens a stream: a slot, the call (started if needed), then the `open` input with its first credit. */
  async open(config: SynthesizeInput, o: CallOptions): Promise<SynthesisSession> {
    o.signal?.throwIfAborted();
    if (this.closed) throw new ServiceError('unavailable', 'Inference client closed');
    const release = await this.host.acquire(o.signal);
    try {
      await this.ensureCall(o.signal);
    } catch (err) {
      release();
      throw err;
    }
    const s = new SynthesisStream(this, this.nextId++, release, o.signal);
    this.streams.set(s.id, s);
    if (o.signal) {
      s.onAbort = () => this.cancel(s);
      o.signal.addEventListener('abort', s.onAbort, { once: true });
    }
    if (o.timeoutMs) {
      s.timer = setTimeout(() => this.fail(s, statusError(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded'), true), o.timeoutMs);
      s.timer.unref();
    }
    this.queue(s.id, {
      case: 'open',
      value: { config, requestId: o.requestId ?? '', teamId: o.teamId ?? '', traceparent: o.traceparent ?? '', credit: SYNTHESIS_WINDOW_BYTES },
    });
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

  private attach(call: SynthesisMuxCall, done: () => void, started: Promise<unknown>): void {
    this.call = call;
    if (!this.scheduled && this.inputs.length) this.schedule();
    let over = false;
    const end = (err: unknown) => {
      if (over) return;
      over = true;
      done();
      if (this.current === started) {
        this.current = null;
        this.call = null;
      }
      this.inputs = [];
      const code = (err as { code?: unknown } | null)?.code;
      if (code === grpc.status.UNIMPLEMENTED) this.host.unimplemented();
      const failure = err && typeof code === 'number'
        ? fromGrpcError(err as grpc.ServiceError)
        : new ServiceError('unavailable', 'Inference backend ended the synthesis call');
      for (const s of [...this.streams.values()]) this.fail(s, failure, false);
    };
    call.on('data', (m: SynthesizeStreamsResponse) => this.receive(m));
    call.on('error', (err) => end(err));
    call.on('status', (st: grpc.StatusObject) => end(st.code === grpc.status.OK ? null : st));
    call.on('end', () => setImmediate(() => end(null)));
  }

  private receive(m: SynthesizeStreamsResponse): void {
    for (const out of m.outputs) {
      const s = this.streams.get(Number(out.stream));
      if (!s) continue; // cancelled: dropped
      const ev = out.event;
      if (ev.case === 'status') {
        if (ev.value.code === grpc.status.OK) this.finish(s);
        else this.fail(s, statusError(ev.value.code, ev.value.message), false);
      } else if (ev.case !== undefined) {
        s.queue.push(create(SynthesizeStreamResponseSchema, { event: ev }));
        s.notify();
      }
    }
  }

  private settle(s: SynthesisStream): boolean {
    if (!this.streams.delete(s.id)) return false;
    if (s.timer) clearTimeout(s.timer);
    if (s.onAbort) s.signal?.removeEventListener('abort', s.onAbort);
    s.release();
    return true;
  }

  private finish(s: SynthesisStream): void {
    if (!this.settle(s)) return;
    s.ended = true;
    s.notify();
  }

  /** Fails a stream; `tell`: the backend still runs it and is told to stop. */
  private fail(s: SynthesisStream, err: unknown, tell: boolean): void {
    if (!this.settle(s)) return;
    if (tell) this.queue(s.id, { case: 'cancel', value: {} });
    s.failure = err;
    s.ended = true;
    s.queue.length = 0;
    s.notify();
  }

  cancel(s: SynthesisStream): void {
    if (s.abandoned) return;
    s.abandoned = true;
    s.queue.length = 0;
    if (this.settle(s)) this.queue(s.id, { case: 'cancel', value: {} });
    s.notify();
  }

  queue(id: number, event: Event): void {
    this.inputs.push(create(SynthesizeStreamsInputSchema, { stream: BigInt(id), event }));
    if (event.case === 'credit') this.sent.credits++;
    if (!this.scheduled && this.call) this.schedule();
  }

  private schedule(): void {
    this.scheduled = true;
    setImmediate(this.flushNow);
  }

  /** Writes every queued input as one SynthesizeStreamsRequest. */
  private flush(): void {
    this.scheduled = false;
    const call = this.call;
    const inputs = this.inputs;
    if (!call || inputs.length === 0) return;
    this.inputs = [];
    this.sent.messages++;
    this.sent.inputs += inputs.length;
    if (!call.writableEnded && !call.destroyed) call.write(create(SynthesizeStreamsRequestSchema, { inputs }));
  }

  /** Ends the call (the client is closing): its open streams fail as their calls would. */
  close(): void {
    this.closed = true;
    this.call?.cancel();
  }
}
