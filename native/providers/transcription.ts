// What a transcription provider engine offers: whole recordings (Transcribe) and realtime
// streams (TranscribeStream), the latter with speech start and end from the speech detector.
import type { Timed } from '../engines/types.ts';
import type { StreamEvent } from '../engines/synthetic-engine.ts';
import type { CallScope, Provider } from './http.ts';

export interface Transcript {
  text: string;
  /** Times in ms from the start of the audio given. */
  words: Timed[];
  segments?: Timed[];
}

/** One realtime recognition: audio and commits in, events out (`onEvent`), in order. */
export interface StreamTranscriber {
  push(pcm: Int16Array): void;
  /** The platform's commit: a `committed` event follows for what was heard (empty text when nothing). */
  commit(): void;
  /** No more audio: what is left is committed; resolves after the last event. */
  end(): Promise<void>;
  /** Stops everything now (the call was cancelled or failed). */
  close(): void;
}

export interface TranscriptionProvider {
  readonly provider: Provider;
  /** One recording (mono PCM). */
  transcribe(pcm: Int16Array, rateHz: number, language: string, scope: CallScope): Promise<Transcript>;
  /** A realtime recognition; a failure arrives through `onError` (then no more events). */
  stream(rateHz: number, language: string, scope: CallScope, onEvent: (e: StreamEvent) => void, onError: (err: unknown) => void): StreamTranscriber;
  probe(scope: CallScope): Promise<void>;
  close?(): Promise<void>;
}

/** The primary subtag of a BCP-47 tag, as providers take it (`en-US` → `en`); '' for none. */
export const languageCode = (bcp47: string) => (bcp47 ? bcp47.toLowerCase().split(/[-_]/)[0]! : '');

/** Providers refuse very short audio (OpenAI below 0.1 s, Parley below 1 s): padded with silence to this. */
export const MIN_UPLOAD_MS = 1000;

/** `pcm` with silence after it up to `minMs` (the words keep their times). */
export function padTo(pcm: Int16Array, rateHz: number, minMs = MIN_UPLOAD_MS): Int16Array {
  const n = Math.ceil((rateHz * minMs) / 1000);
  if (pcm.length >= n) return pcm;
  const out = new Int16Array(n);
  out.set(pcm);
  return out;
}

/** Joins committed texts of one stream with single spaces (providers trim what they send). */
export class CommitSpacer {
  private any = false;
  text(raw: string): string {
    const t = raw.trim();
    if (!t) return '';
    const out = this.any ? ` ${t}` : t;
    this.any = true;
    return out;
  }
}
