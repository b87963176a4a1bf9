// The resampler of the browser audio helpers (it runs in their AudioWorklet; here in Node):
// speech survives device rates → 16 kHz and back exactly as the recognizer reads it, the pass
// band keeps its level, the upper band does not fold into speech, chunking changes nothing.
import t from 'tap';
import { decodeAudio, encodeText } from '../../native/engines/synthetic/modem.ts';
import { floatToInt16, int16ToFloat, Resampler } from '../../src/client/resample.ts';

function run(r: Resampler, x: Float32Array, chunk: number): Float32Array {
  const parts: Float32Array[] = [];
  for (let i = 0; i < x.length; i += chunk) parts.push(r.process(x.subarray(i, i + chunk)));
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

const sine = (rate: number, hz: number, seconds: number, amp = 0.5) => Float32Array.from({ length: rate * seconds }, (_, i) => amp * Math.sin((2 * Math.PI * hz * i) / rate));
const peak = (x: Float32Array, from: number, to: number) => x.subarray(from, to).reduce((m, v) => Math.max(m, Math.abs(v)), 0);

t.test('synthetic speech at device rates, resampled to 16 kHz in render quanta, decodes exactly', async (t) => {
  const text = 'What is the capital of France?';
  for (const rate of [48_000, 44_100, 32_000, 22_050]) {
    const speech = int16ToFloat(encodeText(text, { sampleRateHz: rate }).pcm);
    const padded = new Float32Array(speech.length + rate / 5);
    padded.set(speech);
    const down = run(new Resampler(rate, 16_000), padded, 128); // 128: an AudioWorklet render quantum
    t.equal(decodeAudio(floatToInt16(down), 16_000)?.text, text, `${rate} Hz → 16 kHz`);
    const short = (padded.length * 16_000) / rate - down.length;
    t.ok(short >= 0 && short <= 9, `the output keeps the duration but for the filter's half-width, held for more input (${short.toFixed(1)} samples)`);
    const up = run(new Resampler(16_000, rate), down, 320); // the speaker's direction, 20 ms frames
    t.equal(decodeAudio(floatToInt16(up), rate)?.text, text, `and back to ${rate} Hz`);
  }
});

t.test('the pass band keeps its level; tones above 8 kHz do not fold into the 16 kHz output', async (t) => {
  const inBand = run(new Resampler(48_000, 16_000), sine(48_000, 1000, 1), 128);
  t.ok(Math.abs(peak(inBand, 1000, 15_000) - 0.5) < 0.01, `1 kHz keeps its amplitude (${peak(inBand, 1000, 15_000).toFixed(4)})`);
  const above = run(new Resampler(48_000, 16_000), sine(48_000, 12_000, 1), 128);
  t.ok(peak(above, 1000, 15_000) < 0.005, `12 kHz is filtered out rather than folded to 4 kHz (${peak(above, 1000, 15_000).toFixed(4)})`);
  const up = run(new Resampler(16_000, 44_100), sine(16_000, 1000, 1), 320);
  t.ok(Math.abs(peak(up, 3000, 40_000) - 0.5) < 0.01, 'upsampling keeps it too');
});

t.test('how the input is chunked changes nothing', async (t) => {
  const x = sine(44_100, 440, 0.5);
  const whole = run(new Resampler(44_100, 16_000), x, x.length);
  for (const chunk of [1, 7, 128, 1000]) t.same(run(new Resampler(44_100, 16_000), x, chunk), whole, `chunks of ${chunk}`);
});

t.test('rates must be positive', async (t) => {
  t.throws(() => new Resampler(0, 16_000), RangeError);
  t.throws(() => new Resampler(48_000, -1), RangeError);
});
