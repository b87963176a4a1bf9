/**
 * `POST …/audio/transcriptions` of families A, B and Groq-style (docs/api/compat.md): multipart
 * (both array encodings: repeated `name[]` parts and one comma-joined part) or the
 * router-style JSON body with base64 `input_audio`; the answer in json, text,
 * verbose_json, srt or vtt.
 */
import { z } from 'zod';
import { ServiceError } from '../../errors.ts';
import { formFields, isJson, mediaType, parseJson, parseMultipart } from '../../http/body.ts';
import type { TimedText, Transcript } from '../../speech/asr.ts';
import { badParam } from '../errors.ts';
import { resolveModel } from './models.ts';
import { schemaError } from './speech.ts';

export const RESPONSE_FORMATS = ['json', 'text', 'verbose_json', 'srt', 'vtt'] as const;
export type TranscriptionFormat = (typeof RESPONSE_FORMATS)[number];

export interface TranscriptionRequest {
  /** The native model (always `transcribe-1` today). */
  model: string;
  audio: Uint8Array;
  language?: string;
  responseFormat: TranscriptionFormat;
  words: boolean;
}

const fields = z.object({
  model: z.string(),
  language: z.string().max(35).optional(),
  response_format: z.enum(RESPONSE_FORMATS).default('json'),
  timestamp_granularities: z.array(z.enum(['word', 'segment'])).default([]),
});

/** Refused whatever their value (docs/api/compat.md), unless empty. */
const REFUSED = ['include', 'known_speaker_names', 'known_speaker_references'];

const nonEmpty = (v: unknown) => v !== undefined && v !== null && v !== '' && !(Array.isArray(v) && v.every((x) => x === '' || x === null));

/** `['word,segment']`, `'word'`, `['word', 'segment']` → `['word', 'segment']`. */
function list(v: unknown): unknown {
  if (v === undefined || v === null) return undefined;
  const items = Array.isArray(v) ? v : [v];
  return items.flatMap((x) => (typeof x === 'string' ? x.split(',').map((s) => s.trim()).filter(Boolean) : [x]));
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Reads and validates the request. Everything it throws is the layer's own 400/415. */
export function readTranscriptionRequest(raw: Buffer | undefined, contentType: string | undefined, headers: Record<string, string>): TranscriptionRequest {
  // Any X-Service- header, listed or not (docs/api/compat.md: STT routes receiving them → 400).
  const native = Object.keys(headers).find((h) => h.startsWith('x-service-'));
  if (native) throw badParam(native, `Native synthesis parameters (${native}) are not accepted on transcription`);
  if (!raw || raw.length === 0) throw badParam('file', 'The request has no body: send multipart/form-data with a file, or JSON with input_audio');
  let body: Record<string, unknown>;
  let audio: Uint8Array | undefined;
  const type = mediaType(contentType);
  if (type === 'multipart/form-data') {
    const parts = parseMultipart(raw, contentType!);
    const file = parts.find((p) => p.name === 'file');
    if (file) audio = new Uint8Array(file.data);
    body = formFields(parts.filter((p) => p.name !== 'file')).fields;
    if (Object.keys(body).some((k) => k.startsWith('provider['))) throw badParam('provider', 'Native parameters (provider.options) are not accepted on transcription');
  } else if (isJson(contentType)) {
    const v = parseJsonBody(raw);
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw badParam('body', 'The request body must be a JSON object');
    body = { ...(v as Record<string, unknown>) };
    const ia = body.input_audio as { data?: unknown } | undefined;
    if (ia !== undefined && ia !== null) {
      if (typeof ia !== 'object' || typeof ia.data !== 'string' || !BASE64.test(ia.data)) throw badParam('input_audio.data', 'input_audio.data must be standard base64 audio');
      audio = new Uint8Array(Buffer.from(ia.data, 'base64'));
    }
    const options = (body.provider as { options?: Record<string, unknown> } | undefined)?.options;
    if (options && typeof options === 'object' && options.service !== undefined) throw badParam('provider.options.service', 'Native parameters (provider.options.service) are not accepted on transcription');
  } else {
    throw new ServiceError('unsupported_media_type', 'Unsupported Content-Type: send multipart/form-data (file) or application/json (input_audio)');
  }
  for (const [k, v] of Object.entries(body)) if (v === null) delete body[k];

  for (const name of REFUSED) if (nonEmpty(body[name])) throw badParam(name, `${name} is not supported`);
  for (const name of Object.keys(body)) if (name.startsWith('known_speaker_') && nonEmpty(body[name])) throw badParam(name, `${name} is not supported`);
  if (body.stream === true || body.stream === 'true') throw badParam('stream', 'Streaming transcription is not supported; omit stream');
  if (nonEmpty(body.url)) throw badParam('url', 'Transcribing from a URL is not supported; upload the audio as file');
  if (!audio) throw badParam('file', 'Missing audio: send the file part (multipart) or input_audio (JSON)');

  const parsed = fields.safeParse({
    model: body.model,
    language: body.language === '' ? undefined : body.language,
    response_format: body.response_format === '' ? undefined : body.response_format,
    timestamp_granularities: list(body.timestamp_granularities),
  });
  if (!parsed.success) throw schemaError(parsed.error);
  const f = parsed.data;
  return {
    model: resolveModel(f.model, 'transcription'),
    audio,
    language: f.language,
    responseFormat: f.response_format,
    words: f.timestamp_granularities.includes('word'),
  };
}

function parseJsonBody(raw: Buffer): unknown {
  try {
    return parseJson(raw);
  } catch {
    throw badParam('body', 'Malformed JSON');
  }
}

const seconds = (ms: number) => Math.round(ms) / 1000;

/** What a transcription answers: status 200, body, Content-Type. */
export interface TranscriptionResponse {
  body: string | Record<string, unknown>;
  contentType: string;
}

/**
 * The answer in the requested format. json: `{text, usage}`. verbose_json: the vendor's
 * fields, `segments[]` per word (docs/api/compat.md) with neutral engine constants, `words[]` with
 * the word granularity, `language` echoing the request (`""` if none). text, srt, vtt:
 * `text/plain` (the OpenAI-style clients return such a body as a string).
 */
export function transcriptionResponse(t: Transcript, req: TranscriptionRequest): TranscriptionResponse {
  const usage = { type: 'duration', seconds: seconds(t.durationMs) };
  switch (req.responseFormat) {
    case 'json':
      return { contentType: 'application/json', body: { text: t.text, usage } };
    case 'verbose_json': {
      const words = t.words.length ? t.words : t.segments;
      const body: Record<string, unknown> = {
        task: 'transcribe',
        language: req.language ?? '',
        duration: seconds(t.durationMs),
        text: t.text,
        segments: words.map((w, id) => ({
          id,
          seek: 0,
          start: seconds(w.startMs),
          end: seconds(w.endMs),
          text: w.text,
          tokens: [],
          temperature: 0,
          avg_logprob: 0,
          compression_ratio: 1,
          no_speech_prob: 0,
        })),
        usage,
      };
      if (req.words) body.words = t.words.map((w) => ({ word: w.text, start: seconds(w.startMs), end: seconds(w.endMs) }));
      return { contentType: 'application/json', body };
    }
    case 'text':
      return { contentType: 'text/plain; charset=utf-8', body: `${t.text}\n` };
    case 'srt':
      return { contentType: 'text/plain; charset=utf-8', body: cues(t).map((c, i) => `${i + 1}\n${stamp(c.startMs, ',')} --> ${stamp(c.endMs, ',')}\n${c.text}\n\n`).join('') };
    case 'vtt':
      return { contentType: 'text/plain; charset=utf-8', body: `WEBVTT\n\n${cues(t).map((c) => `${stamp(c.startMs, '.')} --> ${stamp(c.endMs, '.')}\n${c.text}\n\n`).join('')}` };
  }
}

/** Words per subtitle cue when the transcript has no phrase segments. */
const WORDS_PER_CUE = 8;

/** Subtitle cues: the transcript's phrase segments, or its words in groups. */
export function cues(t: Transcript): TimedText[] {
  if (t.segments.length) return t.segments.filter((s) => s.text.trim() !== '').map((s) => ({ ...s, text: s.text.trim() }));
  const out: TimedText[] = [];
  for (let i = 0; i < t.words.length; i += WORDS_PER_CUE) {
    const group = t.words.slice(i, i + WORDS_PER_CUE);
    out.push({ text: group.map((w) => w.text.trim()).join(' '), startMs: group[0]!.startMs, endMs: group[group.length - 1]!.endMs });
  }
  if (out.length === 0 && t.text.trim()) out.push({ text: t.text.trim(), startMs: 0, endMs: t.durationMs });
  return out;
}

/** `HH:MM:SS,mmm` (srt) or `HH:MM:SS.mmm` (vtt). */
function stamp(ms: number, sep: string): string {
  const total = Math.max(0, Math.round(ms));
  const h = Math.floor(total / 3_600_000);
  const m = Math.floor((total % 3_600_000) / 60_000);
  const s = Math.floor((total % 60_000) / 1000);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${sep}${pad(total % 1000, 3)}`;
}
