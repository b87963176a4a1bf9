/** A piece of text and where it is in the audio, in milliseconds from the audio's start. */
export interface Timed {
  text: string;
  startMs: number;
  endMs: number;
}

/** A decoded character with its position in samples (internal to the modem). */
export interface CharAt {
  text: string;
  start: number;
  end: number;
}

const SPACE = /^\s$/u;

/** Words are maximal runs of non-whitespace characters; times span their first to last char. */
export function wordsOf(chars: readonly Timed[]): Timed[] {
  const words: Timed[] = [];
  let cur: Timed | null = null;
  for (const c of chars) {
    if (SPACE.test(c.text)) {
      cur = null;
      continue;
    }
    if (cur) {
      cur.text += c.text;
      cur.endMs = c.endMs;
    } else {
      cur = { text: c.text, startMs: c.startMs, endMs: c.endMs };
      words.push(cur);
    }
  }
  return words;
}

export function toTimed(chars: readonly CharAt[], sampleRateHz: number): Timed[] {
  return chars.map((c) => ({
    text: c.text,
    startMs: (c.start / sampleRateHz) * 1000,
    endMs: (c.end / sampleRateHz) * 1000,
  }));
}
