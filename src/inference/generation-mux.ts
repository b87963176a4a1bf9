/**
 * Many generations over one gRPC call (GenerateStreams, docs/inference.md "Many generations on
 * one call"), for a backend that lists it in Capabilities. Each stream is what a Generate call is
 * to its caller: the same text deltas, tool calls and finish, read as an async iterator, its own
 * cancellation, deadline and error. A conversation starts a generation every turn, so at a
 * thousand sessions a node started ~130 Generate calls a second, each with grpc-js's call setup
 * (its filter stack, a new HTTP/2 stream, its headers and its status) on the event loop; here a
 * turn's generation is an `open` input and its outputs come back with every other stream's
 * (D-SCALE-13).
 *
 * The call, the streams' bookkeeping and the batching are stream-mux.ts's, shared with
 * recognition and synthesis; this file has what is generation's own: a stream is opened with its
 * whole request and takes no input after it but its cancellation.
 */
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  GenerateResponseSchema,
  GenerateStreamsInputSchema,
  GenerateStreamsRequestSchema,
  type GenerateResponse,
  type GenerateStreamsInput,
  type GenerateStreamsRequest,
  type GenerateStreamsResponse,
} from '../gen/inference/v1/inference_pb.ts';
import { MessageBatch, MuxStream, StreamMux, type MuxHost, type StreamOutput } from './stream-mux.ts';
import type { CallOptions, GenerateInput } from './backend.ts';

/** A GenerateStreams call as grpc-js gives it. */
export type GenerationMuxCall = grpc.ClientDuplexStream<GenerateStreamsRequest, GenerateStreamsResponse>;

/** What the mux needs of its backend client (stream-mux.ts's MuxHost). */
export type GenerationMuxHost = MuxHost<GenerationMuxCall>;

type Event = NonNullable<MessageInitShape<typeof GenerateStreamsInputSchema>['event']>;

/** One generation on the call: its caller reads it as the events of a Generate call. */
export class GenerationStream extends MuxStream<GenerateResponse> {}

export class GenerationMux extends StreamMux<GenerationStream, GenerateResponse, Event, GenerateStreamsRequest, GenerateInput> {
  constructor(host: GenerationMuxHost) {
    // A failed generation keeps what it had sent, as a failed Generate call's reader gets the
    // messages that came before its status.
    super(
      host,
      new MessageBatch<Event, GenerateStreamsInput, GenerateStreamsRequest>(
        (id, event) => create(GenerateStreamsInputSchema, { stream: BigInt(id), event }),
        (inputs) => create(GenerateStreamsRequestSchema, { inputs }),
      ),
      'generation',
      false,
    );
  }

  protected stream(id: number, release: () => void, signal: AbortSignal | undefined): GenerationStream {
    return new GenerationStream(this, id, release, signal);
  }

  /** The `open` input: the whole request, with the metadata a Generate call would carry. */
  protected openEvent(request: GenerateInput, o: CallOptions): Event {
    return { case: 'open', value: { request, requestId: o.requestId ?? '', teamId: o.teamId ?? '', traceparent: o.traceparent ?? '' } };
  }

  protected output(event: StreamOutput['event']): GenerateResponse {
    return create(GenerateResponseSchema, { event: event as GenerateResponse['event'] });
  }

  protected cancelEvent(): Event {
    return { case: 'cancel', value: {} };
  }
}
