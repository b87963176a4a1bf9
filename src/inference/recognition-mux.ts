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
 * The call, the streams' bookkeeping and the batching are stream-mux.ts's, shared with
 * synthesis; this file has what is recognition's own: the stream's inputs (audio, commit, end)
 * and their encoding, audio written by hand without a message object per frame.
 */
import * as grpc from '@grpc/grpc-js';
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import {
  TranscribeStreamResponseSchema,
  TranscribeStreamsInputSchema,
  type TranscribeStreamResponse,
  type TranscribeStreamsResponse,
} from '../gen/inference/v1/inference_pb.ts';
import { varintLength, writeVarint } from './grpc-service.ts';
import { MuxStream, StreamMux, type InputBatch, type MuxHost as Host, type StreamOutput } from './stream-mux.ts';
import type { CallOptions, TranscribeConfigInput, TranscriptionSession } from './backend.ts';

/** A TranscribeStreams call as grpc-js gives it (messages written as their encoded bytes). */
export type MuxCall = grpc.ClientDuplexStream<Buffer, TranscribeStreamsResponse>;

/** What the mux needs of its backend client. */
export type MuxHost = Host<MuxCall>;

type Event = NonNullable<MessageInitShape<typeof TranscribeStreamsInputSchema>['event']>;

/**
 * The batch buffer's first size; it grows to the largest request (a turn of a busy event loop at
 * 1,000 sessions gathers up to ~1–2 MB) and is kept up to `MAX_KEPT_BYTES` (a larger one, after
 * a backlog, is dropped).
 */
const FIRST_BYTES = 64 * 1024;
const MAX_KEPT_BYTES = 8 * 1024 * 1024;

/**
 * TranscribeStreams inputs not yet written, already encoded: each input (field 1 `inputs` of the
 * request) is written into one growing buffer as it is queued, audio by hand (field 1 `stream`,
 * field 3 `audio`: byte for byte what `toBinary` writes) and the other events, which are rare
 * (open, commit, end, cancel), through `toBinary`. A caller's frame is read only while it is
 * queued (`addAudio`): the caller may reuse its buffer at once, so the websocket transport hands
 * over a view of uWebSockets.js's own buffer instead of copying each frame into a new one
 * (bench/README.md, twenty-third pass). `take` copies the request out in one piece; the
 * buffer itself is reused for the next.
 */
class RecognitionBatch implements InputBatch<Event, Buffer> {
  private buf = Buffer.allocUnsafeSlow(FIRST_BYTES);
  private used = 0;
  private count = 0;

  get length(): number {
    return this.count;
  }

  /** Makes room for `n` more bytes, keeping what is written. */
  private room(n: number): Buffer {
    const need = this.used + n;
    if (need > this.buf.length) {
      const next = Buffer.allocUnsafeSlow(Math.max(need, this.buf.length * 2));
      this.buf.copy(next, 0, 0, this.used);
      this.buf = next;
    }
    return this.buf;
  }

  add(id: number, event: Event): void {
    const bytes = toBinary(TranscribeStreamsInputSchema, create(TranscribeStreamsInputSchema, { stream: BigInt(id), event }));
    const buf = this.room(1 + varintLength(bytes.length) + bytes.length);
    buf[this.used++] = 0x0a; // field 1 `inputs`, length-delimited
    this.used = writeVarint(buf, this.used, bytes.length);
    buf.set(bytes, this.used);
    this.used += bytes.length;
    this.count++;
  }

  addAudio(id: number, pcm: Uint8Array): void {
    const len = 1 + varintLength(id) + 1 + varintLength(pcm.length) + pcm.length;
    const buf = this.room(1 + varintLength(len) + len);
    let at = this.used;
    buf[at++] = 0x0a; // field 1 `inputs`, length-delimited
    at = writeVarint(buf, at, len);
    buf[at++] = 0x08; // field 1 `stream`, varint
    at = writeVarint(buf, at, id);
    buf[at++] = 0x1a; // field 3 `audio`, length-delimited
    at = writeVarint(buf, at, pcm.length);
    buf.set(pcm, at);
    this.used = at + pcm.length;
    this.count++;
  }

  clear(): void {
    this.used = 0;
    this.count = 0;
  }

  take(): Buffer {
    const out = Buffer.allocUnsafe(this.used);
    this.buf.copy(out, 0, 0, this.used);
    this.clear();
    if (this.buf.length > MAX_KEPT_BYTES) this.buf = Buffer.allocUnsafeSlow(FIRST_BYTES);
    return out;
  }
}

/** One stream on the call. */
class RecognitionStream extends MuxStream<TranscribeStreamResponse> implements TranscriptionSession {
  constructor(override readonly mux: RecognitionMux, id: number, release: () => void, signal: AbortSignal | undefined) {
    super(mux, id, release, signal);
  }

  sendAudio(pcm: Uint8Array): void {
    if (this.live()) this.mux.queueAudio(this.id, pcm);
  }

  commit(): void {
    if (this.live()) this.mux.queue(this.id, { case: 'commit', value: {} });
  }

  end(): void {
    if (this.live()) this.mux.queue(this.id, { case: 'end', value: {} });
  }
}

export class RecognitionMux extends StreamMux<RecognitionStream, TranscribeStreamResponse, Event, Buffer, TranscribeConfigInput> {
  declare protected readonly batch: RecognitionBatch;

  constructor(host: MuxHost) {
    super(host, new RecognitionBatch(), 'recognition', false);
  }

  protected stream(id: number, release: () => void, signal: AbortSignal | undefined): RecognitionStream {
    return new RecognitionStream(this, id, release, signal);
  }

  protected openEvent(config: TranscribeConfigInput, o: CallOptions): Event {
    return { case: 'open', value: { config, requestId: o.requestId ?? '', teamId: o.teamId ?? '', traceparent: o.traceparent ?? '' } };
  }

  protected output(event: StreamOutput['event']): TranscribeStreamResponse {
    return create(TranscribeStreamResponseSchema, { event: event as TranscribeStreamResponse['event'] });
  }

  protected cancelEvent(): Event {
    return { case: 'cancel', value: {} };
  }

  /** Queues a frame of audio of stream `id`. */
  queueAudio(id: number, pcm: Uint8Array): void {
    this.batch.addAudio(id, pcm);
    this.queued();
  }
}
