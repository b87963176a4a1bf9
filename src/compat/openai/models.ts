/**
 * Model ids of families A, B and Groq-style (docs/api/compat.md): the `service/…` ids, the vendor
 * aliases that map onto them, and the catalog served at `GET …/models` (router `Model`
 * schema, which the plain OpenAI-style clients also read).
 */
import { costMicros } from '../../speech/usage.ts';
import { badParam } from '../errors.ts';

export type ModelKind = 'speech' | 'transcription';

interface CatalogModel {
  /** Native id (what the `model` header of the native API names). */
  native: string;
  kind: ModelKind;
  name: string;
  description: string;
}

const CATALOG: readonly CatalogModel[] = [
  { native: 's2.1-pro', kind: 'speech', name: 'S2.1 Pro', description: 'Text to speech, recommended for production.' },
  { native: 's2.1-pro-free', kind: 'speech', name: 'S2.1 Pro (free)', description: 'Text to speech at zero price, without time-to-first-audio guarantees.' },
  { native: 's2-pro', kind: 'speech', name: 'S2 Pro', description: 'Text to speech, previous generation (multi-speaker).' },
  { native: 's1', kind: 'speech', name: 'S1', description: 'Text to speech, previous generation (emotion tags).' },
  { native: 'transcribe-1', kind: 'transcription', name: 'Transcribe 1', description: 'Speech to text with word timestamps; no language hint needed.' },
];

/** Vendor aliases (family A and Groq), also accepted with the router-style `openai/` prefix. */
const ALIASES: Record<string, string> = {
  'tts-1': 's2.1-pro',
  'tts-1-hd': 's2.1-pro',
  'gpt-4o-mini-tts': 's2.1-pro',
  'playai-tts': 's2.1-pro',
  'whisper-1': 'transcribe-1',
  'gpt-4o-transcribe': 'transcribe-1',
  'gpt-4o-mini-transcribe': 'transcribe-1',
  'whisper-large-v3': 'transcribe-1',
  'whisper-large-v3-turbo': 'transcribe-1',
  'distil-whisper-large-v3-en': 'transcribe-1',
};

const SERVICE_PREFIX = 'service/';

/** The catalog entry for a requested model id or alias; undefined when unknown. */
function lookup(requested: string): CatalogModel | undefined {
  const id = requested.trim();
  let native: string | undefined;
  if (id.startsWith(SERVICE_PREFIX)) native = id.slice(SERVICE_PREFIX.length);
  else native = ALIASES[id.startsWith('openai/') ? id.slice('openai/'.length) : id];
  return native === undefined ? undefined : CATALOG.find((m) => m.native === native);
}

/**
 * The native model for `requested`, which must be of `kind`. Unknown ids, and a model of the
 * other kind, are the layer's 400 (`param: model`).
 */
export function resolveModel(requested: string, kind: ModelKind): string {
  const m = lookup(requested);
  if (!m) {
    const ids = CATALOG.filter((c) => c.kind === kind).map((c) => SERVICE_PREFIX + c.native);
    throw badParam('model', `Unknown model ${JSON.stringify(requested)}. Use one of ${ids.join(', ')} or a documented alias`);
  }
  if (m.kind !== kind) {
    throw badParam('model', `Model ${JSON.stringify(requested)} is a ${m.kind} model and cannot be used for ${kind === 'speech' ? 'speech synthesis' : 'transcription'}`);
  }
  return m.native;
}

/** Fixed creation time of the catalog entries (seconds since the epoch). */
const CREATED_S = 1_735_689_600; // 2025-01-01

const usd = (micros: bigint) => (Number(micros) / 1e6).toString();

/**
 * One catalog entry: the router `Model` schema (always-null `context_length`,
 * `default_parameters`, `per_request_limits`, `supported_voices`; no `alias_target`,
 * `benchmarks`, `expiration_date`, `hugging_face_id`, `knowledge_cutoff`, `reasoning`) plus
 * `object` and `owned_by` for OpenAI-style clients. Prices are in USD: synthesis per input
 * character as `prompt`, transcription per second of audio as `audio`.
 */
function entry(m: CatalogModel, base: string) {
  const id = SERVICE_PREFIX + m.native;
  const speech = m.kind === 'speech';
  return {
    id,
    canonical_slug: id,
    object: 'model',
    owned_by: 'service',
    name: m.name,
    description: m.description,
    created: CREATED_S,
    context_length: null,
    architecture: {
      modality: speech ? 'text->speech' : 'audio->text',
      input_modalities: speech ? ['text'] : ['audio'],
      output_modalities: speech ? ['speech'] : ['text'],
      instruct_type: null,
    },
    pricing: speech
      ? { prompt: usd(costMicros('tts_characters', m.native, 1)), completion: '0' }
      : { prompt: '0', completion: '0', audio: usd(costMicros('asr_seconds', m.native, 1)) },
    top_provider: { context_length: null, max_completion_tokens: null, is_moderated: false },
    per_request_limits: null,
    supported_parameters: speech ? ['voice', 'response_format', 'speed', 'temperature', 'top_p'] : ['language', 'response_format', 'timestamp_granularities'],
    default_parameters: null,
    supported_voices: null,
    links: { details: `${base}/models/${id}` },
  };
}

/** `GET …/models`, optionally filtered by `output_modalities` (`speech` or `text`; comma list allowed). */
export function catalog(base: string, outputModalities: string | null) {
  const wanted = outputModalities ? outputModalities.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean) : [];
  const data = CATALOG.map((m) => entry(m, base)).filter((e) => wanted.length === 0 || wanted.includes('all') || e.architecture.output_modalities.some((o) => wanted.includes(o)));
  return { object: 'list', data, links: { next: null }, total_count: data.length };
}
