/**
 * The native synthesis request (`POST /v1/tts`, `/v1/tts/stream/with-timestamp` and the
 * `start` frame of `wss /v1/tts/live`): one zod schema for JSON and MessagePack bodies,
 * the `model` header, and the mapping to the backend's `SynthesizeRequest`.
 *
 * Rules (D-TTS-1):
 * - explicit `null` anywhere in the body is treated as absent (fish-audio-sdk sends nils);
 * - unknown keys are ignored, not refused (the Fish clients send `model_id` and others);
 * - a value of the wrong type or outside its range → 422 list; a sample rate the format
 *   does not allow and text over 20,000 characters → 400 (`Invalid sample rate …`);
 * - `references[].audio` is raw bytes in MessagePack and standard base64 in JSON.
 */
import { z } from 'zod';
import { checkFormat, defaultSampleRateHz, OPUS_BITRATE_AUTO, sniffFormat, type OutputFormat } from '../audio/index.ts';
import { ServiceError } from '../errors.ts';
import { MAX_BODY_DEPTH, parse } from '../validation.ts';
import { AudioEncoding, LatencyMode } from '../gen/inference/v1/inference_pb.ts';
import { SPEECH_MODEL_IDS, type SynthesizeInput } from '../inference/index.ts';

/** Longest text one request may carry, in Unicode code points (D-TTS-1). */
export const MAX_TEXT_CHARS = 20_000;

/** Opus bitrates the API names: automatic, or these in bit/s (kbit/s values are scaled). */
export const OPUS_BITRATES = [24_000, 32_000, 48_000, 64_000] as const;

/**
 * Replaces explicit nulls by absence, recursively through plain objects and arrays. Bodies
 * arrive depth-checked (`checkBodyValue`); the bound here keeps other callers (WebSocket
 * frames) from overflowing the stack too: deeper → 400.
 */
export function dropNulls(value: unknown, depth = 0): unknown {
  if (value === null) return undefined;
  if (depth > MAX_BODY_DEPTH && value && typeof value === 'object') throw new ServiceError('bad_request', `Request nested deeper than ${MAX_BODY_DEPTH} levels`);
  if (Array.isArray(value)) return value.map((v) => dropNulls(v, depth + 1));
  if (value && typeof value === 'object' && !(value instanceof Uint8Array) && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== null) out[k] = dropNulls(v, depth + 1);
    return out;
  }
  return value;
}

const bytes = z.union([
  z.instanceof(Uint8Array),
  z
    .string()
    .regex(/^[A-Za-z0-9+/]*={0,2}$/, 'Expected standard base64')
    .transform((s) => new Uint8Array(Buffer.from(s, 'base64'))),
]);

const reference = z.object({ audio: bytes, text: z.string().max(MAX_TEXT_CHARS).default('') });

const prosody = z.object({
  speed: z.number().min(0.5).max(2).default(1),
  volume: z.number().min(-20).max(20).default(0),
  normalize_loudness: z.boolean().default(true),
});

/** The request body; unknown keys are dropped (zod's default), nulls were removed before. */
export const ttsRequestSchema = z.object({
  text: z.string(),
  reference_id: z.union([z.string().min(1).max(256), z.array(z.string().min(1).max(256)).min(1).max(8)]).optional(),
  references: z.union([z.array(reference).max(20), z.array(z.array(reference).max(20)).max(8)]).default([]),
  format: z.enum(['mp3', 'wav', 'pcm', 'opus']).default('mp3'),
  sample_rate: z.number().int().positive().optional(),
  mp3_bitrate: z.literal([64, 128, 192]).default(128),
  // The official client documents kbit/s (24|32|48|64); the API docs bit/s. Both are accepted.
  opus_bitrate: z.literal([OPUS_BITRATE_AUTO, 24, 32, 48, 64, ...OPUS_BITRATES]).default(OPUS_BITRATE_AUTO),
  prosody: prosody.optional(),
  latency: z.enum(['balanced', 'normal']).default('balanced'),
  chunk_length: z.number().int().min(100).max(300).default(200),
  min_chunk_length: z.number().int().min(0).max(100).default(50),
  temperature: z.number().min(0).max(1).default(0.7),
  top_p: z.number().min(0).max(1).default(0.7),
  repetition_penalty: z.number().min(1).max(2).default(1.2),
  max_new_tokens: z.number().int().min(1).max(2048).default(1024),
  normalize: z.boolean().default(true),
  condition_on_previous_chunks: z.boolean().default(true),
  early_stop_threshold: z.number().min(0).max(1).default(1),
  features: z.array(z.string().max(64)).max(16).default([]),
});

export type TtsRequest = z.output<typeof ttsRequestSchema>;
type RawReference = z.output<typeof reference>;

/** A validated request with its resolved output settings and model. */
export interface SynthesisRequest {
  body: TtsRequest;
  model: string;
  format: OutputFormat;
  sampleRateHz: number;
  /** Opus bitrate in bit/s, or -1000 (automatic). */
  opusBitrate: number;
  /** Length of `text` in code points (what usage counts). */
  characters: number;
}

/** The `model` header: one of the speech model ids, anything else (or nothing) → s2.1-pro. */
export function modelFromHeader(value: string | undefined): string {
  const v = value?.trim().toLowerCase();
  return v && (SPEECH_MODEL_IDS as readonly string[]).includes(v) ? v : SPEECH_MODEL_IDS[0];
}

/**
 * Validates a body. `requireText`: `/v1/tts` needs non-empty text; the live `start` frame
 * usually carries none. Throws 422 (schema) or 400 (sample rate, text length).
 */
export function parseSynthesisRequest(raw: unknown, modelHeader: string | undefined, opts: { requireText: boolean; where?: 'body' } = { requireText: true }): SynthesisRequest {
  const body = parse(ttsRequestSchema, dropNulls(raw), opts.where ?? 'body');
  const characters = countChars(body.text);
  if (opts.requireText && body.text.trim().length === 0) {
    throw new ServiceError('invalid', 'Text must not be empty', { fields: [{ type: 'too_small_string', loc: ['body', 'text'], msg: 'Text must not be empty', ctx: { minimum: 1 } }] });
  }
  if (characters > MAX_TEXT_CHARS) throw new ServiceError('bad_request', `Text exceeds ${MAX_TEXT_CHARS} characters (got ${characters})`);
  const sampleRateHz = body.sample_rate ?? defaultSampleRateHz(body.format);
  checkFormat(body.format, sampleRateHz, body.mp3_bitrate);
  const ob = body.opus_bitrate;
  const opusBitrate = ob === OPUS_BITRATE_AUTO ? ob : ob < 1000 ? ob * 1000 : ob;
  return { body, model: modelFromHeader(modelHeader), format: body.format, sampleRateHz, opusBitrate, characters };
}

export function countChars(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** A stored voice as the voice-model service resolves it (src/voices/service.ts). */
export interface ResolvedVoice {
  referenceId: string;
  references: { audio: Uint8Array; text: string }[];
}

/** Looks up a `reference_id` for a team; throws 400 `Reference not found` for an unusable one. */
export type VoiceResolver = (teamId: string, referenceId: string) => Promise<ResolvedVoice>;

function encodingOf(audio: Uint8Array): AudioEncoding {
  switch (sniffFormat(audio)) {
    case 'wav':
      return AudioEncoding.WAV;
    case 'mp3':
      return AudioEncoding.MP3;
    case 'ogg-opus':
      return AudioEncoding.OGG_OPUS;
    default:
      return AudioEncoding.UNSPECIFIED;
  }
}

const toReference = (r: RawReference | ResolvedVoice['references'][number], speaker = '') => ({
  audio: r.audio,
  text: r.text,
  speaker,
  input: { encoding: encodingOf(r.audio) },
});

/**
 * The backend request for a validated one. Stored voices (`reference_id`) are resolved
 * through `resolve` (team scoped) and travel as reference audio; a resolver answer with no
 * audio passes its id on (a voice the backend itself knows). Audio always comes back as
 * raw PCM at the wanted rate; the platform encodes.
 */
export async function toBackendRequest(req: SynthesisRequest, teamId: string, resolve: VoiceResolver, text = req.body.text): Promise<SynthesizeInput> {
  const b = req.body;
  const references: ReturnType<typeof toReference>[] = [];
  let referenceId = '';
  const ids = b.reference_id === undefined ? [] : Array.isArray(b.reference_id) ? b.reference_id : [b.reference_id];
  const multi = ids.length > 1;
  for (const [i, id] of ids.entries()) {
    const voice = await resolve(teamId, id);
    if (voice.references.length) references.push(...voice.references.map((r) => toReference(r, multi ? String(i) : '')));
    else if (!multi) referenceId = voice.referenceId;
  }
  if (ids.length === 0) {
    const refs = b.references;
    if (refs.length && Array.isArray(refs[0])) (refs as RawReference[][]).forEach((group, i) => references.push(...group.map((r) => toReference(r, String(i)))));
    else references.push(...(refs as RawReference[]).map((r) => toReference(r)));
  }
  return {
    text,
    model: req.model,
    referenceId,
    references,
    prosody: { speed: b.prosody?.speed ?? 1, volumeDb: b.prosody?.volume ?? 0 },
    temperature: b.temperature,
    topP: b.top_p,
    repetitionPenalty: b.repetition_penalty,
    maxNewTokens: b.max_new_tokens,
    chunkLength: b.chunk_length,
    latency: b.latency === 'normal' ? LatencyMode.NORMAL : LatencyMode.BALANCED,
    normalize: b.normalize,
    output: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: req.sampleRateHz, allowOtherRate: true },
  };
}
