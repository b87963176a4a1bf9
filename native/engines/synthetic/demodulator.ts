import {
  CONTROL,
  MAX_SYMBOL_MS,
  MIN_SYMBOL_MS,
  PREAMBLE,
  SYNC_SYMBOL_MS,
  SYNC_SYMBOLS,
  TONES_A,
  TONES_B,
  argmax,
  coefficients,
  toneFractions,
} from './tones.ts';
import type { CharAt } from './types.ts';
import { Utf8Chars } from './utf8.ts';

/** Low-level demodulator output; positions are absolute sample indices of the input. */
export type DemodEvent =
  | { type: 'burst_start'; pos: number }
  | { type: 'char'; char: CharAt }
  | { type: 'burst_end'; pos: number };

const HOPS_PER_SYMBOL = 4;
const PATTERN_HOPS = PREAMBLE.length * HOPS_PER_SYMBOL;
/** Preamble correlation (max 16) a hop must reach to be a candidate start. */
const COARSE_THRESHOLD = 9;
/** Fine alignment score (max 4) the preamble must reach. */
const FINE_THRESHOLD = 2.4;
/** A hop whose preamble feature is this strong may be the start of a preamble. */
const ACTIVE_FEATURE = 0.4;
/** Below this share of a window's energy in its two strongest tones, there is no symbol. */
const MIN_PURITY = 0.3;
/** Part of each data symbol measured: its middle 70%, away from fades and codec smear. */
const GUARD = 0.15;
const RING = 64;
/**
 * Inside a burst the tones never stop, so a run of at least `GAP_MIN_MS` quieter than `SILENT`
 * there is silence an audio path inserted (a capture device that ran late fills 10 ms with
 * zeros; a browser's fake microphone under load did). It is skipped: the symbol it splits is
 * read from its longer part, and the symbols after it are looked for that much later. Before,
 * each such gap moved every later window towards the previous symbol, and two or three of them
 * in an utterance lost its end. A run of `GAP_MAX_MS` or more is the burst ending (cut short).
 * Not handled: a gap of 20 ms or more inside the preamble, which misleads its alignment.
 */
const SILENT = 1e-3;
const GAP_MIN_MS = 2;
const GAP_MAX_MS = 100;
/** `readAround`'s answer when the samples it needs have not all arrived. */
const MORE = -3;

/**
 * Finds bursts (preamble → header → data → terminator) in a sample stream and decodes them.
 *
 * Work is O(samples): while searching, four Goertzel filters run over 10 ms hops (none at
 * all over silence); a candidate preamble is aligned once, down to the sample; then
 * each data symbol costs 34 Goertzel filters over its middle 70%.
 */
export class Demodulator {
  private readonly hopLen: number;
  private readonly sync: number;
  private readonly cCtl: Float64Array;
  private readonly cAll: Float64Array;
  private readonly fr4 = new Float64Array(4);
  private readonly frAll = new Float64Array(34);
  private buf = new Float32Array(4096);
  private base = 0;
  private len = 0;

  private state: 'search' | 'header' | 'data' = 'search';
  private origin = 0;
  private hopCount = 0;
  private readonly feat = new Float64Array(RING);
  private readonly score = new Float64Array(RING);
  /** End of the last hop that looked like part of a preamble. */
  lastActivePos = -Infinity;

  private t0 = 0;
  private step = 0;
  private dataStart = 0;
  private k = 0;
  private utf8 = new Utf8Chars();
  private chars: CharAt[] = [];
  /** The gap the last `readAround` read past (samples; 0 when none). */
  private skipped = 0;
  /** The first sample after the run the last `gapIn` found. */
  private gapEnd = 0;
  /** `GAP_MIN_MS` and `GAP_MAX_MS` in samples. */
  private readonly gapMin: number;
  private readonly gapMax: number;

  constructor(readonly sampleRateHz: number) {
    this.hopLen = Math.max(1, Math.floor((sampleRateHz * SYNC_SYMBOL_MS) / 1000 / HOPS_PER_SYMBOL));
    this.sync = (sampleRateHz * SYNC_SYMBOL_MS) / 1000;
    this.gapMin = Math.max(1, Math.round((sampleRateHz * GAP_MIN_MS) / 1000));
    this.gapMax = Math.round((sampleRateHz * GAP_MAX_MS) / 1000);
    this.cCtl = coefficients([TONES_A[CONTROL], TONES_B[0], TONES_A[0], TONES_B[CONTROL]], sampleRateHz);
    this.cAll = coefficients([...TONES_A, ...TONES_B], sampleRateHz);
  }

  /** True while no burst is being decoded or verified. */
  get idle(): boolean {
    return this.state === 'search';
  }

  /** Samples examined so far by the preamble search. */
  get scannedTo(): number {
    return this.origin + this.hopCount * this.hopLen;
  }

  /** Appends samples (Int16 are scaled to ±1) and decodes as far as they allow. */
  feed(x: Int16Array | Float32Array, out: DemodEvent[]): void {
    this.append(x);
    this.run(out);
  }

  /** End of input: decodes what is complete and ends an unfinished burst where audio stops. */
  finish(out: DemodEvent[]): void {
    this.run(out);
    if (this.state === 'data') this.endBurst(this.dataStart + this.k * this.step, out);
    this.state = 'search';
  }

  private append(x: Int16Array | Float32Array): void {
    if (this.len + x.length > this.buf.length) {
      const next = new Float32Array(Math.max(this.buf.length * 2, this.len + x.length));
      next.set(this.buf.subarray(0, this.len));
      this.buf = next;
    }
    const b = this.buf;
    const at = this.len;
    if (x instanceof Int16Array) for (let i = 0; i < x.length; i++) b[at + i] = x[i] / 32768;
    else b.set(x, at);
    this.len += x.length;
  }

  private run(out: DemodEvent[]): void {
    for (;;) {
      const end = this.base + this.len;
      if (this.state === 'search') {
        const hs = this.scannedTo;
        if (hs + this.hopLen > end) break;
        this.searchHop(hs);
      } else if (this.state === 'header') {
        if (Math.ceil(this.t0 + SYNC_SYMBOLS * this.sync) > end || !this.readHeader(end, out)) break;
      } else if (!this.readSymbol(end, out)) break;
    }
    this.compact();
  }

  private searchHop(hs: number): void {
    toneFractions(this.buf, hs - this.base, this.hopLen, this.cCtl, this.fr4);
    const f = this.fr4[0] + this.fr4[1] - this.fr4[2] - this.fr4[3];
    if (Math.abs(f) >= ACTIVE_FEATURE) this.lastActivePos = hs + this.hopLen;
    const h = this.hopCount++;
    this.feat[h % RING] = f;
    if (h < PATTERN_HOPS - 1) return;
    const first = h - PATTERN_HOPS + 1;
    let s = 0;
    for (let i = 0; i < PATTERN_HOPS; i++) {
      const sign = Math.floor(i / HOPS_PER_SYMBOL) % 2 === 0 ? 1 : -1;
      s += sign * this.feat[(first + i) % RING];
    }
    this.score[first % RING] = s;
    // Decide on hop j once the scores of both neighbours are known.
    const j = first - 1;
    if (j < 0) return;
    const sj = this.score[j % RING];
    if (sj < COARSE_THRESHOLD || sj < this.score[(j + 1) % RING]) return;
    if (j > 0 && sj < this.score[(j - 1) % RING]) return;
    const t0 = this.align(this.origin + j * this.hopLen);
    if (t0 === null) return;
    this.t0 = t0;
    this.state = 'header';
  }

  /** Best preamble start within one hop of `coarse`, or null if it is not a preamble. */
  private align(coarse: number): number | null {
    const lo = Math.max(this.base, coarse - this.hopLen);
    const hi = coarse + this.hopLen;
    const coarseStep = Math.max(1, Math.round(this.hopLen / 5));
    let best = lo;
    let bestScore = -Infinity;
    for (let s = lo; s <= hi; s += coarseStep) {
      const v = this.preambleScore(s);
      if (v > bestScore) [best, bestScore] = [s, v];
    }
    // Then to a quarter millisecond, then to the sample.
    for (const [radius, step] of [
      [coarseStep, Math.max(1, Math.round(this.sampleRateHz / 4000))],
      [Math.max(1, Math.round(this.sampleRateHz / 4000)), 1],
    ]) {
      const center = best;
      if (radius <= step && step > 1) continue;
      for (let s = Math.max(lo, center - radius); s <= Math.min(hi, center + radius); s += step) {
        const v = this.preambleScore(s);
        if (v > bestScore) [best, bestScore] = [s, v];
      }
    }
    return bestScore >= FINE_THRESHOLD ? best : null;
  }

  private preambleScore(s: number): number {
    const wl = Math.round(this.sync);
    let sum = 0;
    for (let i = 0; i < PREAMBLE.length; i++) {
      toneFractions(this.buf, Math.round(s + i * this.sync) - this.base, wl, this.cCtl, this.fr4);
      const v = this.fr4[0] + this.fr4[1] - this.fr4[2] - this.fr4[3];
      sum += i % 2 === 0 ? v : -v;
    }
    return sum;
  }

  /**
   * Reads the header after the preamble; false when more input is needed. A gap (`gapIn`) in
   * the preamble or the header moves what follows it, as in the data.
   */
  private readHeader(end: number, out: DemodEvent[]): boolean {
    let at = this.t0 + PREAMBLE.length * this.sync;
    const inPreamble = this.gapIn(Math.max(this.base, Math.ceil(this.t0)), Math.floor(at - GUARD * this.sync), end);
    if (inPreamble === MORE) return false;
    if (inPreamble >= 0) at += this.gapEnd - inPreamble;
    const h1 = this.readAround(at, this.sync, end);
    if (h1 === MORE) return false;
    at += this.skipped + this.sync;
    const h2 = this.readAround(at, this.sync, end);
    if (h2 === MORE) return false;
    at += this.skipped + this.sync;
    if (h1 < 0 || h2 < 0 || h1 + h2 !== 255 || h1 < MIN_SYMBOL_MS || h1 > MAX_SYMBOL_MS) {
      this.state = 'search';
      return true;
    }
    this.step = (h1 * this.sampleRateHz) / 1000;
    this.dataStart = at;
    this.k = 0;
    this.utf8 = new Utf8Chars();
    this.chars = [];
    this.state = 'data';
    out.push({ type: 'burst_start', pos: this.t0 });
    return true;
  }

  /** Decodes data symbol k if its samples are here; false when more input is needed. */
  private readSymbol(end: number, out: DemodEvent[]): boolean {
    const v = this.readAround(this.dataStart + this.k * this.step, this.step, end);
    if (v === MORE) return false;
    this.dataStart += this.skipped;
    const st = this.dataStart + this.k * this.step;
    if (v === -1) {
      this.endBurst(st, out);
    } else if (v === -2) {
      this.endBurst(st + this.step, out);
    } else {
      this.utf8.push(v, st, st + this.step, this.chars);
      this.emitChars(out);
      this.k++;
    }
    return true;
  }

  /**
   * The symbol of length `len` at `st` (as `symbolAt`), read around a gap, whose length (by
   * which every later symbol moves) it leaves in `skipped`; `MORE` when more input is needed.
   * No allocation: it runs for every symbol of every stream.
   */
  private readAround(st: number, len: number, end: number): number {
    this.skipped = 0;
    const stop = Math.ceil(st + (1 - GUARD) * len);
    if (stop > end) return MORE;
    const g0 = this.gapIn(Math.max(this.base, Math.floor(st - GUARD * len)), stop, end);
    if (g0 === MORE) return MORE; // a quiet run still going: inserted or the end, not known yet
    if (g0 < 0) return this.symbolAt(st, len);
    const g1 = this.gapEnd;
    const skip = g1 - g0;
    // The symbol is [st, g0) and [g1, st + len + skip): its window in the longer part.
    const aFrom = st + GUARD * len;
    const aTo = Math.min(g0, st + (1 - GUARD) * len);
    const bFrom = Math.max(g1, st + skip + GUARD * len);
    const bTo = st + skip + (1 - GUARD) * len;
    if (aTo - aFrom < bTo - bFrom && Math.ceil(bTo) > end) return MORE;
    this.skipped = skip;
    return aTo - aFrom >= bTo - bFrom ? this.symbolIn(aFrom, aTo) : this.symbolIn(bFrom, bTo);
  }

  /**
   * The start of the first quiet run (`SILENT`, at least `GAP_MIN_MS`) starting in [from, to],
   * with the first sample after it in `gapEnd`; -1 when there is none or it lasts `GAP_MAX_MS`
   * or more; `MORE` when it reaches `end` shorter than that (more input decides).
   */
  private gapIn(from: number, to: number, end: number): number {
    const b = this.buf;
    const min = this.gapMin;
    const max = this.gapMax;
    let run = 0;
    for (let i = from; i < end; i++) {
      const x = b[i - this.base];
      if (x < SILENT && x > -SILENT) {
        run++;
        if (run >= max) return -1;
        continue;
      }
      if (run >= min) {
        this.gapEnd = i;
        return i - run;
      }
      run = 0;
      if (i >= to) return -1;
    }
    return run >= min && end - run < to ? MORE : -1;
  }

  /** The byte of the symbol at [st, st + len): -1 no symbol, -2 terminator. */
  private symbolAt(st: number, len: number): number {
    return this.symbolIn(st + GUARD * len, st + (1 - GUARD) * len);
  }

  /** The byte of the symbol measured over [from, to). */
  private symbolIn(fromPos: number, toPos: number): number {
    const from = Math.round(fromPos);
    const n = Math.round(toPos) - from;
    const fr = this.frAll;
    toneFractions(this.buf, from - this.base, n, this.cAll, fr);
    const a = argmax(fr, 0, 17);
    const b = argmax(fr, 17, 17);
    if (fr[a] + fr[17 + b] < MIN_PURITY) return -1;
    if (a === CONTROL && b === CONTROL) return -2;
    if (a === CONTROL || b === CONTROL) {
      // One control tone only: a damaged symbol; take the strongest data tones.
      return (argmax(fr, 0, 16) << 4) | argmax(fr, 17, 16);
    }
    return (a << 4) | b;
  }

  private emitChars(out: DemodEvent[]): void {
    for (const char of this.chars) out.push({ type: 'char', char });
    this.chars.length = 0;
  }

  private endBurst(pos: number, out: DemodEvent[]): void {
    this.utf8.flush(this.chars);
    this.emitChars(out);
    out.push({ type: 'burst_end', pos });
    this.state = 'search';
    this.origin = Math.ceil(pos);
    this.hopCount = 0;
  }

  /** Drops samples no step can look back to any more. */
  private compact(): void {
    let keep: number;
    if (this.state === 'search') keep = this.origin + (this.hopCount - PATTERN_HOPS - 4) * this.hopLen;
    else if (this.state === 'header') keep = this.t0;
    else keep = this.dataStart + this.k * this.step;
    keep = Math.min(Math.floor(keep) - 2 * this.hopLen, this.base + this.len);
    const drop = keep - this.base;
    // Moving the kept tail (~220 ms) every 2,048 samples costs a few copies per sample and
    // keeps the buffer near its minimum: memory matters with a thousand streams.
    if (drop < 2048) return;
    this.buf.copyWithin(0, drop, this.len);
    this.base += drop;
    this.len -= drop;
  }
}
