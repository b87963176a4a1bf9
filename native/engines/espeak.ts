// The espeak engine: real, intelligible speech from espeak-ng (WASM, GPL-3.0-or-later).
// Synthesis runs in a small pool of worker threads so it never blocks the gRPC loop.
// espeak gives no timings, so word timings are estimated: the voiced span of the audio
// is shared among the words in proportion to their phoneme counts (espeak's own -x
// output), or to their lengths when the phoneme words do not line up with the text's.
import os from 'node:os';
import { parseWav, resampleLinear } from '../audio.ts';
import { designId, designsFor, parseDesignId, PREVIEW_TEXTS, summaryOf } from './espeak-design.ts';
import { WorkerPool } from './pool.ts';
import type { DesignedVoice, SpeechEngine, SpeechOptions, SpeechPiece, Timed } from './types.ts';

/** The spec's seven speaking languages and the espeak voices that speak them. */
export const ESPEAK_VOICES: Record<string, string> = { en: 'en-us', ja: 'ja', zh: 'cmn', ko: 'ko', es: 'es', fr: 'fr', de: 'de' };
/** Voice ids offered by this engine → espeak variant suffix. */
const VARIANTS: Record<string, string> = { default: '', male: '+m3', female: '+f3', whisper: '+whisper' };
const SAMPLE_RATE_HZ = 22050;
const BASE_WPM = 175;

function isCjk(ch: string): boolean {
  return /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]/u.test(ch);
}

/** Words of a text: whitespace-separated; Han and kana characters count as one word each. */
export function splitWords(text: string): { word: string; start: number }[] {
  const out: { word: string; start: number }[] = [];
  const cps = Array.from(text);
  let cur = '';
  let curStart = 0;
  cps.forEach((ch, i) => {
    if (/\s/u.test(ch)) {
      if (cur) out.push({ word: cur, start: curStart });
      cur = '';
    } else if (isCjk(ch)) {
      if (cur) out.push({ word: cur, start: curStart });
      out.push({ word: ch, start: i });
      cur = '';
    } else {
      if (!cur) curStart = i;
      cur += ch;
    }
  });
  if (cur) out.push({ word: cur, start: curStart });
  return out;
}

/** First and last sample louder than a small threshold. */
function voicedSpan(pcm: Int16Array): [number, number] {
  const thr = 300;
  let a = 0;
  while (a < pcm.length && Math.abs(pcm[a]) < thr) a++;
  let b = pcm.length - 1;
  while (b > a && Math.abs(pcm[b]) < thr) b--;
  return a >= pcm.length ? [0, 0] : [a, b + 1];
}

/** Word and character timings shared out over the voiced span. */
export function estimateAlignment(text: string, phonemeLines: string[], pcm: Int16Array, rateHz: number): { words: Timed[]; chars: Timed[] } {
  const words = splitWords(text);
  const cps = Array.from(text);
  if (words.length === 0) return { words: [], chars: cps.map((c) => ({ text: c, startMs: 0, endMs: 0 })) };
  const phonemeWords = phonemeLines.join(' ').split(/\s+/).filter(Boolean);
  const weights = phonemeWords.length === words.length
    ? phonemeWords.map((p) => p.replace(/[',%=_:|]/g, '').length || 1)
    : words.map((w) => Array.from(w.word).length);
  const total = weights.reduce((a, b) => a + b, 0);
  const [s0, s1] = voicedSpan(pcm);
  const startMs = (s0 / rateHz) * 1000;
  const spanMs = ((s1 - s0) / rateHz) * 1000;
  const timedWords: Timed[] = [];
  let acc = 0;
  words.forEach((w, i) => {
    const a = startMs + (spanMs * acc) / total;
    acc += weights[i];
    const b = startMs + (spanMs * acc) / total;
    timedWords.push({ text: w.word, startMs: a, endMs: b });
  });
  // Characters: each word's span shared evenly by its characters; the characters between
  // words (spaces, punctuation outside words) get zero-length spans at the boundary.
  const chars: Timed[] = [];
  let wi = 0;
  let cursorMs = startMs;
  for (let i = 0; i < cps.length; i++) {
    const w = words[wi];
    if (w && i >= w.start && i < w.start + Array.from(w.word).length) {
      const n = Array.from(w.word).length;
      const k = i - w.start;
      const tw = timedWords[wi];
      const d = (tw.endMs - tw.startMs) / n;
      chars.push({ text: cps[i], startMs: tw.startMs + d * k, endMs: tw.startMs + d * (k + 1) });
      cursorMs = tw.startMs + d * (k + 1);
      if (k === n - 1) wi++;
    } else {
      chars.push({ text: cps[i], startMs: cursorMs, endMs: cursorMs });
    }
  }
  return { words: timedWords, chars };
}

export function espeakVoice(language: string, voice: string): string {
  const primary = (language || 'en').toLowerCase().split(/[-_]/)[0];
  const base = ESPEAK_VOICES[primary] ?? ESPEAK_VOICES.en;
  const designed = parseDesignId(voice);
  return base + (designed ? `+${designed.variant}` : (VARIANTS[voice] ?? ''));
}

/** espeak's rate for a speed multiplier and a designed pace (percent), within what espeak speaks. */
function wordsPerMinute(speed: number, pacePercent = 100): number {
  return Math.round(Math.min(450, Math.max(80, BASE_WPM * (speed || 1) * (pacePercent / 100))));
}

/** The language a preview speaks: one of the engine's, else English. */
function previewLanguage(language: string): string {
  const primary = (language || 'en').toLowerCase().split(/[-_]/)[0]!;
  return ESPEAK_VOICES[primary] ? primary : 'en';
}

export function createEspeakEngine(opts: { workers?: number } = {}): SpeechEngine {
  let pool: WorkerPool | null = null;
  const getPool = () => (pool ??= new WorkerPool(new URL('./espeak-worker.mjs', import.meta.url), opts.workers ?? Math.max(1, Math.min(2, os.availableParallelism()))));
  const engine: SpeechEngine = {
    name: 'espeak',
    defaultSampleRateHz: SAMPLE_RATE_HZ,
    sampleRatesHz: [SAMPLE_RATE_HZ],
    estimatedAlignment: true,
    languages: Object.keys(ESPEAK_VOICES),
    voices: Object.keys(VARIANTS).map((id) => ({ id, name: `espeak ${id}`, languages: Object.keys(ESPEAK_VOICES) })),
    // Designed voices (espeak-design.ts) carry their variant, pitch and pace in their id.
    acceptsVoice: (id: string) => parseDesignId(id) !== null,
    async synthesize(text: string, o: SpeechOptions, signal: AbortSignal): Promise<SpeechPiece> {
      signal.throwIfAborted();
      const designed = parseDesignId(o.voice);
      const wpm = wordsPerMinute(o.speed, designed?.pace);
      const { wav, phonemeLines } = await getPool().run<{ wav: Uint8Array; phonemeLines: string[] }>({ text, voice: espeakVoice(o.language, o.voice), wpm, ...(designed ? { pitch: designed.pitch } : {}) });
      signal.throwIfAborted();
      const parsed = parseWav(wav);
      if (!parsed) throw new Error('espeak produced no audio');
      const { words, chars } = estimateAlignment(text, phonemeLines, parsed.pcm, parsed.sampleRateHz);
      const rate = o.sampleRateHz || parsed.sampleRateHz;
      if (rate === parsed.sampleRateHz) return { pcm: parsed.pcm, sampleRateHz: rate, words, chars };
      return { pcm: resampleLinear(parsed.pcm, parsed.sampleRateHz, rate), sampleRateHz: rate, words, chars };
    },
    async design(req, signal): Promise<DesignedVoice[]> {
      const language = previewLanguage(req.language);
      const text = req.text || PREVIEW_TEXTS[language]!;
      const seed = req.seed ?? Math.floor(Math.random() * 2 ** 32);
      const designs = designsFor(req.description, req.count, req.speed, seed);
      // One preview after another: the pool has at most two workers, shared with synthesis.
      const out: DesignedVoice[] = [];
      for (const { design, traits } of designs) {
        const voiceId = designId(design);
        const piece = await engine.synthesize(text, { language, speed: 1, sampleRateHz: req.sampleRateHz, voice: voiceId }, signal);
        out.push({ voiceId, pcm: piece.pcm, sampleRateHz: piece.sampleRateHz, text, language, summary: summaryOf(design, traits, wordsPerMinute(1, design.pace)) });
      }
      return out;
    },
    warm: () => getPool().ready(),
    health: () => ({ ok: true, detail: 'espeak-ng (WASM)' }),
    async close() {
      await pool?.close();
      pool = null;
    },
  };
  return engine;
}
