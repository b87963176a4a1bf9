/** Signal helpers for the audio tests (generation and analysis, not fakes). */

export function sine(hz: number, sampleRateHz: number, ms: number, amplitude = 12000): Int16Array {
  const n = Math.round((sampleRateHz * ms) / 1000);
  const x = new Int16Array(n);
  for (let i = 0; i < n; i++) x[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / sampleRateHz));
  return x;
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Power of `hz` in `x` (Goertzel). */
export function powerAt(x: ArrayLike<number>, hz: number, sampleRateHz: number): number {
  const w = (2 * Math.PI * hz) / sampleRateHz;
  const k = 2 * Math.cos(w);
  let s1 = 0;
  let s2 = 0;
  for (let i = 0; i < x.length; i++) {
    const s0 = x[i] + k * s1 - s2;
    s2 = s1;
    s1 = s0;
  }
  return s1 * s1 + s2 * s2 - k * s1 * s2;
}

/** The strongest frequency (10 Hz grid, 50 Hz to Nyquist or 8 kHz) of the middle 200 ms. */
export function dominantHz(x: ArrayLike<number> & { subarray?: unknown }, sampleRateHz: number): number {
  const len = Math.round(sampleRateHz * 0.2);
  const start = Math.max(0, Math.floor((x.length - len) / 2));
  const seg = Array.from({ length: Math.min(len, x.length) }, (_, i) => x[start + i]);
  let best = 0;
  let bestP = -1;
  const top = Math.min(sampleRateHz / 2 - 10, 8000);
  for (let f = 50; f <= top; f += 10) {
    const p = powerAt(seg, f, sampleRateHz);
    if (p > bestP) {
      bestP = p;
      best = f;
    }
  }
  return best;
}

/** Root-mean-square of a middle segment (for level checks). */
export function rms(x: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < x.length; i++) s += x[i] * x[i];
  return Math.sqrt(s / Math.max(1, x.length));
}
