/**
 * Where a sentence ends, for the native backend: synthesis cuts text into segments and speaks
 * a stream's complete sentences (its own engines and the provider engines), the scripted model
 * reads passages sentence by sentence and ends a value at a sentence end. This is a copy of the
 * platform's `actors/sentences.ts`: `native/` is a separate program (its own licence) that
 * imports only the generated contract and its own files. Keep the two the same.
 *
 * A sentence ends after a run of terminators (`. ! ? …`, the full-width `。 ！ ？`, or a line
 * break) and any closing quotes or brackets, where whitespace or the end of the text follows;
 * the whitespace after it belongs to the sentence. A full-width terminator or a line break
 * ends a sentence even with text right after it (Chinese and Japanese put no space there);
 * an ASCII one does not ("3.5", "e.g.x" go on).
 */

const END = /[.!?…。！？\n]+["')\]」』]*\s*/gu;
/**
 * The same end as a pattern source, for a lookahead that stops before it: ASCII terminators and
 * closers followed by whitespace or the end of the text, or a full-width terminator or line break.
 */
export const SENTENCE_END_AHEAD = String.raw`[.!?…]+["')\]」』]*(?:\s|$)|[。！？\n]`;
const ENDS_AT_ONCE = /[。！？\n]/u;
const SPACE_AT_END = /\s$/u;

/**
 * The offsets just past each sentence end of `text` (its whitespace included), in order.
 * `streaming`: more text may follow, so the text's end is no sentence end by itself ("3." may
 * become "3.5").
 */
export function sentenceEnds(text: string, streaming = false): number[] {
  const ends: number[] = [];
  for (const m of text.matchAll(END)) {
    const end = m.index + m[0].length;
    if (SPACE_AT_END.test(m[0]) || ENDS_AT_ONCE.test(m[0]) || (!streaming && end === text.length)) ends.push(end);
  }
  return ends;
}

/** `text` cut into its sentences, each with the whitespace after it: they concatenate back to `text`. */
export function splitSentences(text: string): string[] {
  const out: string[] = [];
  let last = 0;
  for (const end of sentenceEnds(text)) {
    out.push(text.slice(last, end));
    last = end;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

/** Text still arriving: its complete sentences so far, and the rest that more text may continue. */
export function cutSentences(buffer: string): [string, string] {
  const ends = sentenceEnds(buffer, true);
  const end = ends.length ? ends[ends.length - 1]! : 0;
  return [buffer.slice(0, end), buffer.slice(end)];
}
