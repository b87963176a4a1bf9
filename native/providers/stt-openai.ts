// The `openai` transcription engine: `POST {base}/audio/transcriptions` (multipart: a WAV file,
// the model, `response_format: verbose_json` with word and segment timestamps; OpenAI, Groq,
// speaches, vLLM, whisper.cpp's server, LocalAI, another Parley). A server that refuses
// verbose_json (gpt-4o-transcribe) is asked for `json` from then on, without timestamps.
// TranscribeStream: turn taking by the speech detector (turns.ts), each utterance transcribed
// when it ends; no partials.
import * as grpc from '@grpc/grpc-js';
import { wavHeader } from '../audio.ts';
import type { Timed } from '../engines/types.ts';
import { StatusError } from '../status.ts';
import { providerRequest, readJson, type CallScope, type Provider } from './http.ts';
import { languageCode, padTo, type Transcript, type TranscriptionProvider } from './transcription.ts';
import { turnTaking } from './turns.ts';
import type { TurnDetectorFactory } from './vad.ts';

/** A WAV file of 16-bit mono PCM. */
export function wavFile(pcm: Int16Array, rateHz: number): Uint8Array {
  const data = new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  const out = new Uint8Array(44 + data.length);
  out.set(wavHeader(rateHz, data.length));
  out.set(data, 44);
  return out;
}

const REFUSES_VERBOSE = /response_format|verbose_json|timestamp/i;

export function createOpenAiTranscription(p: Provider, detector: TurnDetectorFactory): TranscriptionProvider {
  const base = p.settings.baseUrl;
  let verbose = true;

  async function transcribe(pcm: Int16Array, rateHz: number, language: string, scope: CallScope): Promise<Transcript> {
    const form = () => {
      const f = new FormData();
      f.append('file', new Blob([wavFile(padTo(pcm, rateHz), rateHz) as Uint8Array<ArrayBuffer>], { type: 'audio/wav' }), 'audio.wav');
      f.append('model', p.settings.model);
      const lang = languageCode(language);
      if (lang) f.append('language', lang);
      if (verbose) {
        f.append('response_format', 'verbose_json');
        f.append('timestamp_granularities[]', 'word');
        f.append('timestamp_granularities[]', 'segment');
      } else f.append('response_format', 'json');
      return f;
    };
    let j: Record<string, any>;
    try {
      j = (await readJson(await providerRequest(p, `${base}/audio/transcriptions`, { body: form() }, scope))) as Record<string, any>;
    } catch (err) {
      if (!(verbose && err instanceof StatusError && err.code === grpc.status.INVALID_ARGUMENT && REFUSES_VERBOSE.test(err.details))) throw err;
      verbose = false;
      j = (await readJson(await providerRequest(p, `${base}/audio/transcriptions`, { body: form() }, scope))) as Record<string, any>;
    }
    if (typeof j.text !== 'string') throw new StatusError(grpc.status.UNAVAILABLE, `${p.what} answered without a transcript`);
    const timed = (list: unknown, key: 'word' | 'text'): Timed[] =>
      Array.isArray(list)
        ? list.filter((w) => w && typeof w[key] === 'string' && Number.isFinite(w.start) && Number.isFinite(w.end)).map((w) => ({ text: String(w[key]).trim(), startMs: w.start * 1000, endMs: Math.max(w.start, w.end) * 1000 })).filter((w) => w.text)
        : [];
    return { text: j.text.trim(), words: timed(j.words, 'word'), segments: timed(j.segments, 'text') };
  }

  return {
    provider: p,
    transcribe,
    stream(rateHz, language, scope, onEvent, onError) {
      // Each utterance is its own request; the stream's signal cancels those in flight.
      const ac = new AbortController();
      const signal = AbortSignal.any([scope.signal, ac.signal]);
      return turnTaking(rateHz, detector, {
        finish: async (pcm) => transcribe(pcm, rateHz, language, { signal }),
        close: () => ac.abort(new Error('stream closed')),
      }, onEvent, onError);
    },
    async probe(scope) {
      const res = await providerRequest(p, `${base}/models`, { method: 'GET' }, scope);
      res.close();
    },
  };
}
