/**
 * Many live streams over one gRPC call: what TranscribeStreams (recognition-mux.ts) and
 * SynthesizeStreams (synthesis-mux.ts) share (docs/inference.md, "Many recognition streams on
 * one call", "Many synthesis streams on one call"; D-SCALE-5, D-SCALE-6). A stream kind supplies
 * its stream class (what its caller sends), its `open` input, how an output event becomes what the
 * caller reads, and how its inputs are kept and encoded (`InputBatch`); this class does the rest:
 *
 * - The call: started on the first stream (`MuxHost.start`), shared by every stream after, and
 *   when it ends (the backend gone, the connection lost) every stream open on it fails as it
 *   would have failed its own call; the next stream starts a new call. A call refused as
 *   UNIMPLEMENTED tells the host, which goes back to a call per stream.
 * - A stream: a slot of the backend's limiter as a call takes, an id (1, 2, 3, ...: ids
 *   increase on a call, as the contract requires), its deadline and abort signal, its outputs
 *   queued until its caller reads them, its status (OK ends it, any other fails it), and its
 *   cancellation, an input on the call (no HTTP/2 stream reset).
 * - The batching: the inputs of every stream queued during one turn of the event loop leave as
 *   one message at its end (`setImmediate`: no added wait).
 */
import * as grpc from '@grpc/grpc-js';
import { ServiceError } from '../errors.ts';
import { fromGrpcError } from './errors.ts';
import type { CallOptions } from './backend.ts';
import { WriteBacklog } from './write-backlog.ts';

/** A shared call as grpc-js gives it: requests `Req` written, responses carrying `outputs`. */
export type SharedCall<Req, Res> = grpc.ClientDuplexStream<Req, Res>;

/** One output of a shared call: a stream's event, its status last. */
export interface StreamOutput {
  stream: bigint;
  event: { case: string | undefined; value?: unknown };
}

/** What a mux needs of its backend client. */
export interface MuxHost<C> {
  /** A slot of the backend's limiter (rejects when none frees in time, or on abort); resolves to its release. */
  acquire(signal?: AbortSignal): Promise<() => void>;
  /** Starts the shared call on a ready connection (rejects with 503 when none is); `done` when it ends. */
  start(): Promise<{ call: C; done: () => void }>;
  /** The call was refused as unknown (UNIMPLEMENTED): the backend does not offer it after all. */
  unimplemented(): void;
}

/** Where a kind keeps the inputs queued during one phase, and how they leave as one message. */
export interface InputBatch<E, Req> {
  readonly length: number;
  /** Queues an input of stream `id`. */
  add(id: number, event: E): void;
  /** Forgets every queued input (the call they were for ended). */
  clear(): void;
  /** One request carrying every queued input, in order; the batch is empty after. */
  take(): Req;
}

/**
 * Inputs kept as messages until the phase ends, then written as one request (SynthesizeStreams',
 * GenerateStreams'; recognition encodes its audio as it is queued instead, recognition-mux.ts).
 */
export class MessageBatch<E, I, Req> implements InputBatch<E, Req> {
  private inputs: I[] = [];

  constructor(
    /** One stream's input as a message. */
    private readonly input: (id: number, event: E) => I,
    /** The request carrying `inputs`. */
    private readonly request: (inputs: I[]) => Req,
  ) {}

  get length(): number {
    return this.inputs.length;
  }

  add(id: number, event: E): void {
    this.inputs.push(this.input(id, event));
  }

  clear(): void {
    this.inputs = [];
  }

  take(): Req {
    const inputs = this.inputs;
    this.inputs = [];
    return this.request(inputs);
  }
}

export const abortReason = (signal: AbortSignal) => signal.reason ?? Object.assign(new Error('aborted'), { name: 'AbortError' });
export const statusError = (code: number, details: string) =>
  fromGrpcError(Object.assign(new Error(details), { code, details, metadata: new grpc.Metadata() }));

/** One stream on a shared call, read by its caller as the events of a call of its own. */
export class MuxStream<Out> {
  readonly queue: Out[] = [];
  ended = false;
  failure: unknown = null;
  /** The caller gave up (cancel, abort, left its loop): nothing more is read or sent. */
  abandoned = false;
  wake: (() => void) | null = null;
  timer: NodeJS.Timeout | null = null;
  onAbort: (() => void) | null = null;
  private readonly iter: AsyncGenerator<Out>;

  constructor(
    readonly mux: { cancel(s: MuxStream<Out>): void },
    readonly id: number,
    readonly release: () => void,
    readonly signal: AbortSignal | undefined,
  ) {
    this.iter = this.read();
  }

  /** The stream may still send: neither abandoned nor ended. */
  protected live(): boolean {
    return !this.abandoned && !this.ended;
  }

  cancel(): void {
    this.mux.cancel(this);
  }

  notify(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  [Symbol.asyncIterator](): AsyncGenerator<Out> {
    return this.iter;
  }

  /** The caller is about to take `m` (synthesis grants credit for it). */
  protected took(_m: Out): void {}

  private async *read(): AsyncGenerator<Out> {
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

/**
 * The mux of one stream kind: `S` its streams, `Out` what their callers read, `E` an input event,
 * `Req` a request message, `Config` what a stream opens with.
 */
export abstract class StreamMux<S extends MuxStream<Out>, Out, E, Req, Config> {
  private readonly streams = new Map<number, S>();
  private nextId = 1;
  /** The call, or its start in progress. */
  private current: Promise<{ call: SharedCall<Req, { outputs: StreamOutput[] }>; done: () => void }> | null = null;
  private call: SharedCall<Req, { outputs: StreamOutput[] }> | null = null;
  private closed = false;
  private scheduled = false;
  private readonly flushNow = () => this.flush();
  /** Messages handed to the call whose bytes have not left yet (write-backlog.ts). */
  private readonly waiting = new WriteBacklog();
  private onWritten: (() => void) | null = null;

  /** Messages written on the calls so far, and the inputs they carried. */
  readonly sent = { messages: 0, inputs: 0 };

  constructor(
    private readonly host: MuxHost<SharedCall<Req, any>>,
    /** Inputs not yet written. */
    protected readonly batch: InputBatch<E, Req>,
    /** What the call is, in the error of a call that ended without a status: 'recognition'. */
    private readonly what: string,
    /** A stream's failure drops the outputs its caller has not read yet (synthesis: audio). */
    private readonly dropOnFail: boolean,
  ) {}

  /** A new stream of this kind. */
  protected abstract stream(id: number, release: () => void, signal: AbortSignal | undefined): S;
  /** The `open` input of a stream. */
  protected abstract openEvent(config: Config, o: CallOptions): E;
  /** What the caller reads for an output event (not a status). */
  protected abstract output(event: StreamOutput['event']): Out;
  /** The `cancel` input. */
  protected abstract cancelEvent(): E;

  /** Streams open on the call. */
  get size(): number {
    return this.streams.size;
  }

  /** The open streams. */
  protected openStreams(): IterableIterator<S> {
    return this.streams.values();
  }

  /** Opens a stream: a slot, the call (started if needed), then the `open` input. */
  async open(config: Config, o: CallOptions): Promise<S> {
    o.signal?.throwIfAborted();
    if (this.closed) throw new ServiceError('unavailable', 'Inference client closed');
    const release = await this.host.acquire(o.signal);
    try {
      await this.ensureCall(o.signal);
    } catch (err) {
      release();
      throw err;
    }
    const s = this.stream(this.nextId++, release, o.signal);
    this.streams.set(s.id, s);
    if (o.signal) {
      s.onAbort = () => this.cancel(s);
      o.signal.addEventListener('abort', s.onAbort, { once: true });
    }
    if (o.timeoutMs) {
      s.timer = setTimeout(() => this.fail(s, statusError(grpc.status.DEADLINE_EXCEEDED, 'Deadline exceeded'), true), o.timeoutMs);
      s.timer.unref();
    }
    this.queue(s.id, this.openEvent(config, o));
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

  private attach(call: SharedCall<Req, { outputs: StreamOutput[] }>, done: () => void, started: Promise<unknown>): void {
    this.call = call;
    this.waiting.clear();
    // Writes call back in order: each is the oldest one waiting (a past call's are ignored).
    this.onWritten = () => { if (this.call === call) this.waiting.sent(); };
    let over = false;
    const end = (err: unknown) => {
      if (over) return;
      over = true;
      done();
      if (this.current === started) {
        this.current = null;
        this.call = null;
        this.waiting.clear();
      }
      // Inputs queued for this call are lost with it; their streams fail below.
      this.batch.clear();
      const code = (err as { code?: unknown } | null)?.code;
      if (code === grpc.status.UNIMPLEMENTED) this.host.unimplemented();
      const failure = err && typeof code === 'number'
        ? fromGrpcError(err as grpc.ServiceError)
        : new ServiceError('unavailable', `Inference backend ended the ${this.what} call`);
      for (const s of [...this.streams.values()]) this.fail(s, failure, false);
    };
    call.on('data', (m: { outputs: StreamOutput[] }) => this.receive(m));
    call.on('error', (err) => end(err));
    call.on('status', (st: grpc.StatusObject) => end(st.code === grpc.status.OK ? null : st));
    call.on('end', () => setImmediate(() => end(null)));
    // The client closed while this call was starting (`close` had no call to cancel yet): a
    // call left open here would keep its connection, and the process, alive; nothing queued is
    // written on it.
    if (this.closed) call.cancel();
    else if (!this.scheduled && this.batch.length) this.schedule();
  }

  private receive(m: { outputs: StreamOutput[] }): void {
    for (const out of m.outputs) {
      const s = this.streams.get(Number(out.stream));
      if (!s) continue; // cancelled: dropped
      const ev = out.event;
      if (ev.case === 'status') {
        const st = ev.value as { code: number; message: string };
        if (st.code === grpc.status.OK) this.finish(s);
        else this.fail(s, statusError(st.code, st.message), false);
      } else if (ev.case !== undefined) {
        s.queue.push(this.output(ev));
        s.notify();
      }
    }
  }

  /** The stream is over for this side: slot back, listeners off. */
  private settle(s: S): boolean {
    if (!this.streams.delete(s.id)) return false;
    if (s.timer) clearTimeout(s.timer);
    if (s.onAbort) s.signal?.removeEventListener('abort', s.onAbort);
    s.release();
    return true;
  }

  private finish(s: S): void {
    if (!this.settle(s)) return;
    s.ended = true;
    s.notify();
  }

  /** Fails a stream; `tell`: the backend still runs it and is told to stop. */
  private fail(s: S, err: unknown, tell: boolean): void {
    if (!this.settle(s)) return;
    if (tell) this.queue(s.id, this.cancelEvent());
    s.failure = err;
    s.ended = true;
    if (this.dropOnFail) s.queue.length = 0;
    s.notify();
  }

  cancel(s: S): void {
    if (s.abandoned) return;
    s.abandoned = true;
    s.queue.length = 0;
    if (this.settle(s)) this.queue(s.id, this.cancelEvent());
    s.notify();
  }

  /** Queues an input of stream `id`, written at the end of this phase. */
  queue(id: number, event: E): void {
    this.batch.add(id, event);
    this.queued();
  }

  /** An input was added to the batch: the batch leaves at the end of this phase. */
  protected queued(): void {
    if (!this.scheduled && this.call) this.schedule();
  }

  private schedule(): void {
    this.scheduled = true;
    setImmediate(this.flushNow);
  }

  /** Writes every queued input as one request. */
  private flush(): void {
    this.scheduled = false;
    const call = this.call;
    const n = this.batch.length;
    if (!call || n === 0) return;
    const req = this.batch.take();
    this.sent.messages++;
    this.sent.inputs += n;
    if (call.writableEnded || call.destroyed) return;
    this.waiting.written((req as { length?: number }).length ?? 0);
    call.write(req, this.onWritten!);
  }

  /**
   * What this mux has written on its call that has not left for the backend yet: its bytes
   * (requests of a kind without a byte length count 0) and how long the oldest has waited, in
   * ms (0 with nothing waiting). docs/inference.md, "Send backlog".
   */
  backlog(now = performance.now()): { bytes: number; ageMs: number } {
    return { bytes: this.waiting.bytes, ageMs: this.waiting.ageMs(now) };
  }

  /** Ends the call (the client is closing): its open streams fail as their calls would. */
  close(): void {
    this.closed = true;
    this.call?.cancel();
  }
}
