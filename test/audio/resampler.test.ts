import t from 'tap';
import { createResampler, resampleAll } from '../../src/audio/index.ts';
import { dominantHz, rms, sine } from './signal.ts';

const pairs: [number, number][] = [
  [44100, 48000],
  [48000, 44100],
  [24000, 48000],
  [22050, 44100],
  [16000, 8000],
  [48000, 8000],
  [44100, 16000],
  [8000, 44100],
  [22050, 16000],
  [44056, 48000], // an odd upload rate: quantised phase table
];

t.test('resampling keeps a tone’s frequency, level and duration', async (t) => {
  for (const [from, to] of pairs) {
    const x = sine(1000, from, 1000);
    const r = createResampler(from, to);
    const parts = [r.push(x.subarray(0, 1234)), r.push(x.subarray(1234)), r.end()];
    const y = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      y.set(p, at);
      at += p.length;
    }
    t.equal(y.length, Math.ceil((x.length * to) / from), `${from}→${to} length`);
    t.equal(dominantHz(y, to), 1000, `${from}→${to} frequency`);
    const mid = (a: Int16Array) => a.subarray(a.length / 4, (3 * a.length) / 4);
    t.ok(Math.abs(rms(mid(y)) / rms(mid(x)) - 1) < 0.01, `${from}→${to} level within 1%`);
  }
});

t.test('output is time-aligned with the input (no filter delay)', async (t) => {
  // A click at 250 ms in must come out at 250 ms.
  const x = new Int16Array(16000);
  x[4000] = 30000;
  const r = createResampler(16000, 48000);
  const y = new Int16Array([...r.push(x), ...r.end()]);
  let peak = 0;
  for (let i = 1; i < y.length; i++) if (Math.abs(y[i]) > Math.abs(y[peak])) peak = i;
  t.equal(peak, 12000);
});

t.test('downsampling removes content above the new Nyquist', async (t) => {
  const x = sine(6000, 48000, 500); // above 4 kHz: must not alias into 2 kHz
  const r = createResampler(48000, 8000);
  const y = new Int16Array([...r.push(x), ...r.end()]);
  t.ok(rms(y.subarray(400, 3600)) < 12000 * 0.707 * 0.01, 'attenuated by more than 40 dB');
});

t.test('chunking does not change the output', async (t) => {
  const x = sine(440, 44100, 700);
  const once = createResampler(44100, 48000);
  const a = [...once.push(x), ...once.end()];
  const pieces = createResampler(44100, 48000);
  const b: number[] = [];
  for (let i = 0; i < x.length; ) {
    const n = 1 + ((i * 7919) % 997);
    b.push(...pieces.push(x.subarray(i, i + n)));
    i += n;
  }
  b.push(...pieces.end());
  t.same(b, a);
});

t.test('equal rates pass through; invalid rates throw', async (t) => {
  const r = createResampler(16000, 16000);
  const x = sine(1000, 16000, 10);
  t.same(Array.from(r.push(x)), Array.from(x));
  t.equal(r.end().length, 0);
  t.throws(() => createResampler(0, 16000));
  t.throws(() => createResampler(16000.5, 16000));
});

t.test('resampleAll converts a whole buffer', async (t) => {
  const y = resampleAll(sine(1000, 44100, 1000), 44100, 16000);
  t.equal(y.length, 16000);
  t.equal(dominantHz(y, 16000), 1000);
  const same = sine(1000, 16000, 10);
  t.equal(resampleAll(same, 16000, 16000), same);
});
