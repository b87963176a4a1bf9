/**
 * Family C text to speech (docs/api/compat.md "Family C"):
 * `POST /v1/text-to-speech/{voice_id}` and its `/stream`, `/with-timestamps` and
 * `/stream/with-timestamps` variants, translated into the native synthesis service.
 */
import { z } from 'zod';
import { ServiceError } from '../../errors.ts';
import { isJson, parseJson } from '../../http/body.ts';
import type { Ctx } from '../../http/router.ts';
import { parse } from '../../validation.ts';
import { join, type Caller, type Prepared, type TtsService } from '../../speech/tts.ts';
import { CharacterTimeline, ElevenLabsError, nativeParams, parseElevenLabsFormat, restAlignment, speechModelFor, type CharTiming } from './common.ts';

/** Family C JSON bodies (docs/api/compat.md: 140 MiB). */
export const ELEVENLABS_JSON_LIMIT = 140 * 1024 * 1024;

const voiceSettings = z.object({
  stability: z.number().min(0).max(1).optional(),
  speed: z.number().optional(),
  // Accepted and ignored (spec rule 2).
  similarity_boost: z.number().optional(),
  style: z.number().optional(),
  use_speaker_boost: z.boolean().optional(),
});

/**
 * The vendor body. Listed fields are type-checked; `similarity_boost`, `style`,
 * `use_speaker_boost`, `language_code`, `seed` and the other vendor fields are accepted and
 * ignored; unknown keys are dropped.
 */
export const elevenLabsTtsSchema = z.object({
  text: z.string(),
  model_id: z.string().optional(),
  voice_settings: voiceSettings.optional(),
  language_code: z.string().optional(),
  seed: z.number().int().optional(),
});
export type ElevenLabsTtsBody = z.output<typeof elevenLabsTtsSchema>;

/** Removes explicit nulls at the top level and in `voice_settings` (the vendor allows them). */
function withoutNulls(v: unknown): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = k === 'voice_settings' ? withoutNulls(x) : x;
  return out;
}

export interface TtsTranslation {
  /** The native request body. */
  body: Record<string, unknown>;
  /** The native `model` header. */
  model: string;
}

/**
 * The native request for a family C one. Mapping: `voice_id` → `reference_id` (`default`
 * and `-` → the model's default voice), `output_format` → format, sample rate and MP3
 * bitrate, `voice_settings.speed` → `prosody.speed`, `stability` → `temperature = 1 −
 * stability`. `X-Service-*` headers override mapped values (header > mapped).
 * `allowReferences`: the timestamp routes refuse reference audio (docs/api/compat.md).
 */
export function translateTts(raw: unknown, voiceId: string, outputFormat: string | undefined, headers: Record<string, string>, allowReferences = true): TtsTranslation {
  const b = parse(elevenLabsTtsSchema, withoutNulls(raw));
  const model = speechModelFor(b.model_id);
  const f = parseElevenLabsFormat(outputFormat);
  const native = nativeParams(headers);
  if (!allowReferences && native.references !== undefined) {
    throw new ElevenLabsError('invalid_request', 'Reference audio (X-Service-References) is not supported on the timestamp routes');
  }
  const body: Record<string, unknown> = { text: b.text, format: f.format, sample_rate: f.sampleRateHz };
  if (f.mp3BitrateKbps !== undefined) body.mp3_bitrate = f.mp3BitrateKbps;
  if (voiceId !== 'default' && voiceId !== '-' && voiceId !== '') body.reference_id = voiceId;
  const vs = b.voice_settings;
  if (vs?.speed !== undefined) body.prosody = { speed: vs.speed };
  if (vs?.stability !== undefined) body.temperature = Math.round((1 - vs.stability) * 1e6) / 1e6;
  for (const [k, v] of Object.entries(native)) {
    if (k === 'prosody' && v && typeof v === 'object' && !Array.isArray(v)) body.prosody = { ...((body.prosody as object) ?? {}), ...(v as object) };
    else body[k] = v;
  }
  return { body, model };
}

/** Reads the JSON body of a family C request (anything else → 400 `invalid_request`). */
export function readJsonBody(ctx: Ctx): unknown {
  if (!ctx.rawBody || ctx.rawBody.length === 0) throw new ElevenLabsError('invalid_request', 'A JSON body is required');
  if (!isJson(ctx.headers['content-type'])) throw new ElevenLabsError('invalid_request', 'The body must be application/json');
  try {
    return parseJson(ctx.rawBody);
  } catch (err) {
    if (err instanceof ServiceError && err.code !== 'malformed') throw err; // NUL, surrogate, nesting: named
    throw new ElevenLabsError('invalid_request', 'Malformed JSON');
  }
}

/** Timed characters and audio of one synthesis, chunk by chunk. */
export interface TimedChunk {
  audio: Uint8Array;
  chars: CharTiming[];
}

/**
 * Runs one synthesis (`TtsService.synthesize`) and hands each backend chunk's encoded
 * audio, with the characters that became audible in it, to `deliver` (awaited: the
 * consumer's backpressure holds the backend). The last delivery carries the encoder's tail
 * and the trailing characters. Resolves when done or cancelled; throws the native error on
 * failure. Usage and the request span are settled as on the native routes.
 */
export async function synthesizeTimed(tts: TtsService, p: Prepared, caller: Caller, deliver: (c: TimedChunk) => Promise<void> | void): Promise<void> {
  const timeline = new CharacterTimeline(p.req.body.text);
  let audioEndMs = 0;
  await tts.synthesize(p, caller, ({ chunk, bytes }) => {
    if (!chunk) return deliver({ audio: bytes, chars: timeline.finish(audioEndMs) });
    audioEndMs = Math.max(audioEndMs, chunk.offsetMs + chunk.durationMs);
    const chars: CharTiming[] = [];
    for (const s of chunk.alignment?.segments ?? []) chars.push(...timeline.push({ text: s.text, startMs: s.startMs, endMs: s.endMs }));
    if (bytes.length === 0 && chars.length === 0) return undefined;
    return deliver({ audio: bytes, chars });
  });
}

export const b64 = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');

/** `/with-timestamps`: the whole audio and alignment in one JSON object. */
export async function timestampsJson(tts: TtsService, p: Prepared, caller: Caller): Promise<{ audio_base64: string; alignment: ReturnType<typeof restAlignment>; normalized_alignment: ReturnType<typeof restAlignment> }> {
  const audio: Uint8Array[] = [];
  const chars: CharTiming[] = [];
  await synthesizeTimed(tts, p, caller, (c) => {
    audio.push(c.audio);
    chars.push(...c.chars);
  });
  if (caller.signal.aborted) throw new ElevenLabsError('invalid_request', 'client closed the request');
  const alignment = restAlignment(chars);
  // Rule 5: normalized_alignment is identical to alignment, field for field.
  return { audio_base64: b64(join(audio)), alignment, normalized_alignment: alignment && structuredClone(alignment) };
}

/** One NDJSON line of `/stream/with-timestamps`. */
export function ndjsonLine(c: TimedChunk): string {
  const alignment = restAlignment(c.chars);
  return JSON.stringify({ audio_base64: b64(c.audio), alignment, normalized_alignment: alignment }) + '\n';
}
