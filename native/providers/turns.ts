// Turn taking over a recognizer that does not take turns itself: the speech detector says where
// speech starts and ends; each utterance (from a little before its start to its end) goes to the
// recognizer when it ends, or when the platform commits. Events keep their order: an utterance's
// `committed` comes when its transcript is back, then its `speech_ended`.
//
// Realtime recognizers get the utterance's audio as it comes (`live`), batch ones the whole
// utterance at the end; both through one `Recognizer`.
import type { Timed } from '../engines/types.ts';
import type { StreamEvent } from '../engines/synthetic-engine.ts';
import { CommitSpacer, type StreamTranscriber } from './transcription.ts';
import type { TurnDetectorFactory } from './vad.ts';

export type { TurnDetectorFactory } from './vad.ts';

/** Audio kept before the detected start of speech (the detector reacts a little late). */
export const PREROLL_MS = 300;
/** How often (audio ms) the detector is asked how far it has judged, so that older audio can go. */
const PROGRESS_MS = 250;
/** An utterance longer than this is cut and recognized in parts. */
export const MAX_UTTERANCE_MS = 30_000;

/** What turn taking needs of a recognizer. */
export interface Recognizer {
  /** An utterance begins with `preroll` (audio before the detected start); `audio` follows live. */
  begin?(preroll: Int16Array): void;
  audio?(pcm: Int16Array): void;
  /** Partial transcripts of the current utterance are reported through this, when the recognizer has them. */
  onPartial?: (text: string) => void;
  /**
   * The utterance (or the part of it up to a commit) is complete: its transcript, word times
   * from the start of `pcm` (the whole cut, for batch recognizers; realtime ones have had it live).
   */
  finish(pcm: Int16Array): Promise<{ text: string; words: Timed[] }>;
  close(): void;
}

export function turnTaking(rateHz: number, detector: TurnDetectorFactory, recognizer: Recognizer, onEvent: (e: StreamEvent) => void, onError: (err: unknown) => void): StreamTranscriber {
  const msToSamples = (ms: number) => Math.round((ms * rateHz) / 1000);
  const samplesToMs = (n: number) => (n / rateHz) * 1000;
  /** Audio kept, starting at stream position `keptFrom` (samples). */
  let kept: Int16Array[] = [];
  let keptSamples = 0;
  let keptFrom = 0;
  /** Stream position of everything pushed so far. */
  let pushed = 0;
  /** Where the current utterance starts (samples), or null between utterances. */
  let uttFrom: number | null = null;
  /** Sent live to the recognizer up to this position. */
  let liveTo = 0;
  let chain: Promise<void> = Promise.resolve();
  let closed = false;
  let failed = false;
  let marks = 0;
  /** Everything before this position has been judged by the detector (a mark came back). */
  let judged = 0;
  /** Where the last progress mark was sent. */
  let markedAt = 0;
  const waiting = new Map<number, () => void>();
  const spacer = new CommitSpacer();

  const emit = (e: StreamEvent) => {
    if (!closed && !failed) onEvent(e);
  };
  const fail = (err: unknown) => {
    if (closed || failed) return;
    failed = true;
    onError(err);
  };
  recognizer.onPartial = (text) => emit({ type: 'partial', text });

  /** Samples [from, to) of the kept audio. */
  const slice = (from: number, to: number): Int16Array => {
    const a = Math.max(from, keptFrom);
    const out = new Int16Array(Math.max(0, to - a));
    let at = keptFrom;
    let o = 0;
    for (const p of kept) {
      const s = Math.max(a, at);
      const e = Math.min(to, at + p.length);
      if (e > s) {
        out.set(p.subarray(s - at, e - at), o);
        o += e - s;
      }
      at += p.length;
      if (at >= to) break;
    }
    return out;
  };
  /** Drops kept audio before `pos`. */
  const trim = (pos: number) => {
    while (kept.length && keptFrom + kept[0]!.length <= pos) {
      keptFrom += kept[0]!.length;
      keptSamples -= kept[0]!.length;
      kept.shift();
    }
  };

  /** Recognizes [from, to) and emits its committed text (and speech_ended at `endedAt` when given), in order. */
  const cut = (from: number, to: number, endedAt: number | null) => {
    const pcm = recognizer.begin ? new Int16Array(0) : slice(from, to);
    const offsetMs = samplesToMs(from);
    const done = recognizer.finish(pcm);
    done.catch(() => {});
    chain = chain.then(async () => {
      const t = await done;
      const text = spacer.text(t.text);
      emit({ type: 'committed', text, words: t.words.map((w) => ({ text: w.text, startMs: w.startMs + offsetMs, endMs: w.endMs + offsetMs })) });
      if (endedAt !== null) emit({ type: 'speech_ended', atMs: endedAt });
    });
    chain.catch(fail);
  };

  const committedEmpty = () => {
    chain = chain.then(() => emit({ type: 'committed', text: '', words: [] }));
  };

  const startUtterance = (atMs: number) => {
    const from = Math.max(keptFrom, msToSamples(atMs - PREROLL_MS));
    uttFrom = from;
    emit({ type: 'speech_started', atMs });
    if (recognizer.begin) {
      recognizer.begin(slice(from, pushed));
      liveTo = pushed;
    }
  };

  const handle = (e: Parameters<Parameters<TurnDetectorFactory>[1]>[0]) => {
    if (closed || failed) return;
    try {
      if (e.type === 'start') {
        if (uttFrom === null) startUtterance(e.atMs);
      } else if (e.type === 'end') {
        if (uttFrom === null) return;
        const from = uttFrom;
        uttFrom = null;
        // The detector speaks after its silence window: the audio up to now is here, and some
        // of that silence goes with the utterance (recognizers like a little margin).
        cut(from, pushed, e.atMs);
        // Audio after the end may already hold the next utterance's start: kept.
        trim(Math.min(pushed, msToSamples(e.atMs)));
      } else {
        const resolve = waiting.get(e.mark);
        waiting.delete(e.mark);
        resolve?.();
      }
    } catch (err) {
      fail(err);
    }
  };
  const det = detector(rateHz, handle);

  /** Waits until the detector has judged everything pushed so far. */
  const settled = () => {
    const m = ++marks;
    const p = new Promise<void>((resolve) => waiting.set(m, resolve));
    det.mark(m);
    return p;
  };

  return {
    push(pcm) {
      if (closed || failed || pcm.length === 0) return;
      kept.push(pcm);
      keptSamples += pcm.length;
      pushed += pcm.length;
      if (uttFrom !== null && recognizer.audio && pushed > liveTo) {
        recognizer.audio(pcm);
        liveTo = pushed;
      }
      try {
        det.push(pcm);
      } catch (err) {
        fail(err);
      }
      // Between utterances only the audio the detector may still start one in is kept: up to
      // where it has judged, less the pre-roll (it runs behind, in its worker).
      if (pushed - markedAt >= msToSamples(PROGRESS_MS)) {
        markedAt = pushed;
        const pos = pushed;
        void settled().then(() => {
          judged = Math.max(judged, pos);
          if (uttFrom === null && !closed) trim(judged - msToSamples(PREROLL_MS));
        });
      }
      if (uttFrom !== null && pushed - uttFrom > msToSamples(MAX_UTTERANCE_MS)) {
        cut(uttFrom, pushed, null);
        uttFrom = pushed;
        trim(pushed);
        if (recognizer.begin) recognizer.begin(new Int16Array(0));
      }
    },
    commit() {
      if (closed || failed) return;
      const at = pushed;
      void settled().then(() => {
        if (closed || failed) return;
        if (uttFrom !== null && at > uttFrom) {
          cut(uttFrom, at, null);
          uttFrom = at;
          if (recognizer.begin) recognizer.begin(new Int16Array(0));
        } else committedEmpty();
      });
    },
    async end() {
      if (closed || failed) return;
      await settled();
      if (uttFrom !== null) {
        const from = uttFrom;
        uttFrom = null;
        cut(from, pushed, samplesToMs(pushed));
      }
      await chain;
    },
    close() {
      if (closed) return;
      closed = true;
      det.close();
      recognizer.close();
      for (const r of waiting.values()) r();
      waiting.clear();
      kept = [];
    },
  };
}
