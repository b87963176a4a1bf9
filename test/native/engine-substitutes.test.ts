// The native backend's engine substitutes (`wrapSpeech`, `streamRecognizer`), and the light
// bench backend built on them (bench/light-backend.ts): its recognizer must send what the
// synthetic recognizer sends for the bench callers' phrase, or the bench measures another load.
import { create } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { memoizedSpeech, phraseRecognizer } from '../../bench/light-backend.ts';
import { createStreamRecognizer, type StreamEvent } from '../../native/engines/synthetic-engine.ts';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import type { SpeechEngine } from '../../native/engines/types.ts';
import { startBackend } from '../../native/server.ts';
import { AudioEncoding, SynthesizeRequestSchema, TranscribeStreamRequestSchema, type TranscribeStreamResponse } from '../../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient } from '../../src/inference/grpc-service.ts';
import { spawnNativeBackend } from '../../src/inference/index.ts';

const RATE = 16000;
const PHRASE = 'What time is it?';

/** The bench callers' audio: silence, the phrase, silence, in 100 ms frames (the last one padded). */
function callerFrames(): Int16Array[] {
  const speech = encodeText(PHRASE, { sampleRateHz: RATE }).pcm;
  const audio = new Int16Array(RATE + speech.length + RATE);
  audio.set(speech, RATE);
  const frames: Int16Array[] = [];
  for (let at = 0; at < audio.length; at += 1600) {
    const f = new Int16Array(1600);
    f.set(audio.subarray(at, at + 1600));
    frames.push(f);
  }
  return frames;
}

/** One TranscribeStream call over gRPC: the config, these audio pieces, the end; every response. */
async function transcribe(client: ReturnType<typeof createGrpcClient>, pieces: Uint8Array[]): Promise<TranscribeStreamResponse[]> {
  const call = client.transcribeStream() as unknown as grpc.ClientDuplexStream<unknown, TranscribeStreamResponse>;
  const responses: TranscribeStreamResponse[] = [];
  const ended = new Promise<void>((resolve, reject) => {
    call.on('data', (m: TranscribeStreamResponse) => responses.push(m));
    call.on('end', () => resolve());
    call.on('error', reject);
  });
  call.write(create(TranscribeStreamRequestSchema, { event: { case: 'config', value: { model: 'transcribe-1', language: 'en', input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: RATE } } } }));
  for (const value of pieces) call.write(create(TranscribeStreamRequestSchema, { event: { case: 'audio', value } }));
  call.end();
  await ended;
  return responses;
}

function run(r: { push(pcm: Int16Array): StreamEvent[]; flush(): StreamEvent[] }, frames: Int16Array[]): StreamEvent[] {
  return [...frames.flatMap((f) => r.push(f)), ...r.flush()];
}

t.test('light backend recognizer: the synthetic recognizer’s events for the bench phrase', async (t) => {
  const frames = callerFrames();
  const phraseMs = (encodeText(PHRASE, { sampleRateHz: RATE }).pcm.length / RATE) * 1000;
  const real = run(createStreamRecognizer(RATE), frames);
  const light = run(phraseRecognizer(RATE, PHRASE, phraseMs), frames);
  const shape = (evs: StreamEvent[]) => evs.map((e) => (e.type === 'partial' ? 'partial' : e.type === 'committed' ? `committed:${e.text}` : e.type));
  t.same(shape(light), shape(real), 'same events in the same order: speech_started, a partial per character, committed, speech_ended');
  const partials = (evs: StreamEvent[]) => evs.filter((e) => e.type === 'partial').map((e) => (e as { text: string }).text);
  t.same(partials(light), partials(real), 'the partials grow one character at a time');
  const at = (evs: StreamEvent[], type: 'speech_started' | 'speech_ended') => (evs.find((e) => e.type === type) as { atMs: number }).atMs;
  t.ok(Math.abs(at(light, 'speech_started') - at(real, 'speech_started')) < 5, 'speech starts where the synthetic recognizer says');
  t.ok(Math.abs(at(light, 'speech_ended') - at(real, 'speech_ended')) < 25, 'speech ends where the synthetic recognizer says');
  // Both say `speech_ended` at the same frame: the utterance gap runs from the same point.
  const frameOf = (evs: StreamEvent[][], type: string) => evs.findIndex((e) => e.some((x) => x.type === type));
  const perFrame = (r: { push(pcm: Int16Array): StreamEvent[] }) => frames.map((f) => r.push(f));
  t.equal(frameOf(perFrame(phraseRecognizer(RATE, PHRASE, phraseMs)), 'speech_ended'), frameOf(perFrame(createStreamRecognizer(RATE)), 'speech_ended'));
});

t.test('light backend speech: each distinct request synthesized once, the same piece after', async (t) => {
  let calls = 0;
  const inner = {
    name: 'counting', defaultSampleRateHz: RATE, languages: ['en'], voices: [], sampleRatesHz: [],
    health: () => ({ ok: true, detail: '' }),
    close: async () => {},
    synthesize: async (text: string) => {
      calls++;
      return { pcm: new Int16Array(text.length), sampleRateHz: RATE, words: [], chars: [] };
    },
  } satisfies SpeechEngine;
  const engine = memoizedSpeech(inner);
  const opts = { language: 'en', speed: 1, sampleRateHz: 0, voice: '' };
  const signal = new AbortController().signal;
  const a = await engine.synthesize('Hello.', opts, signal);
  const b = await engine.synthesize('Hello.', opts, signal);
  await engine.synthesize('Hello.', { ...opts, speed: 2 }, signal);
  t.equal(a, b, 'the same piece');
  t.equal(calls, 2, 'one synthesis per distinct text and options');
  const aborted = AbortSignal.abort();
  await t.rejects(engine.synthesize('Hello.', opts, aborted), 'an aborted request still fails');
});

t.test('startBackend: streamRecognizer replaces the realtime recognizer, wrapSpeech the speech engine', async (t) => {
  const texts: string[] = [];
  const backend = await startBackend({
    address: '127.0.0.1:0',
    engine: 'synthetic',
    streamRecognizer: () => ({
      push: (pcm) => [{ type: 'partial', text: `heard ${pcm.length} samples` }],
      flush: () => [{ type: 'committed', text: 'done', words: [] }],
    }),
    wrapSpeech: (e) => ({ ...e, synthesize: (text, o, s) => { texts.push(text); return e.synthesize(text, o, s); } }),
  });
  const client = createGrpcClient(backend.address);
  t.teardown(async () => {
    client.close();
    await backend.close();
  });
  const events = (await transcribe(client, [new Uint8Array(640)])).map((m) => `${m.event.case}:${m.event.case === 'partial' ? m.event.value : m.event.case === 'committed' ? m.event.value.text : ''}`);
  t.same(events, ['partial:heard 320 samples', 'committed:done']);

  const chunks: number[] = [];
  await new Promise<void>((resolve, reject) => {
    const s = client.synthesize(create(SynthesizeRequestSchema, { model: 's2.1-pro', text: 'Hello there.' })) as unknown as grpc.ClientReadableStream<unknown>;
    s.on('data', () => chunks.push(1));
    s.on('end', () => resolve());
    s.on('error', reject);
  });
  t.ok(chunks.length > 0, 'audio came back');
  t.same(texts, ['Hello there.'], 'the speech engine was reached through the wrapper');
});

t.test('spawnNativeBackend({ entry }): runs the light backend as the supervised child, which recognizes by sound', async (t) => {
  const phraseMs = (encodeText(PHRASE, { sampleRateHz: RATE }).pcm.length / RATE) * 1000;
  const backend = await spawnNativeBackend({
    entry: fileURLToPath(new URL('../../bench/light-backend.ts', import.meta.url)),
    env: { BENCH_PHRASE: PHRASE, BENCH_PHRASE_MS: String(phraseMs), LOG_LEVEL: 'warn' },
    restart: false,
    stderr: 'ignore',
  });
  const client = createGrpcClient(backend.address);
  t.teardown(async () => {
    client.close();
    await backend.stop();
  });
  // Any sound is the phrase to this recognizer: a tone that the synthetic decoder would not read.
  const tone = new Int16Array(RATE / 2).map((_, i) => Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / RATE)));
  const responses = await transcribe(client, [new Uint8Array(tone.buffer), new Uint8Array(RATE)]);
  const committed = responses.flatMap((m) => (m.event.case === 'committed' ? [m.event.value.text] : []));
  t.same(committed, [PHRASE], 'the light recognizer answered, not the synthetic one');
});
