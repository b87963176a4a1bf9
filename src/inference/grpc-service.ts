/**
 * The one adapter between the generated contract (src/gen, protobuf-es) and grpc-js:
 * service definitions for servers and typed clients, derived from the descriptors, with
 * protobuf-es binary serialization. Nothing else in the repository builds paths or
 * serializers by hand.
 */
import * as grpc from '@grpc/grpc-js';
import { fromBinary, ScalarType, toBinary, type DescMessage, type DescMethod, type MessageShape } from '@bufbuild/protobuf';
import { InferenceService } from '../gen/inference/v1/inference_pb.ts';

type Methods = (typeof InferenceService)['method'];
/** Request message of an RPC, by its local name (`synthesize`, `transcribeStream`, ...). */
export type In<K extends keyof Methods> = MessageShape<Methods[K]['input']>;
/** Response message of an RPC. */
export type Out<K extends keyof Methods> = MessageShape<Methods[K]['output']>;

function serializer<D extends DescMessage>(desc: D) {
  const frame = bytesFrameEncoder(desc) ?? leadingBytesEncoder(desc);
  return (msg: MessageShape<D>): Buffer => {
    // A message its caller encoded itself (TranscribeStreams batches: src/inference/recognition-mux.ts).
    if (Buffer.isBuffer(msg)) return msg;
    const fast = frame?.(msg);
    if (fast) return fast;
    const bytes = toBinary(desc, msg);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

/**
 * The audio frames of the streaming calls (`TranscribeStreamRequest.audio`: a message that is
 * one oneof, set to a `bytes` member) are by far the most frequent messages: for those, the
 * wire form (tag, length, bytes) is written directly, byte for byte what `toBinary` writes,
 * without its growing writer. Any other message, or one carrying unknown fields, gives null.
 */
function bytesFrameEncoder(desc: DescMessage): ((msg: unknown) => Buffer | null) | null {
  if (desc.oneofs.length !== 1 || desc.fields.some((f) => f.oneof !== desc.oneofs[0])) return null;
  const oneof = desc.oneofs[0].localName;
  const tags = new Map<string, number>();
  for (const f of desc.fields) if (f.fieldKind === 'scalar' && f.scalar === ScalarType.BYTES) tags.set(f.localName, (f.number << 3) | 2);
  if (tags.size === 0) return null;
  return (msg) => {
    const m = msg as Record<string, unknown> & { $unknown?: unknown[] };
    const sel = m[oneof] as { case?: string; value?: unknown } | undefined;
    const tag = sel?.case === undefined ? undefined : tags.get(sel.case);
    if (tag === undefined || !(sel!.value instanceof Uint8Array) || m.$unknown?.length) return null;
    const value = sel!.value;
    const head = varintLength(tag) + varintLength(value.length);
    const out = Buffer.allocUnsafe(head + value.length);
    let at = writeVarint(out, 0, tag);
    at = writeVarint(out, at, value.length);
    out.set(value, at);
    return out;
  };
}

/**
 * Messages whose first field is field 1, a plain `bytes` (`AudioChunk.audio`: every chunk a
 * synthesis writes): that field's wire form (tag, length, bytes) is written directly and the
 * rest of the message (small: offsets, alignment) by `toBinary` with the field left empty, into
 * one buffer. Byte for byte what `toBinary` writes (it writes fields in order and omits an empty
 * `bytes`), without copying the audio through its growing writer. Unknown fields: null.
 */
function leadingBytesEncoder(desc: DescMessage): ((msg: unknown) => Buffer | null) | null {
  const f = desc.fields[0];
  if (!f || f.number !== 1 || f.fieldKind !== 'scalar' || f.scalar !== ScalarType.BYTES || f.oneof) return null;
  if (desc.fields.some((g, i) => i > 0 && g.number <= 1)) return null;
  const name = f.localName;
  const EMPTY = new Uint8Array(0);
  return (msg) => {
    const m = msg as Record<string, unknown> & { $unknown?: unknown[] };
    const value = m[name];
    if (!(value instanceof Uint8Array) || value.length === 0 || m.$unknown?.length) return null;
    m[name] = EMPTY;
    let rest: Uint8Array;
    try {
      rest = toBinary(desc, msg as MessageShape<DescMessage>);
    } finally {
      m[name] = value;
    }
    const head = 1 + varintLength(value.length);
    const out = Buffer.allocUnsafe(head + value.length + rest.length);
    out[0] = 0x0a; // field 1, length-delimited
    const at = writeVarint(out, 1, value.length);
    out.set(value, at);
    out.set(rest, at + value.length);
    return out;
  };
}

/** Bytes of `v` as a protobuf varint. */
export function varintLength(v: number): number {
  let n = 1;
  while (v >= 0x80) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

/** Writes `v` as a protobuf varint at `at`; returns the offset after it. */
export function writeVarint(out: Buffer, at: number, v: number): number {
  while (v >= 0x80) {
    out[at++] = (v & 0x7f) | 0x80;
    v = Math.floor(v / 128);
  }
  out[at++] = v;
  return at;
}
function deserializer<D extends DescMessage>(desc: D) {
  return (buf: Buffer): MessageShape<D> => fromBinary(desc, buf);
}

function methodDefinition(method: DescMethod): grpc.MethodDefinition<unknown, unknown> {
  return {
    path: `/${method.parent.typeName}/${method.name}`,
    requestStream: method.methodKind === 'client_streaming' || method.methodKind === 'bidi_streaming',
    responseStream: method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming',
    requestSerialize: serializer(method.input) as (m: unknown) => Buffer,
    requestDeserialize: deserializer(method.input),
    responseSerialize: serializer(method.output) as (m: unknown) => Buffer,
    responseDeserialize: deserializer(method.output),
    originalName: method.name,
  };
}

/** grpc-js service definition of `inference.v1.InferenceService`, keyed by local method names. */
export const inferenceServiceDefinition: grpc.ServiceDefinition = Object.fromEntries(
  InferenceService.methods.map((m) => [m.localName, methodDefinition(m)]),
);

/** Full method paths, e.g. `paths.synthesize === '/inference.v1.InferenceService/Synthesize'`. */
export const paths = Object.fromEntries(
  InferenceService.methods.map((m) => [m.localName, `/${InferenceService.typeName}/${m.name}`]),
) as Record<keyof Methods, string>;

/** What a server implements (pass to `server.addService(inferenceServiceDefinition, impl)`). */
export interface InferenceServiceHandlers extends grpc.UntypedServiceImplementation {
  synthesize: grpc.handleServerStreamingCall<In<'synthesize'>, Out<'synthesize'>>;
  synthesizeStream: grpc.handleBidiStreamingCall<In<'synthesizeStream'>, Out<'synthesizeStream'>>;
  transcribe: grpc.handleClientStreamingCall<In<'transcribe'>, Out<'transcribe'>>;
  transcribeStream: grpc.handleBidiStreamingCall<In<'transcribeStream'>, Out<'transcribeStream'>>;
  generate: grpc.handleServerStreamingCall<In<'generate'>, Out<'generate'>>;
  capabilities: grpc.handleUnaryCall<In<'capabilities'>, Out<'capabilities'>>;
  health: grpc.handleUnaryCall<In<'health'>, Out<'health'>>;
  // Optional in the contract: a server given no handler for them answers UNIMPLEMENTED (grpc-js
  // does so for a method missing from the implementation object).
  designVoice: grpc.handleUnaryCall<In<'designVoice'>, Out<'designVoice'>>;
  saveVoice: grpc.handleUnaryCall<In<'saveVoice'>, Out<'saveVoice'>>;
  transcribeStreams: grpc.handleBidiStreamingCall<In<'transcribeStreams'>, Out<'transcribeStreams'>>;
  synthesizeStreams: grpc.handleBidiStreamingCall<In<'synthesizeStreams'>, Out<'synthesizeStreams'>>;
  generateStreams: grpc.handleBidiStreamingCall<In<'generateStreams'>, Out<'generateStreams'>>;
}

/** A raw grpc-js client of the service (one channel). The platform's client wraps it. */
export interface InferenceGrpcClient extends grpc.Client {
  synthesize(req: In<'synthesize'>, metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<Out<'synthesize'>>;
  synthesizeStream(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<In<'synthesizeStream'>, Out<'synthesizeStream'>>;
  transcribe(metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<Out<'transcribe'>>): grpc.ClientWritableStream<In<'transcribe'>>;
  transcribeStream(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<In<'transcribeStream'>, Out<'transcribeStream'>>;
  /** Takes messages or their wire form already encoded (a Buffer: see `serializer`). */
  transcribeStreams(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<In<'transcribeStreams'> | Buffer, Out<'transcribeStreams'>>;
  synthesizeStreams(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<In<'synthesizeStreams'>, Out<'synthesizeStreams'>>;
  generateStreams(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<In<'generateStreams'>, Out<'generateStreams'>>;
  generate(req: In<'generate'>, metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<Out<'generate'>>;
  capabilities(req: In<'capabilities'>, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<Out<'capabilities'>>): grpc.ClientUnaryCall;
  health(req: In<'health'>, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<Out<'health'>>): grpc.ClientUnaryCall;
  designVoice(req: In<'designVoice'>, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<Out<'designVoice'>>): grpc.ClientUnaryCall;
  saveVoice(req: In<'saveVoice'>, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<Out<'saveVoice'>>): grpc.ClientUnaryCall;
}

const ClientConstructor = grpc.makeGenericClientConstructor(inferenceServiceDefinition, 'InferenceService');

/** A raw client on its own channel. `address` is `host:port` (or any grpc-js target). */
export function createGrpcClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  options: grpc.ClientOptions = {},
): InferenceGrpcClient {
  return new ClientConstructor(address, credentials, options) as unknown as InferenceGrpcClient;
}
