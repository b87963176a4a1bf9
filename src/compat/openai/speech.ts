/**
 * `POST …/audio/speech` of families A, B and Groq-style (docs/api/compat.md), translated into a
 * native synthesis body for `TtsService.prepare`. D-COMPAT-1 to D-COMPAT-4
 * record the choices made here.
 */
import { z } from 'zod';
import { checkFormat, MP3_BITRATE_TIERS, type OutputFormat } from '../../audio/index.ts';
import { ServiceError } from '../../errors.ts';
import { dropNulls } from '../../speech/request.ts';
import { badParam } from '../errors.ts';
import { resolveModel } from './models.ts';

/** Speed range the families accept; the native range is 0.5–2.0 (values in between are clamped). */
export const COMPAT_SPEED = { min: 0.25, max: 4 } as const;
export const NATIVE_SPEED = { min: 0.5, max: 2 } as const;

/**
 * Native parameters reachable from a compat request, through `X-Service-<Param>` headers
 * (`top_p` → `X-Service-Top-P`) or the `provider.options.service` block.
 */
export const NATIVE_PARAMS = [
  'temperature',
  'top_p',
  'repetition_penalty',
  'max_new_tokens',
  'chunk_length',
  'latency',
  'normalize',
  'prosody',
  'references',
  'reference_id',
  'mp3_bitrate',
] as const;
export type NativeParam = (typeof NATIVE_PARAMS)[number];

/** `top_p` → `x-service-top-p` (request headers arrive lower-cased). */
export const headerFor = (p: NativeParam) => `x-service-${p.replace(/_/g, '-')}`;

/** Voice names of the vendors' preset catalogs: they do not exist here (docs/api/compat.md). */
export const PRESET_VOICES = new Set([
  'alloy', 'ash', 'ballad', 'cedar', 'coral', 'echo', 'fable', 'marin', 'nova', 'onyx', 'sage', 'shimmer', 'verse',
]);

/** Response formats: the wire name → native format and default rate. */
const FORMATS: Record<string, { format: OutputFormat; sampleRateHz: number }> = {
  mp3: { format: 'mp3', sampleRateHz: 44100 },
  wav: { format: 'wav', sampleRateHz: 44100 },
  opus: { format: 'opus', sampleRateHz: 48000 },
  pcm: { format: 'pcm', sampleRateHz: 44100 },
  pcm16: { format: 'pcm', sampleRateHz: 24000 },
};
export const DEFAULT_RESPONSE_FORMAT = 'pcm';

const inputReference = z.union([
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({ type: z.literal('input_audio'), input_audio: z.object({ data: z.string(), format: z.string().optional() }) }),
]);

/** The request body. Unknown fields are dropped (docs/api/compat.md); nulls count as absent. */
export const speechRequestSchema = z.object({
  model: z.string(),
  input: z.string(),
  voice: z.union([z.string(), z.object({ id: z.string() })]).optional(),
  response_format: z.string().optional(),
  speed: z.number().optional(),
  instructions: z.string().optional(),
  stream_format: z.string().optional(),
  sample_rate: z.number().int().optional(),
  // Family B only (ignored on the other paths):
  temperature: z.number().optional(),
  top_p: z.number().optional(),
  repetition_penalty: z.number().optional(),
  input_references: z.array(inputReference).optional(),
  provider: z.object({ options: z.object({ service: z.record(z.string(), z.unknown()).optional() }).optional() }).optional(),
});

export interface NativeSpeech {
  /** The native model id (the native `model` header). */
  model: string;
  /** The native body for `TtsService.prepare`. */
  body: Record<string, unknown>;
}

/** A zod failure as the layer's 400, naming the first field at fault. */
export function schemaError(error: z.ZodError): ServiceError {
  const issue = error.issues[0]!;
  const param = issue.path.join('.') || 'body';
  return badParam(param, `Invalid ${param}: ${issue.message}`);
}

/** Header values are parsed as JSON when possible, else taken as the string. */
function headerValue(v: string): unknown {
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

const BY_HEADER = new Map<string, NativeParam>(NATIVE_PARAMS.map((p) => [headerFor(p), p]));

/**
 * Native parameters named by `X-Service-<Param>` headers. The set is closed (D-COMPAT-4): an `X-Service-` header naming no listed parameter is the
 * layer's 400, in every family, so a misspelt parameter never goes silently unapplied.
 */
export function nativeFromHeaders(headers: Record<string, string>): Partial<Record<NativeParam, unknown>> {
  const out: Partial<Record<NativeParam, unknown>> = {};
  for (const [name, v] of Object.entries(headers)) {
    if (!name.startsWith('x-service-')) continue;
    const p = BY_HEADER.get(name);
    if (!p) throw badParam(name, `Unknown native parameter header ${name}. Supported: ${[...BY_HEADER.keys()].join(', ')}`);
    out[p] = headerValue(v);
  }
  return out;
}

/** `provider.options.service`: the same closed set as the headers. */
function pick(src: Record<string, unknown> | undefined): Partial<Record<NativeParam, unknown>> {
  const out: Partial<Record<NativeParam, unknown>> = {};
  if (!src) return out;
  for (const [k, v] of Object.entries(src)) {
    if (!(NATIVE_PARAMS as readonly string[]).includes(k)) {
      throw badParam(`provider.options.service.${k}`, `Unknown native parameter ${k}. Supported: ${NATIVE_PARAMS.join(', ')}`);
    }
    if (v !== undefined && v !== null) out[k as NativeParam] = v;
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);

/**
 * Translates a speech request. `routerStyle`: family B (`/compat/api/v1`), where top-level
 * `temperature`, `top_p`, `repetition_penalty` and `input_references` are read.
 * Precedence of native values: header > `provider.options.service` > top-level > mapped.
 */
export function toNativeSpeech(raw: unknown, headers: Record<string, string>, routerStyle: boolean): NativeSpeech {
  if (!isObject(raw)) throw badParam('body', 'The request body must be a JSON object');
  const parsed = speechRequestSchema.safeParse(dropNulls(raw));
  if (!parsed.success) throw schemaError(parsed.error);
  const r = parsed.data;

  const model = resolveModel(r.model, 'speech');
  if (r.input.trim().length === 0) throw badParam('input', 'input must not be empty');
  if (r.instructions !== undefined && r.instructions.trim() !== '') {
    throw badParam('instructions', 'instructions are not supported: steer the delivery with the text itself or a voice');
  }
  if (r.stream_format !== undefined && r.stream_format !== 'audio') {
    throw badParam('stream_format', `stream_format ${JSON.stringify(r.stream_format)} is not supported; only "audio" (a raw audio stream)`);
  }

  const formatName = (r.response_format ?? DEFAULT_RESPONSE_FORMAT).toLowerCase();
  const fmt = FORMATS[formatName];
  if (!fmt) {
    throw badParam('response_format', `response_format ${JSON.stringify(r.response_format)} is not supported. Supported: ${Object.keys(FORMATS).join(', ')}`);
  }
  const sampleRateHz = r.sample_rate ?? fmt.sampleRateHz;
  try {
    checkFormat(fmt.format, sampleRateHz);
  } catch (err) {
    throw badParam('sample_rate', (err as Error).message);
  }

  // Mapped values (lowest precedence).
  const mapped: Record<string, unknown> = { latency: 'balanced' };
  const voice = typeof r.voice === 'string' ? r.voice : r.voice?.id;
  if (voice !== undefined && voice !== '' && voice !== 'default') {
    if (PRESET_VOICES.has(voice.toLowerCase())) {
      throw badParam('voice', `Voice ${JSON.stringify(voice)} is a vendor preset name; presets do not exist here. Use a voice id from your library, or "" for the model's default voice`);
    }
    mapped.reference_id = voice;
  }
  if (r.speed !== undefined) {
    if (!(r.speed >= COMPAT_SPEED.min && r.speed <= COMPAT_SPEED.max)) {
      throw badParam('speed', `speed must be between ${COMPAT_SPEED.min} and ${COMPAT_SPEED.max}`);
    }
    mapped.prosody = { speed: Math.min(NATIVE_SPEED.max, Math.max(NATIVE_SPEED.min, r.speed)) };
  }
  const topLevel: Record<string, unknown> = {};
  if (routerStyle) {
    if (r.temperature !== undefined) topLevel.temperature = r.temperature;
    if (r.top_p !== undefined) topLevel.top_p = r.top_p;
    if (r.repetition_penalty !== undefined) topLevel.repetition_penalty = r.repetition_penalty;
    if (r.input_references?.length) topLevel.references = pairReferences(r.input_references);
  }
  const options = pick(r.provider?.options?.service);
  const fromHeaders = nativeFromHeaders(headers);

  const body: Record<string, unknown> = { ...mapped, ...topLevel, ...options, ...fromHeaders };
  // prosody merges field by field in the same order.
  const prosodies = [mapped.prosody, options.prosody, fromHeaders.prosody].filter(isObject);
  if (prosodies.length) body.prosody = Object.assign({}, ...prosodies);
  if (body.latency === 'low') body.latency = 'balanced';
  if (body.mp3_bitrate !== undefined && !(MP3_BITRATE_TIERS as readonly unknown[]).includes(body.mp3_bitrate)) {
    throw badParam('mp3_bitrate', `mp3_bitrate ${JSON.stringify(body.mp3_bitrate)} is not a supported tier. Supported: ${MP3_BITRATE_TIERS.join(', ')}`);
  }
  // A voice named in native parameters wins over the `voice` field; references over both.
  if (body.references !== undefined && fromHeaders.reference_id === undefined && options.reference_id === undefined) delete body.reference_id;
  body.text = r.input;
  body.format = fmt.format;
  body.sample_rate = sampleRateHz;
  return { model, body };
}

/** Router-style `input_references`: audio items paired in order with text items (their transcripts). */
function pairReferences(items: z.output<typeof inputReference>[]): { audio: string; text: string }[] {
  const audios = items.flatMap((i) => (i.type === 'input_audio' ? [i.input_audio.data] : []));
  const texts = items.flatMap((i) => (i.type === 'text' ? [i.text] : []));
  return audios.map((audio, i) => ({ audio, text: texts[i] ?? '' }));
}
