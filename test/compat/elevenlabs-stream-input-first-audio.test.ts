// SPEC-speech.md, family C realtime synthesis frames: "With alignment on, the first audio of a
// turn arrives only after its first text chunk is fully synthesized." Driven on one speech
// context (the turn of a stream-input socket, or one context of multi-stream-input) with a
// backend stand-in whose audio chunks the test releases one at a time, so what the client has
// been sent is read at each step, without timing.
import { create } from '@bufbuild/protobuf';
import t from 'tap';
import { createEncoder } from '../../src/audio/index.ts';
import { SpeechContext } from '../../src/compat/elevenlabs/ws-speech-context.ts';
import { AlignmentSchema, AudioChunkSchema, AudioEncoding, SegmentSchema } from '../../src/gen/inference/v1/inference_pb.ts';
import { join, type Prepared, type TtsService } from '../../src/speech/tts.ts';

const CHUNK_SAMPLES = 1600; // 100 ms at 16 kHz

/** Synthesis of each text in three 100 ms chunks, each released by the test. */
function gatedSynthesis() {
  let release: (() => void) | null = null;
  let waiting: (() => void) | null = null;
  const texts: string[] = [];
  const tts = {
    stats: { active: 0, chunksReceived: 0, audioBytesReceived: 0, done: 0, cancelled: 0, failed: 0 },
    deps: { log: { error() {} } },
    encoderFor: () => createEncoder({ format: 'pcm', sampleRateHz: 16000, inputSampleRateHz: 16000 }),
    async *encoded(p: Prepared, _caller: unknown, _signal: AbortSignal, state: { encoder?: Awaited<ReturnType<typeof createEncoder>> }) {
      const text = p.req.body.text as string;
      texts.push(text);
      for (let k = 0; k < 3; k++) {
        await new Promise<void>((r) => {
          release = r;
          const w = waiting;
          waiting = null;
          w?.();
        });
        state.encoder ??= await createEncoder({ format: 'pcm', sampleRateHz: 16000, inputSampleRateHz: 16000 });
        const pcm = new Int16Array(CHUNK_SAMPLES).fill(1000 + k);
        const alignment = k === 0 ? create(AlignmentSchema, { segments: [create(SegmentSchema, { text: text.trim(), startMs: 0, endMs: 300 })] }) : undefined;
        const chunk = create(AudioChunkSchema, { audio: new Uint8Array(pcm.buffer), sampleRateHz: 16000, encoding: AudioEncoding.PCM_S16LE, sequence: BigInt(k), offsetMs: k * 100, durationMs: 100, alignment });
        yield { chunk, bytes: join(state.encoder.push(pcm)) };
      }
      await new Promise<void>((r) => {
        // Parked after the last chunk was delivered, until the test ends the synthesis.
        release = r;
        const w = waiting;
        waiting = null;
        w?.();
      });
    },
  };
  return {
    tts: tts as unknown as TtsService,
    texts,
    /** Resolves once the synthesis waits for the test to release its next chunk (everything before it was delivered). */
    parked: () => new Promise<void>((r) => (release ? r() : (waiting = r))),
    /** Lets the next chunk come, then waits until it was delivered and the synthesis is parked again. */
    next: async () => {
      const r = release!;
      release = null;
      await new Promise<void>((parked) => {
        waiting = parked;
        r();
      });
    },
    /** Ends the synthesis (parked after its last chunk). */
    end: () => {
      const r = release!;
      release = null;
      r();
    },
  };
}

async function until(what: string, pred: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !pred(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!pred()) throw new Error(`never happened: ${what}`);
}

function context(sync: boolean) {
  const g = gatedSynthesis();
  const sent: Record<string, unknown>[] = [];
  const prepared = {
    req: { model: 's2.1-pro', format: 'pcm', sampleRateHz: 16000, characters: 0, body: { text: '' } },
    input: { text: '' },
    span: { end() {}, child: () => ({ traceparent: undefined, span: { end() {} } }) },
  } as unknown as Prepared;
  const ctx = new SpeechContext({
    tts: g.tts,
    prepared,
    caller: { teamId: 'team', requestId: 'req', signal: new AbortController().signal },
    syncAlignment: sync,
    schedule: [120],
    send: (f) => {
      sent.push(f);
      return undefined;
    },
    onError: (err) => { throw err; },
  });
  return { g, ctx, sent, audio: () => sent.filter((f) => typeof f.audio === 'string') };
}

t.test('with alignment on, the first audio of a turn arrives only after its first text chunk is fully synthesized', async (t) => {
  const { g, ctx, sent, audio } = context(true);
  ctx.append('Hello there, friend. ');
  ctx.flush();
  await g.parked();
  await g.next();
  t.equal(sent.length, 0, 'after the first of three chunks: nothing sent');
  await g.next();
  t.equal(sent.length, 0, 'after the second: still nothing');
  await g.next();
  t.equal(sent.length, 0, 'after the third: still nothing while the synthesis has not ended');
  g.end();
  await until('the first frames', () => audio().length === 3);
  t.equal(audio().length, 3, 'the whole first chunk is synthesized: its three audio frames go out');
  t.same(audio().map((f) => Buffer.from(f.audio as string, 'base64').readInt16LE(0)), [1000, 1001, 1002], 'in order');
  t.ok(audio()[0]!.alignment, 'with their alignment');

  // The turn's later text chunks stream as they are synthesized.
  ctx.append('How are you today? ');
  ctx.flush();
  await g.parked();
  await g.next();
  t.equal(audio().length, 4, 'a later chunk\'s first audio is sent before its synthesis ends');
  const finished = ctx.finish();
  await g.next();
  await g.next();
  g.end();
  t.equal(await finished, true);
  t.equal(audio().length, 6);
  t.same(g.texts, ['Hello there, friend. ', 'How are you today? ']);
});

t.test('without alignment, the first audio is sent as soon as its chunk is synthesized', async (t) => {
  const { g, ctx, audio } = context(false);
  ctx.append('Hello there, friend. ');
  ctx.flush();
  await g.parked();
  await g.next();
  t.equal(audio().length, 1, 'after the first of three chunks: its audio is out');
  t.notOk('alignment' in audio()[0]!, 'audio only');
  const finished = ctx.finish();
  await g.next();
  await g.next();
  g.end();
  t.equal(await finished, true);
  t.equal(audio().length, 3);
});
