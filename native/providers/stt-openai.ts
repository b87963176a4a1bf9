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
import { multipart, providerRequest, readJson, type CallScope, type Provider } from './http.ts';
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
    const wav = wavFile(padTo(pcm, rateHz), rateHz);
    const send = async () => {
      const fields: [string, string][] = [['model', p.settings.model]];
      const lang = languageCode(language);
      if (lang) fields.push(['language', lang]);
      if (verbose) fields.push(['response_format', 'verbose_json'], ['timestamp_granularities[]', 'word'], ['timestamp_granularities[]', 'segment']);
      else fields.push(['response_format', 'json']);
      const form = multipart(fields, { name: 'file', filename: 'audio.wav', type: 'audio/wav', data: wav });
      return (await readJson(await providerRequest(p, `${base}/audio/transcriptions`, { headers: { 'Content-Type': form.contentType }, body: form.body }, scope))) as Record<string, any>;
    };
    let j: Record<string, any>;
    try {
      j = await send();
    } catch (err) {
      if (!(verbose && err instanceof StatusError && err.code === grpc.status.INVALID_ARGUMENT && REFUSES_VERBOSE.test(err.details))) throw err;
      verbose = false;
      j = await send();
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
