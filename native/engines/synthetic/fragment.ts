import { CONTROL, TONES_A, TONES_B, argmax, coefficients, toneFractions } from './tones.ts';
import type { CharAt } from './types.ts';
import { Utf8Chars } from './utf8.ts';

const BLOCK_MS = 1;
const SMOOTH_BLOCKS = 8;
const MIN_SEGMENT_MS = 15;
const MAX_SEGMENT_MS = 300;
/** Each tone of a symbol must hold this share of the window's energy, both together more. */
const MIN_TONE = 0.15;
const MIN_PAIR = 0.6;

/**
 * Decodes audio that holds data symbols but no preamble, such as one word's region cut out
 * of a burst. Symbols are found by the silent instants their fades leave between them.
 * Returns null unless every segment is a clean two-tone symbol.
 */
export function decodeFragment(x: Float32Array, sampleRateHz: number): CharAt[] | null {
  const block = Math.max(1, Math.round((sampleRateHz * BLOCK_MS) / 1000));
  const blocks = Math.floor(x.length / block);
  const raw = new Float64Array(blocks);
  for (let i = 0; i < blocks; i++) {
    let e = 0;
    for (let n = i * block; n < (i + 1) * block; n++) e += x[n] * x[n];
    raw[i] = e / block;
  }
  // Two tones beat (as slowly as every 6.7 ms): averaging over 8 ms flattens the beats but
  // keeps the dip where one symbol fades out and the next fades in.
  const env = new Float64Array(blocks);
  let peak = 0;
  for (let i = 0; i < blocks; i++) {
    let e = 0;
    let n = 0;
    for (let j = Math.max(0, i - SMOOTH_BLOCKS / 2); j < Math.min(blocks, i + SMOOTH_BLOCKS / 2); j++, n++) e += raw[j];
    env[i] = e / n;
    if (env[i] > peak) peak = env[i];
  }
  if (peak < 1e-6) return null;
  const loudLevels = [...env].filter((v) => v > peak * 0.1).sort((a, b) => a - b);
  const floor = 0.45 * loudLevels[Math.floor(loudLevels.length / 2)];
  // Segments are runs of loud blocks; the gaps are the fades between symbols.
  const segments: [number, number][] = [];
  let runStart = -1;
  for (let i = 0; i <= blocks; i++) {
    const loud = i < blocks && env[i] >= floor;
    if (loud && runStart < 0) runStart = i;
    if (!loud && runStart >= 0) {
      segments.push([runStart * block, i * block]);
      runStart = -1;
    }
  }
  const gaps = segments.slice(1).map(([from], i) => from - segments[i][1]).sort((a, b) => a - b);
  const half = gaps.length > 0 ? gaps[Math.floor(gaps.length / 2)] / 2 : 3 * block;
  const coeffs = coefficients([...TONES_A, ...TONES_B], sampleRateHz);
  const fr = new Float64Array(34);
  const utf8 = new Utf8Chars();
  const chars: CharAt[] = [];
  for (const [from, to] of segments) {
    const ms = ((to - from) / sampleRateHz) * 1000;
    // A blip shorter than any symbol is a beat crossing the threshold on a fade: skip it.
    if (ms < MIN_SEGMENT_MS) continue;
    if (ms > MAX_SEGMENT_MS) return null;
    const pad = Math.round((to - from) * 0.1);
    toneFractions(x, from + pad, to - from - 2 * pad, coeffs, fr);
    const a = argmax(fr, 0, 17);
    const b = argmax(fr, 17, 17);
    if (fr[a] < MIN_TONE || fr[17 + b] < MIN_TONE || fr[a] + fr[17 + b] < MIN_PAIR) return null;
    if (a === CONTROL && b === CONTROL) break;
    if (a === CONTROL || b === CONTROL) continue;
    utf8.push((a << 4) | b, Math.max(0, from - half), Math.min(x.length, to + half), chars);
  }
  utf8.flush(chars);
  return chars.length > 0 ? chars : null;
}
