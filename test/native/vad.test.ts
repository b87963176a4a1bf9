// The speech detector in front of transcription providers (native/providers/vad.ts): Silero VAD
// on real speech. espeak-ng speaks three phrases with known silences between them; the truth of
// each phrase is where its clean signal is above 2 % of its peak. Detected starts and ends must
// be within 100 ms of the truth, with white noise at -40 dBFS (RMS) under everything, and no
// speech may be detected in noise alone at -40 and -30 dBFS. Synthetic speech (tones, which
// Silero does not take for speech) is heard by the synthetic engine's burst detector beside it.
import t from 'tap';

type Tap = Pick<typeof t, "equal" | "ok" | "same">;
import { createEspeakEngine } from '../../native/engines/espeak.ts';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { SpeechDetector, type DetectorEvent } from '../../native/providers/vad.ts';

const RATE = 16_000;
const TOLERANCE_MS = 100;
const PHRASES = ['Hello, I would like to book a table for two.', 'What is the weather in Paris tomorrow?', 'Thank you very much.'];
const GAPS_MS = [700, 1200, 900, 1500];

/** A deterministic Gaussian noise generator (xorshift + Box-Muller). */
function noise(seed: number) {
  let s = seed >>> 0 || 1;
  const u = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return ((s >>> 0) + 1) / 4294967297;
  };
  return () => Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
}

function addNoise(pcm: Int16Array, dbfs: number, seed: number): Int16Array {
  const amp = 32768 * Math.pow(10, dbfs / 20);
  const g = noise(seed);
  return pcm.map((v) => Math.max(-32768, Math.min(32767, Math.round(v + amp * g()))));
}

async function detect(detector: SpeechDetector, pcm: Int16Array, rateHz = RATE): Promise<DetectorEvent[]> {
  const events: DetectorEvent[] = [];
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));
  const s = detector.open(rateHz, (e) => {
    if (e.type === 'mark') done();
    else events.push(e);
  });
  const frame = Math.round(rateHz / 50);
  for (let i = 0; i < pcm.length; i += frame) s.push(pcm.subarray(i, i + frame));
  s.mark(1);
  await finished;
  s.close();
  return events;
}

const detector = new SpeechDetector();
await detector.warm();
t.teardown(() => detector.close());

// The recording: silence, phrase, silence, … with the truth of each phrase.
const espeak = createEspeakEngine({ workers: 1 });
const pieces: Int16Array[] = [];
const truth: [number, number][] = [];
let at = 0;
const silence = (ms: number) => {
  const n = Math.round((ms * RATE) / 1000);
  pieces.push(new Int16Array(n));
  at += n;
};
silence(GAPS_MS[0]!);
for (const [i, text] of PHRASES.entries()) {
  const { pcm } = await espeak.synthesize(text, { language: 'en', speed: 1, sampleRateHz: RATE, voice: '' }, new AbortController().signal);
  const peak = pcm.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  let a = 0;
  while (Math.abs(pcm[a]!) < peak * 0.02) a++;
  let b = pcm.length - 1;
  while (Math.abs(pcm[b]!) < peak * 0.02) b--;
  truth.push([((at + a) / RATE) * 1000, ((at + b + 1) / RATE) * 1000]);
  pieces.push(pcm);
  at += pcm.length;
  silence(GAPS_MS[i + 1]!);
}
await espeak.close();
const recording = new Int16Array(at);
pieces.reduce((o, p) => (recording.set(p, o), o + p.length), 0);

function checkAgainstTruth(t: Tap, events: DetectorEvent[], what: string) {
  const starts = events.filter((e) => e.type === 'start').map((e) => (e as { atMs: number }).atMs);
  const ends = events.filter((e) => e.type === 'end').map((e) => (e as { atMs: number }).atMs);
  t.equal(starts.length, PHRASES.length, `${what}: one start per phrase (${starts.map(Math.round)})`);
  t.equal(ends.length, PHRASES.length, `${what}: one end per phrase (${ends.map(Math.round)})`);
  truth.forEach(([s, e], i) => {
    t.ok(Math.abs(starts[i]! - s) <= TOLERANCE_MS, `${what}: phrase ${i + 1} starts at ${Math.round(starts[i]!)} ms, truth ${Math.round(s)} ms`);
    t.ok(Math.abs(ends[i]! - e) <= TOLERANCE_MS, `${what}: phrase ${i + 1} ends at ${Math.round(ends[i]!)} ms, truth ${Math.round(e)} ms`);
  });
  t.same(events.map((e) => e.type), PHRASES.flatMap(() => ['start', 'end']), `${what}: starts and ends alternate`);
}

t.test('espeak speech with known silences: starts and ends within 100 ms of the truth', async (t) => {
  checkAgainstTruth(t, await detect(detector, recording), 'clean');
});

t.test('the same with white noise at -40 dBFS under it', async (t) => {
  checkAgainstTruth(t, await detect(detector, addNoise(recording, -40, 7)), '-40 dBFS noise');
});

t.test('at another input rate (24 kHz, resampled to the model\'s 16 kHz)', async (t) => {
  const up = new Int16Array(Math.round((recording.length * 24_000) / RATE));
  for (let i = 0; i < up.length; i++) up[i] = recording[Math.min(recording.length - 1, Math.round((i * RATE) / 24_000))]!;
  checkAgainstTruth(t, await detect(detector, up, 24_000), '24 kHz');
});

t.test('no speech in noise alone', async (t) => {
  for (const dbfs of [-40, -30]) {
    const events = await detect(detector, addNoise(new Int16Array(RATE * 6), dbfs, 11));
    t.same(events, [], `6 s of white noise at ${dbfs} dBFS: nothing`);
  }
});

t.test('synthetic speech, which Silero does not hear, is heard through the synthetic burst detector', async (t) => {
  const speech = encodeText('What is the weather in Paris?', { sampleRateHz: RATE }).pcm;
  const pcm = new Int16Array(RATE + speech.length + RATE);
  pcm.set(speech, RATE);
  const events = await detect(detector, pcm);
  t.equal(events.length, 2);
  t.ok(events[0]!.type === 'start' && Math.abs(events[0]!.atMs - 1000) <= TOLERANCE_MS, 'start');
  t.ok(events[1]!.type === 'end' && Math.abs(events[1]!.atMs - (1000 + (speech.length / RATE) * 1000)) <= TOLERANCE_MS, 'end');
});

t.test('many streams at once keep their own state (frames are judged in batches)', async (t) => {
  const all = await Promise.all([0, 1, 2, 3].map((k) => detect(detector, k % 2 ? recording : addNoise(new Int16Array(RATE * 3), -40, k))));
  t.equal(all[1]!.length, 6);
  t.equal(all[3]!.length, 6);
  t.same(all[0], []);
  t.same(all[2], []);
});
