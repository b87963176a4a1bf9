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
 * The call, the streams' bookkeeping and the batching are stream-mux.ts's, shared with
 * recognition; this file has what is synthesis's own: the stream's inputs (text, flush, end), its
 * credit, and a failure dropping the audio its caller has not taken.
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
import { MessageBatch, MuxStream, StreamMux, type MuxHost, type StreamOutput } from './stream-mux.ts';
import type { CallOptions, SynthesisSession, SynthesizeInput } from './backend.ts';

/** A SynthesizeStreams call as grpc-js gives it. */
export type SynthesisMuxCall = grpc.ClientDuplexStream<SynthesizeStreamsRequest, SynthesizeStreamsResponse>;

/** What the mux needs of its backend client (stream-mux.ts's MuxHost). */
export type SynthesisMuxHost = MuxHost<SynthesisMuxCall>;

/**
 * A stream's first credit: 2 s of 16 kHz 16-bit audio (what a session asks for; ~1.3 s at
 * 24 kHz). A reply's first seconds arrive at once, the rest as the caller plays them.
 */
export const SYNTHESIS_WINDOW_BYTES = 64 * 1024;
/** Credit is granted again once the caller has taken this much audio since the last grant. */
export const SYNTHESIS_GRANT_BYTES = 16 * 1024;

type Event = NonNullable<MessageInitShape<typeof SynthesizeStreamsInputSchema>['event']>;

/** One stream on the call. */
class SynthesisStream extends MuxStream<SynthesizeStreamResponse> implements SynthesisSession {
  /** Audio taken by the caller since the last grant. */
  taken = 0;

  constructor(override readonly mux: SynthesisMux, id: number, release: () => void, signal: AbortSignal | undefined) {
    super(mux, id, release, signal);
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

  /** The caller took `m`: its audio is credit again once enough has gathered. */
  protected override took(m: SynthesizeStreamResponse): void {
    if (m.event.case !== 'chunk') return;
    this.taken += m.event.value.audio.length;
    if (this.taken >= SYNTHESIS_GRANT_BYTES && this.live()) {
      this.mux.grant(this.id, this.taken);
      this.taken = 0;
    }
  }
}

export class SynthesisMux extends StreamMux<SynthesisStream, SynthesizeStreamResponse, Event, SynthesizeStreamsRequest, SynthesizeInput> {
  /** Messages written on the calls so far, the inputs they carried, and the credit inputs among them. */
  override readonly sent = { messages: 0, inputs: 0, credits: 0 };

  constructor(host: SynthesisMuxHost) {
    super(
      host,
      new MessageBatch<Event, SynthesizeStreamsInput, SynthesizeStreamsRequest>(
        (id, event) => create(SynthesizeStreamsInputSchema, { stream: BigInt(id), event }),
        (inputs) => create(SynthesizeStreamsRequestSchema, { inputs }),
      ),
      'synthesis',
      true,
    );
  }

  /** Audio bytes received and not yet taken by their callers, over every open stream. */
  get buffered(): number {
    let n = 0;
    for (const s of this.openStreams()) for (const m of s.queue) if (m.event.case === 'chunk') n += m.event.value.audio.length;
    return n;
  }

  protected stream(id: number, release: () => void, signal: AbortSignal | undefined): SynthesisStream {
    return new SynthesisStream(this, id, release, signal);
  }

  /** The `open` input, with the stream's first credit. */
  protected openEvent(config: SynthesizeInput, o: CallOptions): Event {
    return {
      case: 'open',
      value: { config, requestId: o.requestId ?? '', teamId: o.teamId ?? '', traceparent: o.traceparent ?? '', credit: SYNTHESIS_WINDOW_BYTES },
    };
  }

  protected output(event: StreamOutput['event']): SynthesizeStreamResponse {
    return create(SynthesizeStreamResponseSchema, { event: event as SynthesizeStreamResponse['event'] });
  }

  protected cancelEvent(): Event {
    return { case: 'cancel', value: {} };
  }

  /** Grants stream `id` `bytes` more of audio. */
  grant(id: number, bytes: number): void {
    this.queue(id, { case: 'credit', value: bytes });
    this.sent.credits++;
  }
}
