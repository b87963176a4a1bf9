/**
 * `POST …/chat/completions` of families A, B and Groq-style (docs/api/compat.md "Chat
 * completions"): chat-modality audio without a language model.
 *
 * - Audio out (`modalities` containing `"audio"`, `audio: {voice, format}`): the last user
 *   message's text is synthesized; the answer carries it in `choices[0].message.audio`
 *   (`id`, base64 `data`, `expires_at`, `transcript` = the spoken text) with `content: null`.
 *   `stream: true` sends the audio as SSE chunks whose base64 pieces concatenate.
 * - Audio in (an `input_audio` part in the last user message): `content` holds the
 *   transcript.
 * - `n` other than 1, audio in and out in one call, and a call asking for neither are 400.
 *
 * D-COMPAT-8 records the choices.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { badParam } from '../errors.ts';
import { resolveModel } from './models.ts';
import { schemaError, toNativeSpeech, type NativeSpeech } from './speech.ts';

/** Chat audio output formats and the speech `response_format` each maps to. */
const CHAT_FORMATS: Record<string, string> = { wav: 'wav', mp3: 'mp3', opus: 'opus', pcm16: 'pcm16' };

/**
 * Chat-model aliases of the vendor (the official client's examples name them): they select
 * `service/s2.1-pro` for audio out and `service/transcribe-1` for audio in.
 */
export const CHAT_MODEL_ALIASES = new Set(['gpt-4o-audio-preview', 'gpt-4o-mini-audio-preview', 'gpt-audio', 'gpt-audio-mini']);

/** How long the answer says its audio stays referable (nothing is stored; the vendor's window). */
export const AUDIO_EXPIRY_S = 3600;

const part = z.object({
  type: z.string(),
  text: z.string().optional(),
  input_audio: z.object({ data: z.string(), format: z.string().optional() }).optional(),
});

const message = z.object({
  role: z.string(),
  content: z.union([z.string(), z.array(part)]).nullish(),
});

/** The request. Unknown fields (temperature, max_tokens, …) are ignored, as on the other routes. */
export const chatRequestSchema = z.object({
  model: z.string(),
  messages: z.array(message).min(1),
  modalities: z.array(z.enum(['text', 'audio'])).optional(),
  audio: z.object({ voice: z.union([z.string(), z.object({ id: z.string() })]), format: z.string() }).optional(),
  n: z.number().int().optional(),
  stream: z.boolean().optional(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).optional(),
  provider: z.unknown().optional(),
});

export type ChatRequest =
  | { kind: 'speak'; model: string; native: NativeSpeech; transcript: string; stream: boolean; includeUsage: boolean }
  | { kind: 'transcribe'; model: string; native: string; audio: Uint8Array[]; stream: boolean; includeUsage: boolean };

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/** Reads and validates a chat request; everything it throws is the layer's own 400. */
export function readChatRequest(raw: unknown, headers: Record<string, string>, routerStyle: boolean): ChatRequest {
  if (!isObject(raw)) throw badParam('body', 'The request body must be a JSON object');
  const parsed = chatRequestSchema.safeParse(raw);
  if (!parsed.success) throw schemaError(parsed.error);
  const r = parsed.data;
  if (r.n !== undefined && r.n !== 1) throw badParam('n', 'n must be 1: one choice per call');

  const lastUser = [...r.messages].reverse().find((m) => m.role === 'user');
  if (!lastUser) throw badParam('messages', 'messages needs a user message');
  const parts = typeof lastUser.content === 'string' ? [{ type: 'text', text: lastUser.content }] : (lastUser.content ?? []);
  for (const p of parts) {
    if (p.type !== 'text' && p.type !== 'input_audio') throw badParam('messages', `Content part type ${JSON.stringify(p.type)} is not supported: send text or input_audio parts`);
  }
  const audioParts = parts.filter((p) => p.type === 'input_audio');
  const audioOut = r.modalities?.includes('audio') ?? false;
  const stream = r.stream ?? false;
  const includeUsage = r.stream_options?.include_usage ?? false;

  if (audioParts.length && audioOut) {
    throw badParam('modalities', 'Audio in and audio out in one call is not supported: transcribe (input_audio, modalities ["text"]) or speak (text, modalities ["text","audio"]) per call');
  }
  if (audioParts.length) {
    const audio = audioParts.map((p) => {
      const data = p.input_audio?.data;
      if (typeof data !== 'string' || data === '' || !BASE64.test(data)) throw badParam('messages', 'input_audio.data must be standard base64 audio');
      return new Uint8Array(Buffer.from(data, 'base64'));
    });
    return { kind: 'transcribe', model: r.model, native: chatModel(r.model, 'transcription'), audio, stream, includeUsage };
  }
  if (!audioOut) {
    throw badParam('modalities', 'This endpoint serves chat-modality audio only: ask for modalities ["text","audio"] with audio {voice, format}, or send an input_audio part');
  }
  if (!r.audio) throw badParam('audio', 'modalities includes "audio": send audio {voice, format}');
  const format = CHAT_FORMATS[r.audio.format.toLowerCase()];
  if (!format) throw badParam('audio.format', `audio.format ${JSON.stringify(r.audio.format)} is not supported. Supported: ${Object.keys(CHAT_FORMATS).join(', ')}`);
  const text = parts.map((p) => p.text ?? '').join('');
  if (text.trim() === '') throw badParam('messages', 'The last user message has no text to speak');
  const speechModel = CHAT_MODEL_ALIASES.has(bare(r.model)) ? 'service/s2.1-pro' : r.model;
  const native = toNativeSpeech(
    { model: speechModel, input: text, voice: r.audio.voice, response_format: format, ...(r.provider !== undefined ? { provider: r.provider } : {}) },
    headers,
    routerStyle,
  );
  return { kind: 'speak', model: r.model, native, transcript: text, stream, includeUsage };
}

const bare = (model: string) => (model.startsWith('openai/') ? model.slice('openai/'.length) : model).trim();

function chatModel(model: string, kind: 'speech' | 'transcription'): string {
  if (CHAT_MODEL_ALIASES.has(bare(model))) return kind === 'speech' ? 's2.1-pro' : 'transcribe-1';
  return resolveModel(model, kind);
}

export const completionId = () => `chatcmpl-${randomBytes(12).toString('hex')}`;
export const audioId = () => `audio_${randomBytes(12).toString('hex')}`;
const nowS = () => Math.floor(Date.now() / 1000);

/** No language model runs: no tokens are counted. */
const USAGE = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

/** The non-streamed answer (`chat.completion`). */
export function completion(id: string, model: string, message: Record<string, unknown>): Record<string, unknown> {
  return {
    id,
    object: 'chat.completion',
    created: nowS(),
    model,
    choices: [{ index: 0, message: { role: 'assistant', refusal: null, annotations: [], ...message }, logprobs: null, finish_reason: 'stop' }],
    usage: USAGE,
    system_fingerprint: null,
  };
}

/** One SSE event of a streamed answer (`chat.completion.chunk`). */
export function chunkEvent(id: string, model: string, delta: Record<string, unknown>, finish: 'stop' | null = null): string {
  const chunk = { id, object: 'chat.completion.chunk', created: nowS(), model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] };
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

/** The usage chunk (`stream_options.include_usage`): no choices. */
export function usageEvent(id: string, model: string): string {
  return `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: nowS(), model, choices: [], usage: USAGE })}\n\n`;
}

/** A failure after the stream started: an SSE error payload (the clients throw on it). */
export function errorEvent(status: number, message: string): string {
  return `data: ${JSON.stringify({ error: { code: status, message, type: status >= 500 ? 'server_error' : 'provider_error' } })}\n\n`;
}

export const DONE_EVENT = 'data: [DONE]\n\n';

export const expiresAt = () => nowS() + AUDIO_EXPIRY_S;

