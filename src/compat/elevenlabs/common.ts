/**
 * Pieces of family C (`/compat/elevenlabs`) shared by its REST routes and, later, its
 * WebSocket routes: key authentication, `output_format`, model ids, `X-Service-` native
 * parameters, truthy form options and character timings.
 */
import { parseOutputFormat, snapMp3Bitrate, type OutputFormat } from '../../audio/index.ts';
import { ServiceError } from '../../errors.ts';
import type { Authenticate, Principal } from '../../auth/principal.ts';
import { bearerToken } from '../../http/app.ts';
import { SPEECH_MODEL_IDS } from '../../inference/index.ts';
import { ElevenLabsError } from './errors.ts';

export { ElevenLabsError, sendElevenLabsError, toElevenLabsError, type ElevenLabsStatus } from './errors.ts';

/** Where family C is mounted. */
export const ELEVENLABS_BASE = '/compat/elevenlabs';

// ---------------------------------------------------------------------------------------
// Authentication

/** Messages of the native key check as family C reports them. */
export const ELEVENLABS_AUTH_MESSAGES = { invalid: 'No permission', expired: 'No permission' };

/**
 * The caller from the `xi-api-key` header (or `Authorization: Bearer`, which some clients
 * send). No key → 401 `unauthorized`; a key the native API refuses → 401 `provider_error`
 * `No permission`. `headers` are lower-cased.
 */
export async function authenticateKey(headers: Record<string, string>, authenticate: Authenticate): Promise<Principal> {
  const key = headers['xi-api-key']?.trim() || headers['xi_api_key']?.trim() || bearerToken(headers['authorization']);
  if (!key) throw new ElevenLabsError('unauthorized', 'Missing API key: send it in the xi-api-key header');
  try {
    return await authenticate(key, ELEVENLABS_AUTH_MESSAGES);
  } catch (err) {
    if (err instanceof ServiceError && err.status === 401) throw new ElevenLabsError('provider_error', 'No permission', 401);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------
// output_format (spec rule 3)

export const DEFAULT_OUTPUT_FORMAT = 'mp3_44100_128';

/** Native output settings for an `output_format`. */
export interface ElevenLabsFormat {
  format: OutputFormat;
  sampleRateHz: number;
  /** MP3 only: the bitrate snapped up to a tier (kbit/s). */
  mp3BitrateKbps?: number;
}

/**
 * Parses an `output_format`. Never-accepted values (μ-law, A-law, unknown families,
 * unparsable strings, an MP3 bitrate above the top tier) → 400 `invalid_request`. Whether
 * the sample rate suits the format is left to the native request (a refused rate, the
 * 22.05 kHz family included, fails there as `provider_error` with the native message).
 * The Opus bitrate segment is ignored (automatic).
 */
export function parseElevenLabsFormat(value: string | undefined | null): ElevenLabsFormat {
  const v = value === undefined || value === null || value === '' ? DEFAULT_OUTPUT_FORMAT : value;
  if (/^(ulaw|alaw)_/i.test(v)) throw new ElevenLabsError('invalid_request', `output_format ${v} is not supported: mu-law and A-law output are unavailable`);
  let parsed;
  try {
    parsed = parseOutputFormat(v);
  } catch (err) {
    throw new ElevenLabsError('invalid_request', err instanceof Error ? err.message : 'Unsupported output_format');
  }
  const out: ElevenLabsFormat = { format: parsed.format, sampleRateHz: parsed.sampleRateHz };
  if (parsed.format === 'mp3') {
    try {
      out.mp3BitrateKbps = snapMp3Bitrate(parsed.bitrateKbps ?? 128);
    } catch (err) {
      throw new ElevenLabsError('invalid_request', err instanceof Error ? err.message : 'Unsupported mp3 bitrate');
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Model ids

/**
 * The native speech model for a family C `model_id`: absent → `s2.1-pro`; the vendor's
 * legacy ids (every `eleven_*`) → `s2.1-pro`; `service/<id>` selects that speech model;
 * anything else → 400 `model_not_found`. A real string is required: an unset placeholder
 * (`undefined`, `null`, empty) passed as text is refused the same way.
 */
export function speechModelFor(modelId: unknown): string {
  if (modelId === undefined || modelId === null) return SPEECH_MODEL_IDS[0];
  if (typeof modelId !== 'string') throw new ElevenLabsError('invalid_request', 'model_id must be a string');
  const id = modelId.trim();
  if (/^eleven_[a-z0-9_]+$/i.test(id)) return SPEECH_MODEL_IDS[0];
  const m = /^service\/(.+)$/.exec(id);
  if (m && (SPEECH_MODEL_IDS as readonly string[]).includes(m[1]!)) return m[1]!;
  throw new ElevenLabsError('model_not_found', `Model ${JSON.stringify(modelId)} not found. Use service/${SPEECH_MODEL_IDS.join(', service/')} or a legacy eleven_* id`);
}

// ---------------------------------------------------------------------------------------
// X-Service- native parameters

/** `X-Service-<Name>` header → native request field. */
export const NATIVE_HEADERS: Readonly<Record<string, string>> = {
  'x-service-latency': 'latency',
  'x-service-temperature': 'temperature',
  'x-service-top-p': 'top_p',
  'x-service-repetition-penalty': 'repetition_penalty',
  'x-service-max-new-tokens': 'max_new_tokens',
  'x-service-chunk-length': 'chunk_length',
  'x-service-normalize': 'normalize',
  'x-service-prosody': 'prosody',
  'x-service-reference-id': 'reference_id',
  'x-service-references': 'references',
  'x-service-mp3-bitrate': 'mp3_bitrate',
};

/**
 * Native parameters from `X-Service-*` headers (values parsed as JSON when they parse, else
 * kept as strings). An unknown `X-Service-` name → 400 `invalid_request` (a typo would
 * otherwise be silently ignored).
 */
export function nativeParams(headers: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, raw] of Object.entries(headers)) {
    if (!name.startsWith('x-service-')) continue;
    const field = NATIVE_HEADERS[name];
    if (!field) throw new ElevenLabsError('invalid_request', `Unknown native parameter header ${name}. Supported: ${Object.keys(NATIVE_HEADERS).join(', ')}`);
    out[field] = jsonOrString(raw);
  }
  return out;
}

function jsonOrString(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

// ---------------------------------------------------------------------------------------
// Form options

/** Values that count as unset for a boolean-like option (spec: false, `False`, `0`, `off`). */
const UNSET = new Set(['', 'false', 'False', 'FALSE', '0', 'off', 'Off', 'OFF', 'null', '[]']);

/** Whether a form or query option is truthy (present and not one of the unset spellings). */
export function truthy(value: string | string[] | undefined): boolean {
  if (value === undefined) return false;
  const values = Array.isArray(value) ? value : [value];
  return values.some((v) => !UNSET.has(v.trim()));
}

/** Whether an option is explicitly false (for `enable_logging=false`). */
export function explicitlyFalse(value: string | string[] | undefined): boolean {
  if (value === undefined) return false;
  const values = Array.isArray(value) ? value : [value];
  return values.some((v) => ['false', 'False', 'FALSE', '0', 'off', 'Off', 'OFF'].includes(v.trim()));
}

// ---------------------------------------------------------------------------------------
// Character timings (spec rules 4 and 5)

/** One character's timing in milliseconds (integers) from the start of the audio. */
export interface CharTiming {
  char: string;
  startMs: number;
  endMs: number;
}

/** A word or phrase segment from the backend, milliseconds from the start of the audio. */
export interface SegmentTiming {
  text: string;
  startMs: number;
  endMs: number;
}

/**
 * Interpolates character timings from segment timings, at millisecond precision. Feed the
 * segments in order as they arrive (`push`); each call returns the characters of the text
 * that are now timed: the whitespace and punctuation before the segment (spread over the
 * gap since the previous segment) and the segment's own characters (spread evenly over the
 * segment). `finish(audioEndMs)` times the rest of the text (trailing punctuation, or text
 * no segment matched) between the last segment's end and the end of the audio. Over a
 * whole call the characters spell the text exactly, in order, without overlaps.
 */
export class CharacterTimeline {
  private readonly chars: string[];
  private cursor = 0;
  private lastEndMs: number;

  /** `offsetMs`: where this text's audio starts (0 for REST; the session timeline on a socket). */
  constructor(text: string, offsetMs = 0) {
    this.chars = Array.from(text);
    this.lastEndMs = Math.round(offsetMs);
  }

  push(segment: SegmentTiming): CharTiming[] {
    const wanted = Array.from(segment.text.trim());
    if (wanted.length === 0) return [];
    const at = this.find(wanted);
    if (at < 0) return []; // text the backend changed (normalization): timed at the end
    const start = Math.max(this.lastEndMs, Math.round(segment.startMs));
    const end = Math.max(start, Math.round(segment.endMs));
    const out = spread(this.chars.slice(this.cursor, at), this.lastEndMs, start);
    out.push(...spread(wanted, start, end));
    this.cursor = at + wanted.length;
    this.lastEndMs = end;
    return out;
  }

  finish(audioEndMs: number): CharTiming[] {
    const end = Math.max(this.lastEndMs, Math.round(audioEndMs));
    const out = spread(this.chars.slice(this.cursor), this.lastEndMs, end);
    this.cursor = this.chars.length;
    this.lastEndMs = end;
    return out;
  }

  /** Index (in code points) of `wanted` in the text at or after the cursor, or -1. */
  private find(wanted: string[]): number {
    outer: for (let i = this.cursor; i + wanted.length <= this.chars.length; i++) {
      for (let j = 0; j < wanted.length; j++) if (this.chars[i + j] !== wanted[j]) continue outer;
      return i;
    }
    return -1;
  }
}

/** Spreads characters evenly over [startMs, endMs], rounding boundaries to whole milliseconds. */
function spread(chars: string[], startMs: number, endMs: number): CharTiming[] {
  const n = chars.length;
  return chars.map((char, i) => ({
    char,
    startMs: Math.round(startMs + ((endMs - startMs) * i) / n),
    endMs: Math.round(startMs + ((endMs - startMs) * (i + 1)) / n),
  }));
}

/** REST alignment: snake_case keys, seconds. */
export interface RestAlignment {
  characters: string[];
  character_start_times_seconds: number[];
  character_end_times_seconds: number[];
}

/** REST alignment of timed characters (null when there are none). */
export function restAlignment(chars: CharTiming[]): RestAlignment | null {
  if (chars.length === 0) return null;
  return {
    characters: chars.map((c) => c.char),
    character_start_times_seconds: chars.map((c) => c.startMs / 1000),
    character_end_times_seconds: chars.map((c) => c.endMs / 1000),
  };
}

/** WebSocket alignment: camelCase keys, milliseconds (for the stream-input routes). */
export function wsAlignment(chars: CharTiming[]): { chars: string[]; charStartTimesMs: number[]; charDurationsMs: number[] } | null {
  if (chars.length === 0) return null;
  return { chars: chars.map((c) => c.char), charStartTimesMs: chars.map((c) => c.startMs), charDurationsMs: chars.map((c) => c.endMs - c.startMs) };
}
