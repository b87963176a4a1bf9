// The synthetic engine: wraps the tone modem (./synthetic/modem.ts). Its speech encodes
// the text reversibly, with exact word and character timings; its recognizer decodes such
// audio back to the exact text. Encoding and whole-recording decoding run on worker threads. Audio that is not synthetic speech goes to pocketsphinx
// when that is installed, otherwise the recognizer says which engine is missing.
import { execFileSync } from 'node:child_process';
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
      throw new MissingEngineError(
        pocketsphinxAvailable()
          ? 'audio is not synthetic speech and the pocketsphinx engine is not wired in this build'
          : 'audio is not synthetic speech; recognizing real speech needs the pocketsphinx engine, which is not installed (apt-get install pocketsphinx pocketsphinx-en-us)',
      );
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

/** Raised when audio is not synthetic speech and no engine for real speech is installed. */
export class MissingEngineError extends Error {}

let sphinxChecked: boolean | null = null;
/** Whether Debian's pocketsphinx with its English model is installed. */
export function pocketsphinxAvailable(): boolean {
  if (sphinxChecked !== null) return sphinxChecked;
  try {
    execFileSync('sh', ['-c', 'command -v pocketsphinx && test -d /usr/share/pocketsphinx/model/en-us'], { stdio: 'ignore' });
    sphinxChecked = true;
  } catch {
    sphinxChecked = false;
  }
  return sphinxChecked;
}

function isSilent(pcm: Int16Array): boolean {
  for (let i = 0; i < pcm.length; i++) if (Math.abs(pcm[i]) > 64) return false;
  return true;
}

/** A realtime recognizer over synthetic speech. */
export function createStreamRecognizer(sampleRateHz: number): { push(pcm: Int16Array): StreamEvent[]; flush(): StreamEvent[] } {
  return new StreamDecoder(sampleRateHz);
}

export type { StreamEvent };
