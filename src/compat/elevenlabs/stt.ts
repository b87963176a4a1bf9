/**
 * Family C speech to text (docs/api/compat.md "Family C"):
 * `POST /v1/speech-to-text`, multipart, translated into the native transcription service.
 */
import { int16ToPcmBytes, pcmBytesToInt16, wavHeader } from '../../audio/index.ts';
import { formFields, mediaType, parseMultipart } from '../../http/body.ts';
import type { Transcript } from '../../speech/asr.ts';
import { ElevenLabsError, explicitlyFalse, truthy } from './common.ts';

/** Options refused when truthy, with the reason the client reads. */
export const REFUSED_OPTIONS: Readonly<Record<string, string>> = {
  diarize: 'speaker attribution unavailable',
  use_multi_channel: 'per-channel transcription unavailable',
  entity_detection: 'entities would be missing',
  entity_redaction: 'text would come back unredacted',
  entity_redaction_mode: 'text would come back unredacted',
  no_verbatim: 'transcript stays verbatim',
  tag_audio_events: 'no event tags',
  additional_formats: 'extra formats absent',
  webhook: 'no delivery callback',
  webhook_id: 'no delivery callback',
  source_url: 'remote audio not fetched',
  cloud_storage_url: 'remote audio not fetched',
};

export interface SttRequest {
  audio: Uint8Array;
  /** `language_code` as sent ('' when none). */
  languageCode: string;
  granularity: 'word' | 'none';
}

/**
 * Reads and checks a speech-to-text request: the refusal table, `timestamps_granularity`
 * (`word` default, `none` accepted, `character` → 400), `enable_logging=false` (query or
 * form) → 400, and the `file` part. `file_format=pcm_s16le_16` wraps raw 16 kHz PCM.
 */
export function readSttRequest(raw: Buffer | undefined, contentType: string | undefined, query: URLSearchParams): SttRequest {
  if (mediaType(contentType) !== 'multipart/form-data' || !raw || raw.length === 0) {
    throw new ElevenLabsError('invalid_request', 'The body must be multipart/form-data with a file part');
  }
  const parts = parseMultipart(raw, contentType!);
  const { fields, files } = formFields(parts);
  for (const [name, reason] of Object.entries(REFUSED_OPTIONS)) {
    const v = fields[name] ?? (files[name] ? files[name].map((p) => p.data.toString('utf8')) : undefined) ?? query.getAll(name);
    if (truthy(Array.isArray(v) && v.length === 0 ? undefined : v)) throw new ElevenLabsError('invalid_request', `${name} is not supported: ${reason}`);
  }
  const logging = fields.enable_logging ?? (query.has('enable_logging') ? query.getAll('enable_logging') : undefined);
  if (explicitlyFalse(logging)) throw new ElevenLabsError('invalid_request', 'enable_logging=false is not supported: zero retention cannot be honored');
  const g = first(fields.timestamps_granularity)?.trim() || 'word';
  if (g === 'character') throw new ElevenLabsError('invalid_request', 'timestamps_granularity=character is not supported: only word granularity exists');
  if (g !== 'word' && g !== 'none') throw new ElevenLabsError('invalid_request', `timestamps_granularity must be word or none, not ${JSON.stringify(g)}`);
  // The file part may come with or without a filename.
  const file = files.file?.[0]?.data ?? parts.find((p) => p.name === 'file')?.data;
  if (!file || file.length === 0) throw new ElevenLabsError('invalid_request', 'A non-empty file part is required');
  let audio: Uint8Array = new Uint8Array(file);
  if (first(fields.file_format) === 'pcm_s16le_16') audio = wavOf(audio, 16000);
  return { audio, languageCode: first(fields.language_code) ?? '', granularity: g };
}

const first = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

function wavOf(pcm: Uint8Array, rate: number): Uint8Array {
  const data = int16ToPcmBytes(pcmBytesToInt16(pcm.byteLength % 2 ? pcm.subarray(0, pcm.byteLength - 1) : pcm));
  const out = new Uint8Array(44 + data.byteLength);
  out.set(wavHeader(rate, data.byteLength), 0);
  out.set(data, 44);
  return out;
}

export interface SttWord {
  text: string;
  start?: number;
  end?: number;
  type: 'word' | 'spacing';
  speaker_id: null;
  logprob: number;
}

const sec = (ms: number) => Math.round(ms) / 1000;

/**
 * The vendor response: `text`, `words` (a `spacing` entry for the text between two words,
 * timed across the gap), and the constants: `language_code` echoes the request ('' when
 * none, never a detected language), `language_probability` 1.0, per word `logprob` 0 and
 * `speaker_id` null. With granularity `none`, words carry no times.
 */
export function sttResponse(t: Transcript, req: SttRequest): { language_code: string; language_probability: number; text: string; words: SttWord[]; audio_duration_secs: number } {
  const words: SttWord[] = [];
  const timed = req.granularity === 'word';
  let cursor = 0;
  let prev: Transcript['words'][number] | undefined;
  for (const w of t.words) {
    const at = t.text.indexOf(w.text, cursor);
    if (prev && at > cursor) {
      const gap = t.text.slice(cursor, at);
      words.push({ text: gap, ...(timed ? { start: sec(prev.endMs), end: sec(Math.max(prev.endMs, w.startMs)) } : {}), type: 'spacing', speaker_id: null, logprob: 0 });
    } else if (prev && at < 0) {
      words.push({ text: ' ', ...(timed ? { start: sec(prev.endMs), end: sec(Math.max(prev.endMs, w.startMs)) } : {}), type: 'spacing', speaker_id: null, logprob: 0 });
    }
    words.push({ text: w.text, ...(timed ? { start: sec(w.startMs), end: sec(w.endMs) } : {}), type: 'word', speaker_id: null, logprob: 0 });
    if (at >= 0) cursor = at + w.text.length;
    prev = w;
  }
  return { language_code: req.languageCode, language_probability: 1.0, text: t.text, words, audio_duration_secs: sec(t.durationMs) };
}
