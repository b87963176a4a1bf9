// The synthetic engine: wraps the tone modem (./synthetic/modem.ts). Its speech encodes
// the text reversibly, with exact word and character timings; its recognizer decodes such
// audio back to the exact text. Encoding and whole-recording decoding run on worker threads.
// Real speech is not its business: without a speech-to-text provider (docs/providers.md) such
// audio is refused, naming the settings that enable recognition.
import os from 'node:os';
import { encodeText, StreamDecoder, type Decoded, type StreamEvent } from './synthetic/modem.ts';
import { WorkerPool } from './pool.ts';
import type { SpeechEngine, SpeechOptions, SpeechPiece, Timed } from './types.ts';

/** The synthetic engine plus its whole-recording recognizer, both on worker threads. */
export interface SyntheticEngine extends SpeechEngine {
  /** Recognizes a whole recording. Rejects with MissingEngineError for non-synthetic audio. */
  recognize(pcm: Int16Array, sampleRateHz: number): Promise<Recognized>;
}

export function createSyntheticEngine(opts: { workers?: number } = {}): SyntheticEngine {
  let defaultRate = 0;
  let pool: WorkerPool | null = null;
  const getPool = () => (pool ??= new WorkerPool(new URL('./synthetic-worker.ts', import.meta.url), opts.workers ?? Math.max(1, Math.min(4, os.availableParallelism()))));
  return {
    name: 'synthetic',
    get defaultSampleRateHz() {
      return (defaultRate ||= encodeText('').sampleRateHz);
    },
    sampleRatesHz: [],
    languages: [],
    voices: [{ id: 'default', name: 'synthetic tones', languages: [] }],
    async synthesize(text: string, o: SpeechOptions, signal: AbortSignal): Promise<SpeechPiece> {
      signal.throwIfAborted();
      return getPool().run<SpeechPiece>({ op: 'encode', text, sampleRateHz: o.sampleRateHz || undefined, speed: o.speed || 1 });
    },
    async recognize(pcm: Int16Array, sampleRateHz: number): Promise<Recognized> {
      const durationMs = (pcm.length / sampleRateHz) * 1000;
      if (pcm.length === 0) return { text: '', durationMs: 0, words: [] };
      const { decoded } = await getPool().run<{ decoded: Decoded | null }>({ op: 'decode', pcm, sampleRateHz });
      if (decoded) return { text: decoded.text, durationMs, words: decoded.words };
      if (isSilent(pcm)) return { text: '', durationMs, words: [] };
      throw new MissingEngineError(REAL_SPEECH_NEEDS_PROVIDER);
    },
    warm: () => getPool().ready(),
    health: () => ({ ok: true, detail: 'synthetic tone modem' }),
    async close() {
      await pool?.close();
      pool = null;
    },
  };
}

/** The result of recognizing one recording. */
export interface Recognized {
  text: string;
  durationMs: number;
  words: Timed[];
}

/**
 * Raised when audio is not synthetic speech and no recognizer of real speech is configured; the
 * service answers it with UNIMPLEMENTED (a status clients do not retry).
 */
export class MissingEngineError extends Error {}

/** The refusal of real speech without a provider: what to set instead. */
export const REAL_SPEECH_NEEDS_PROVIDER =
  'audio is not synthetic speech: recognizing real speech needs a speech-to-text provider (set PARLEY_STT_PROVIDER to openai, openai-realtime or elevenlabs with PARLEY_STT_BASE_URL, PARLEY_STT_API_KEY and PARLEY_STT_MODEL on the native backend; docs/providers.md)';

function isSilent(pcm: Int16Array): boolean {
  for (let i = 0; i < pcm.length; i++) if (Math.abs(pcm[i]) > 64) return false;
  return true;
}

/** A realtime recognizer over synthetic speech. */
export function createStreamRecognizer(sampleRateHz: number): { push(pcm: Int16Array): StreamEvent[]; flush(): StreamEvent[] } {
  return new StreamDecoder(sampleRateHz);
}

export type { StreamEvent };
