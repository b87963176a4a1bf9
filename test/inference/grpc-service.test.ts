// The hand-written wire forms of audio frames (the most frequent messages) must be exactly what
// protobuf-es writes, so any backend decoding the contract sees the same bytes.
import t from 'tap';
import { create, toBinary } from '@bufbuild/protobuf';
import { AudioChunkSchema, AudioEncoding, TranscribeStreamRequestSchema } from '../../src/gen/inference/v1/inference_pb.ts';
import { inferenceServiceDefinition } from '../../src/inference/grpc-service.ts';

const serialize = inferenceServiceDefinition.transcribeStream!.requestSerialize as (m: unknown) => Buffer;
const sizes = [0, 1, 127, 128, 3200, 16383, 16384, 2 * 1024 * 1024];
/** Byte equality (tap's deep compare is slow on megabytes and tells a Buffer from a Uint8Array). */
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
const pcm = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + 3) & 0xff);

t.test('an audio frame through the serializer is byte for byte what toBinary writes', async (t) => {
  for (const n of sizes) {
    const msg = create(TranscribeStreamRequestSchema, { event: { case: 'audio', value: pcm(n) } });
    t.ok(same(serialize(msg), toBinary(TranscribeStreamRequestSchema, msg)), `${n} bytes`);
  }
});

t.test('a frame carrying unknown fields is left to toBinary, which keeps them', async (t) => {
  const msg = create(TranscribeStreamRequestSchema, { event: { case: 'audio', value: pcm(10) } });
  msg.$unknown = [{ no: 99, wireType: 0, data: new Uint8Array([5]) }];
  t.ok(same(serialize(msg), toBinary(TranscribeStreamRequestSchema, msg)));
});

t.test('other messages still go through toBinary', async (t) => {
  const msg = create(TranscribeStreamRequestSchema, { event: { case: 'config', value: { model: 'transcribe-1', language: 'en' } } });
  t.ok(same(serialize(msg), toBinary(TranscribeStreamRequestSchema, msg)));
});

const serializeChunk = inferenceServiceDefinition.synthesize!.responseSerialize as (m: unknown) => Buffer;

t.test('an audio chunk through the serializer is byte for byte what toBinary writes', async (t) => {
  for (const n of sizes) {
    const msg = create(AudioChunkSchema, {
      audio: pcm(n), sampleRateHz: 16000, encoding: AudioEncoding.PCM_S16LE, sequence: 7n, offsetSamples: 1600n, offsetMs: 100, durationMs: n / 32, final: n === 0,
      alignment: { segments: [{ text: 'hello', startMs: 0, endMs: 300 }], characters: [{ text: 'h', startMs: 0, endMs: 60 }], estimated: true },
    });
    const got = serializeChunk(msg);
    t.ok(same(got, toBinary(AudioChunkSchema, msg)), `${n} bytes`);
    t.equal(msg.audio.length, n, 'the message keeps its audio');
  }
  const bare = create(AudioChunkSchema, { audio: pcm(4800) });
  t.ok(same(serializeChunk(bare), toBinary(AudioChunkSchema, bare)), 'audio alone');
});

t.test('an audio chunk carrying unknown fields is left to toBinary, which keeps them', async (t) => {
  const msg = create(AudioChunkSchema, { audio: pcm(10), sequence: 1n });
  msg.$unknown = [{ no: 99, wireType: 0, data: new Uint8Array([5]) }];
  t.ok(same(serializeChunk(msg), toBinary(AudioChunkSchema, msg)));
});
