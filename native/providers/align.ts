// Character and word timings of provider speech, released chunk by chunk.
//
// With the provider's timestamps (ElevenLabs alignment, Parley's with-timestamps) each of the
// text's characters takes the time of the provider character it matches (providers may
// normalize spaces or punctuation: characters they skipped share the gap around them). Without
// timestamps (OpenAI-style speech) the timings are estimated from a speaking rate while the
// audio streams, and the last chunk of a segment shares out what is left over the audio that
// really came; such alignment is marked `estimated`. Either way every character of the text
// comes out exactly once, in order, never later than the audio produced so far.
import type { Timed } from '../engines/types.ts';

/** Characters per second of typical synthesized speech at speed 1 (spaces included). */
export const ESTIMATED_CHARS_PER_S = 14;
/** How far ahead in the text a provider character is looked for before it is taken as extra. */
const LOOKAHEAD = 24;

const isSpace = (c: string) => /\s/u.test(c);

export class SegmentAligner {
  private readonly cps: string[];
  private readonly times: ({ start: number; end: number } | null)[];
  /** Next code point a provider character may match. */
  private cursor = 0;
  /** End of the last timed code point. */
  private lastEnd: number;
  /** Code points already handed out. */
  private released = 0;
  /** The first code point of the word being handed out, or -1 between words. */
  private wordFrom = -1;

  /**
   * `baseMs`: where this segment's audio starts on the call's timeline. `rate`: characters per
   * second for estimates (undefined when the provider gives timestamps).
   */
  constructor(
    text: string,
    private readonly baseMs: number,
    readonly estimatedRate: number | undefined,
  ) {
    this.cps = Array.from(text);
    this.times = this.cps.map(() => null);
    this.lastEnd = baseMs;
    this.estimate(0);
  }

  /** More text for this segment (a live socket's text arrives in pieces). */
  append(text: string): void {
    const from = this.cps.length;
    for (const c of text) {
      this.cps.push(c);
      this.times.push(null);
    }
    this.estimate(from);
  }

  /** Estimated times from code point `from` on, continuing the ones before it. */
  private estimate(from: number) {
    if (this.estimatedRate === undefined) return;
    const per = 1000 / this.estimatedRate;
    let t = from > 0 ? this.times[from - 1]!.end : this.baseMs;
    for (let i = from; i < this.cps.length; i++, t += per) this.times[i] = { start: t, end: t + per };
    this.cursor = this.cps.length;
  }

  /** Code points not handed out yet. */
  get remaining(): number {
    return this.cps.length - this.released;
  }

  get estimated(): boolean {
    return this.estimatedRate !== undefined;
  }

  /** The provider's characters (times in ms from this segment's audio start). */
  feed(chars: Timed[]): void {
    for (const c of chars) {
      const ch = Array.from(c.text)[0];
      if (ch === undefined || isSpace(ch)) continue;
      const start = this.baseMs + c.startMs;
      const end = Math.max(start, this.baseMs + c.endMs);
      let k = -1;
      for (let i = this.cursor; i < Math.min(this.cps.length, this.cursor + LOOKAHEAD); i++) {
        if (this.cps[i] === ch || this.cps[i]!.toLowerCase() === ch.toLowerCase()) {
          k = i;
          break;
        }
      }
      if (k < 0) continue; // a character the provider added (normalization): nothing to time
      const s = Math.max(start, this.lastEnd);
      const e = Math.max(s, end);
      this.spread(this.cursor, k, this.lastEnd, s);
      this.times[k] = { start: s, end: e };
      this.lastEnd = e;
      this.cursor = k + 1;
    }
  }

  /** Gives code points [from, to) even shares of [a, b]. */
  private spread(from: number, to: number, a: number, b: number) {
    const n = to - from;
    for (let i = 0; i < n; i++) this.times[from + i] = { start: a + ((b - a) * i) / n, end: a + ((b - a) * (i + 1)) / n };
  }

  /**
   * Characters and words audible by `audioEndMs` (the end of the audio produced so far) not
   * handed out before. `last`: the segment's audio is complete and ends at `audioEndMs`;
   * everything left is handed out, fitted within the audio.
   */
  take(audioEndMs: number, last: boolean): { chars: Timed[]; words: Timed[] } {
    if (last) this.settle(audioEndMs);
    const chars: Timed[] = [];
    let prevEnd = this.released > 0 ? this.times[this.released - 1]!.end : this.baseMs;
    while (this.released < this.cps.length) {
      const t = this.times[this.released];
      if (!t || t.end > audioEndMs + 1e-6) break;
      const start = Math.max(t.start, prevEnd);
      const end = Math.max(start, t.end);
      this.times[this.released] = { start, end };
      chars.push({ text: this.cps[this.released]!, startMs: start, endMs: end });
      prevEnd = end;
      this.released++;
    }
    // Words: runs of non-space code points, handed out once the space after them (or, at the
    // segment's end, the end of the text) has been.
    const words: Timed[] = [];
    const firstNew = this.released - chars.length;
    const word = (from: number, to: number) => words.push({ text: this.cps.slice(from, to).join(''), startMs: this.times[from]!.start, endMs: this.times[to - 1]!.end });
    for (let i = firstNew; i < this.released; i++) {
      if (isSpace(this.cps[i]!)) {
        if (this.wordFrom >= 0) word(this.wordFrom, i);
        this.wordFrom = -1;
      } else if (this.wordFrom < 0) this.wordFrom = i;
    }
    if (last && this.wordFrom >= 0 && this.released === this.cps.length) {
      word(this.wordFrom, this.released);
      this.wordFrom = -1;
    }
    return { chars, words };
  }

  /** Fits the times not yet handed out into the audio that came: [last handed out, audioEndMs]. */
  private settle(audioEndMs: number) {
    const from = this.released;
    const a = from > 0 ? this.times[from - 1]!.end : this.baseMs;
    const b = Math.max(a, audioEndMs);
    if (this.estimated || this.cursor < this.cps.length) {
      // Estimates (or characters the provider never timed): shared over what is left, in
      // proportion to the estimate where there is one.
      const known = this.times.slice(from).every((t) => t !== null);
      if (known && this.cps.length > from) {
        const t0 = this.times[from]!.start;
        const t1 = this.times[this.cps.length - 1]!.end;
        const scale = t1 > t0 ? (b - a) / (t1 - t0) : 0;
        for (let i = from; i < this.cps.length; i++) {
          const t = this.times[i]!;
          this.times[i] = { start: a + (t.start - t0) * scale, end: a + (t.end - t0) * scale };
        }
      } else {
        // Provider timings up to the cursor stay; the untimed rest shares the remaining audio.
        const lastTimed = Math.max(from, this.cursor);
        for (let i = from; i < lastTimed; i++) {
          const t = this.times[i]!;
          this.times[i] = { start: Math.min(t.start, b), end: Math.min(t.end, b) };
        }
        const c = lastTimed > from ? this.times[lastTimed - 1]!.end : a;
        this.spread(lastTimed, this.cps.length, c, b);
      }
    } else {
      for (let i = from; i < this.cps.length; i++) {
        const t = this.times[i]!;
        this.times[i] = { start: Math.min(t.start, b), end: Math.min(t.end, b) };
      }
    }
  }
}
