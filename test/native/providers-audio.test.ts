// The pieces between provider audio and the contract's chunks: the streaming resampler, the
// character aligner (provider timestamps or estimates), and the timeline's chunks.
import t from 'tap';
import { AudioEncoding } from '../../src/gen/inference/v1/inference_pb.ts';
import { StreamResampler } from '../../native/audio.ts';
import { SegmentAligner } from '../../native/providers/align.ts';
import { ProviderTimeline } from '../../native/providers/timeline.ts';
import { alignedChars } from '../../native/providers/tts-elevenlabs.ts';
import { PcmReader } from '../../native/providers/tts-openai.ts';
import { checkChunks } from '../contract/kit.ts';

const tone = (hz: number, rate: number, n: number) => Int16Array.from({ length: n }, (_, i) => Math.round(10000 * Math.sin((2 * Math.PI * hz * i) / rate)));

t.test('the resampler: pieces of any size concatenate into the exact length, the tone kept, what cannot be represented removed', async (t) => {
  for (const [from, to] of [[24000, 16000], [44100, 16000], [16000, 24000], [48000, 16000], [22050, 16000]] as const) {
    const x = tone(1000, from, from);
    const r = new StreamResampler(from, to);
    const parts: Int16Array[] = [];
    for (let i = 0; i < x.length; i += 777) parts.push(r.push(x.subarray(i, i + 777)));
    parts.push(r.flush());
    const y = Int16Array.from(parts.flatMap((p) => Array.from(p)));
    t.equal(y.length, Math.round((from * to) / from), `${from} → ${to}: the exact length`);
    let err = 0;
    for (let i = 100; i < y.length - 100; i++) err = Math.max(err, Math.abs(Math.round(10000 * Math.sin((2 * Math.PI * 1000 * i) / to)) - y[i]!));
    t.ok(err <= 10, `${from} → ${to}: the 1 kHz tone within ${err} of the ideal`);
  }
  const alias = new StreamResampler(24000, 16000).push(tone(11000, 24000, 24000));
  t.ok(alias.slice(100, -100).every((v) => Math.abs(v) < 50), '11 kHz (above the new Nyquist) does not fold back');
});

t.test('the resampler: the same samples whatever the pieces (1 sample at a time or all at once); a 6 kHz tone keeps its frequency and level at 24 → 16 kHz', async (t) => {
  const x = Int16Array.from({ length: 4800 }, (_, i) => Math.round(9000 * Math.sin((2 * Math.PI * 6000 * i) / 24000) + 3000 * Math.sin((2 * Math.PI * 440 * i) / 24000)));
  const run = (from: number, to: number, piece: number) => {
    const r = new StreamResampler(from, to);
    const parts: number[] = [];
    for (let i = 0; i < x.length; i += piece) parts.push(...r.push(x.subarray(i, i + piece)));
    parts.push(...r.flush());
    return parts;
  };
  for (const [from, to] of [[24000, 16000], [48000, 16000], [16000, 24000], [44100, 16000]] as const) {
    const whole = run(from, to, x.length);
    t.equal(whole.length, Math.round((x.length * to) / from), `${from} → ${to}: the exact length`);
    for (const piece of [1, 3, 160, 2401]) t.same(run(from, to, piece), whole, `${from} → ${to}: pieces of ${piece} give the same samples`);
  }
  // 6 kHz at 16 kHz: 8 samples every 3 periods. Its level: the correlation with the ideal tone.
  const y = run(24000, 16000, 2400);
  let dot = 0;
  let norm = 0;
  for (let i = 200; i < y.length - 200; i++) {
    const ideal = Math.sin((2 * Math.PI * 6000 * i) / 16000);
    dot += y[i]! * ideal;
    norm += ideal * ideal;
  }
  const level = dot / norm;
  t.ok(Math.abs(level - 9000) < 9000 * 0.05, `6 kHz kept at its level (${Math.round(level)} of 9000)`);
});

t.test('the aligner with provider timestamps: every character of the text once, in order, within the audio; characters the provider dropped share the gap', async (t) => {
  const a = new SegmentAligner('Hi, you there.', 1000, undefined);
  // The provider normalized: no comma, and an extra character it made up.
  a.feed([{ text: 'H', startMs: 0, endMs: 50 }, { text: 'i', startMs: 50, endMs: 100 }, { text: ' ', startMs: 100, endMs: 150 }, { text: 'y', startMs: 150, endMs: 200 }, { text: 'o', startMs: 200, endMs: 250 }, { text: 'u', startMs: 250, endMs: 300 }, { text: '~', startMs: 300, endMs: 310 }]);
  const first = a.take(1300, false);
  t.same(first.chars.map((c) => c.text).join(''), 'Hi, you', 'released up to the audio produced');
  t.same(first.words.map((w) => w.text), ['Hi,'], 'a word once the space after it is out');
  t.same(first.chars.slice(2, 4), [{ text: ',', startMs: 1100, endMs: 1125 }, { text: ' ', startMs: 1125, endMs: 1150 }], 'the comma and space the provider did not time share the gap before the next character');
  t.equal(first.chars.at(-1)!.endMs, 1300);
  const rest = a.take(1500, true);
  t.same(rest.chars.map((c) => c.text).join(''), ' there.', 'the rest at the end, untimed characters spread over the audio left');
  t.same(rest.words.map((w) => w.text), ['you', 'there.']);
  t.ok(rest.chars.every((c) => c.endMs <= 1500 && c.startMs >= 1300));
  t.notOk(a.estimated);
});

t.test('the aligner by estimate: released as the audio passes the estimate, fitted into the real audio at the end', async (t) => {
  const a = new SegmentAligner('one two three', 0, 10); // 10 characters a second: 100 ms each
  t.same(a.take(250, false).chars.map((c) => c.text), ['o', 'n']);
  const rest = a.take(2000, true);
  t.equal(rest.chars.length, 11);
  t.equal(rest.chars.at(-1)!.endMs, 2000, 'the estimate stretched to the audio that came');
  t.ok(a.estimated);
});

t.test('ElevenLabs timings count from each message (ElevenLabs) or from the start (Parley): both end up on one timeline', async (t) => {
  const relative = { audioMs: 0, lastStartMs: -1, relative: null as boolean | null };
  t.same(alignedChars(['a', 'b'], [0, 100], [100, 200], relative).map((c) => c.startMs), [0, 100]);
  relative.audioMs = 500;
  t.same(alignedChars(['c'], [0], [100], relative).map((c) => c.startMs), [500], 'a time going back: relative to the message');
  const absolute = { audioMs: 0, lastStartMs: -1, relative: null as boolean | null };
  alignedChars(['a', 'b'], [0, 100], [100, 200], absolute);
  absolute.audioMs = 500;
  t.same(alignedChars(['c'], [520], [600], absolute).map((c) => c.startMs), [520], 'times that go on: absolute');
});

t.test('the timeline: chunks of the asked rate and length, sequence and offsets over segments, estimated alignment marked', async (t) => {
  const tl = new ProviderTimeline({ sampleRateHz: 16000, encoding: AudioEncoding.PCM_S16LE, chunkMs: 100, volumeDb: 0, speed: 1 });
  const chunks = [];
  for (const text of ['Hello there. ', 'How are you?']) {
    const w = tl.segment(text, false);
    for (let i = 0; i < 10; i++) chunks.push(...w.push({ pcm: tone(440, 24000, 2400), sampleRateHz: 24000 }));
    chunks.push(...w.end(text.endsWith('?')));
  }
  checkChunks(chunks, 'Hello there. How are you?', 'timeline');
  t.equal(chunks[0]!.sampleRateHz, 16000);
  t.ok(Math.abs(chunks.reduce((n, c) => n + c.durationMs, 0) - 2000) < 1, '2 s of audio');
  t.ok(chunks.filter((c) => c.alignment!.characters.length).every((c) => c.alignment!.estimated), 'estimated alignment is marked');
});

t.test('PCM from provider bytes: pieces split at odd bytes, and pieces that are views into shared memory (pooled Buffers)', async (t) => {
  const samples = Int16Array.from({ length: 300 }, (_, i) => (i * 997) % 65536 - 32768);
  const bytes = Buffer.from(samples.buffer);
  // Small base64 decodes land in Node's shared pool, at an offset within it.
  const pooled = [Buffer.from('AAAA', 'base64'), Buffer.from(bytes.subarray(0, 201).toString('base64'), 'base64'), Buffer.from(bytes.subarray(201).toString('base64'), 'base64')];
  t.ok(pooled[1]!.byteOffset > 0 || pooled[2]!.byteOffset > 0, 'the pieces are views at an offset');
  const r = new PcmReader();
  const out = [...r.read(pooled[1]!), ...r.read(pooled[2]!)];
  t.same(out, Array.from(samples), 'every sample, the odd byte carried over');
});
