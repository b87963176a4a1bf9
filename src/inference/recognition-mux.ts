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

/** Input kinds: audio (its bytes kept as they are), or any other event. */
const AUDIO = 0;
const OTHER = 1;

/**
 * TranscribeStreams inputs not yet written: stream id, kind, audio bytes or the other event.
 * Audio inputs are encoded here (field 1 `stream`, field 3 `audio`: byte for byte what `toBinary`
 * writes) into one buffer with the others, which are rare (open, commit, end, cancel) and go
 * through `toBinary`.
 */
class RecognitionBatch implements InputBatch<Event, Buffer> {
  private ids: number[] = [];
  private kinds: number[] = [];
  private payloads: unknown[] = [];

  get length(): number {
    return this.ids.length;
  }

  add(id: number, event: Event): void {
    this.ids.push(id);
    this.kinds.push(OTHER);
    this.payloads.push(event);
  }

  addAudio(id: number, pcm: Uint8Array): void {
    this.ids.push(id);
    this.kinds.push(AUDIO);
    this.payloads.push(pcm);
  }

  clear(): void {
    this.ids.length = this.kinds.length = this.payloads.length = 0;
  }

  take(): Buffer {
    const { ids, kinds, payloads } = this;
    const n = ids.length;
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
        const bytes = toBinary(TranscribeStreamsInputSchema, create(TranscribeStreamsInputSchema, { stream: BigInt(ids[i]), event: payloads[i] as Event }));
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
    this.clear();
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
