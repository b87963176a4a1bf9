/**
 * Voice models (`/model`, docs/api/voices.md) and the voice resolver the synthesis endpoints use.
 *
 * Rules (D-VOICE-1):
 * - bodies: multipart/form-data (preferred), JSON, MessagePack or urlencoded; files are parts
 *   in multipart, raw bytes in MessagePack and standard base64 in JSON and urlencoded; explicit
 *   nulls count as absent and unknown fields are ignored (as on `/v1/tts`);
 * - samples are decoded (any common format) and stored in Postgres as 24 kHz mono 16-bit PCM;
 * - `visibility` defaults to `private`; `public` needs a cover image;
 * - `private` voices are visible and usable only by their team; `unlist` ones by any team that
 *   knows the id (not listed); `public` ones are listed for every team;
 * - `train_mode: fast` is the only mode and a voice is `trained` as soon as it is created.
 */
import { z } from 'zod';
import { decodeAudio, int16ToPcmBytes, resampleAll, wavHeader } from '../audio/index.ts';
import { ServiceError, type FieldError } from '../errors.ts';
import { AudioEncoding } from '../gen/inference/v1/inference_pb.ts';
import { parse } from '../validation.ts';
import { newId } from '../ids.ts';
import type { InferenceClient } from '../inference/index.ts';
import type { Logger } from '../log.ts';
import type { Sql } from '../store/db.ts';
import {
  deleteVoiceModel, getReadableVoiceModel, insertVoiceModel, listVoiceModels, readableVoiceCover, readableVoiceSample,
  updateVoiceModel, usableVoice, type NewVoiceSample, type VoiceModelRow, type VoicePatch,
} from './store.ts';

/** Stored sample format. */
export const SAMPLE_RATE_HZ = 24_000;
/** Largest `/model` request body (all samples and the cover together). */
export const VOICE_BODY_LIMIT = 50 * 1024 * 1024;
export const MAX_VOICE_FILES = 20;
export const MIN_SAMPLE_MS = 1000;
/** Total duration of a voice's samples. */
export const MAX_TOTAL_SAMPLE_MS = 10 * 60_000;
export const MAX_COVER_BYTES = 5 * 1024 * 1024;
/** Offsets at or past this many rows are refused (as on the agent lists). */
export const MAX_LIST_OFFSET = 100_000;

const referenceNotFound = () => new ServiceError('bad_request', 'Reference not found');
const modelNotFound = () => new ServiceError('not_found', 'Model not found');

/**
 * A voice model as synthesis uses it. Usable: the team's own voices and other teams' `public`
 * and `unlist` voices, in state `trained`. Anything else (unknown, deleted, another team's
 * private voice, untrained) → `400 Reference not found`.
 *
 * A cloned voice gives its samples: each `references[].audio` is a complete RIFF/WAVE file
 * (mono, 16-bit, 24 kHz): pass it to the backend with `AUDIO_ENCODING_WAV`. A voice saved from
 * a voice design candidate gives no references and, as `referenceId`, the backend's own voice
 * id for the design (sent as `reference_id`).
 */
export async function resolveVoice(sql: Sql, teamId: string, referenceId: string): Promise<{ referenceId: string; references: { audio: Uint8Array; text: string }[] }> {
  const voice = await usableVoice(sql, teamId, referenceId);
  if (!voice) throw referenceNotFound();
  if (voice.backendVoiceId) return { referenceId: voice.backendVoiceId, references: [] };
  return { referenceId, references: voice.samples.map((s) => ({ audio: wavFile(s.pcm, s.sample_rate_hz), text: s.text })) };
}

function wavFile(pcm: Uint8Array, sampleRateHz: number): Uint8Array {
  const out = new Uint8Array(44 + pcm.byteLength);
  out.set(wavHeader(sampleRateHz, pcm.byteLength), 0);
  out.set(pcm, 44);
  return out;
}

// ---------------------------------------------------------------------------------------
// Request bodies (read from the wire by readModelBody in ./routes.ts)

type Body = Record<string, unknown>;
/** A list field: an array, repeated form fields, or one comma-separated string. */
function listOf(v: unknown): unknown {
  if (typeof v === 'string') return v.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  return v;
}

const boolish = z.union([z.boolean(), z.enum(['true', 'false', 'True', 'False', '1', '0']).transform((x) => x === 'true' || x === 'True' || x === '1')]);
const bytes = z.instanceof(Uint8Array, { message: 'Input should be a file' });
const visibility = z.enum(['public', 'unlist', 'private']);
const title = z.string().trim().min(1).max(128);
const description = z.string().max(2000);
const tags = z.array(z.string().trim().min(1).max(64)).max(20);

/** POST /model after normalisation (unknown fields dropped). */
export const modelCreateSchema = z.object({
  type: z.literal('tts'),
  title,
  train_mode: z.literal('fast'),
  voices: z.array(bytes).min(1).max(MAX_VOICE_FILES),
  texts: z.array(z.string().max(5000)).max(MAX_VOICE_FILES).optional(),
  visibility: visibility.default('private'),
  description: description.default(''),
  cover_image: bytes.optional(),
  tags: tags.default([]),
  enhance_audio_quality: boolish.optional(),
  generate_sample: boolish.optional(),
  voice_design_id: z.string().min(1).max(4096).optional().meta({ description: 'A POST /v1/voice-design candidate id: the voice speaks with that design (the samples are its preview)' }),
});
export type ModelCreate = z.output<typeof modelCreateSchema>;

/** PATCH /model/{id}. */
export const modelPatchSchema = z.object({
  title: title.optional(),
  description: description.optional(),
  cover_image: bytes.optional(),
  visibility: visibility.optional(),
  tags: tags.optional(),
});
export type ModelPatch = z.output<typeof modelPatchSchema>;

/** Normalises and validates a create body. */
export function parseModelCreate(body: Body): ModelCreate {
  const b = { ...body };
  if (b.voices instanceof Uint8Array) b.voices = [b.voices];
  if (b.tags !== undefined) b.tags = listOf(b.tags);
  if (typeof b.texts === 'string') {
    // The official client sends an array of texts as one comma-joined field: one voice takes
    // the whole string; several take the comma split only when it gives one text per voice.
    const n = Array.isArray(b.voices) ? b.voices.length : 1;
    const split = b.texts.split(',');
    if (n <= 1) b.texts = [b.texts];
    else if (split.length === n) b.texts = split.map((s) => s.trim());
    else throw invalid(['texts'], `Expected one transcript per voice file (${n}); send texts as repeated fields or an array`, 'texts_count');
  }
  const req = parse(modelCreateSchema, b);
  if (req.texts && req.texts.length !== req.voices.length) throw invalid(['texts'], `Expected one transcript per voice file (${req.voices.length}), got ${req.texts.length}`, 'texts_count');
  if (req.visibility === 'public' && !req.cover_image) throw invalid(['cover_image'], 'A cover image is required for a public voice', 'missing');
  return req;
}

export function parseModelPatch(body: Body): ModelPatch {
  const b = { ...body };
  if (b.tags !== undefined) b.tags = listOf(b.tags);
  return parse(modelPatchSchema, b);
}

function invalid(loc: (string | number)[], msg: string, type: string): ServiceError {
  const f: FieldError = { type, loc: ['body', ...loc], msg, ctx: {} };
  return new ServiceError('invalid', msg, { fields: [f] });
}

/** PNG, JPEG, GIF or WebP, by magic bytes. */
function imageType(b: Uint8Array): string | null {
  const at = (i: number, s: string) => [...s].every((c, k) => b[i + k] === c.charCodeAt(0));
  if (b.length >= 8 && b[0] === 0x89 && at(1, 'PNG')) return 'image/png';
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (at(0, 'GIF8')) return 'image/gif';
  if (at(0, 'RIFF') && at(8, 'WEBP')) return 'image/webp';
  return null;
}

function checkCover(b: Uint8Array): { bytes: Uint8Array; type: string } {
  if (b.byteLength > MAX_COVER_BYTES) throw new ServiceError('payload_too_large', 'cover_image exceeds 5 MB');
  const type = imageType(b);
  if (!type) throw new ServiceError('bad_request', 'cover_image must be a PNG, JPEG, GIF or WebP image');
  return { bytes: b, type };
}

// ---------------------------------------------------------------------------------------
// Query

export const modelListQuery = z.object({
  page_size: z.coerce.number().int().min(1).max(100).default(10),
  page_number: z.coerce.number().int().min(1).default(1),
  title: z.string().max(200).optional(),
  tag: z.array(z.string().max(64)).max(20).default([]),
  self: boolish.default(false),
  author_id: z.string().max(128).optional(),
  language: z.array(z.string().max(35)).max(20).default([]),
  title_language: z.array(z.string().max(35)).optional(),
  sort_by: z.enum(['score', 'task_count', 'created_at']).default('score'),
});
/** For the OpenAPI document. */
export const modelListQueryDoc = z.object({
  page_size: z.number().int().min(1).max(100).default(10),
  page_number: z.number().int().min(1).default(1),
  title: z.string().optional().meta({ description: 'Case-insensitive substring of the title' }),
  tag: z.union([z.string(), z.array(z.string())]).optional().meta({ description: 'Voices carrying every one of these tags' }),
  self: z.boolean().default(false).meta({ description: 'Only the team\'s own voices (every visibility)' }),
  author_id: z.string().optional().meta({ description: 'Owner team id; ignored with self' }),
  language: z.union([z.string(), z.array(z.string())]).optional(),
  title_language: z.union([z.string(), z.array(z.string())]).optional().meta({ description: 'Accepted and ignored' }),
  sort_by: z.enum(['score', 'task_count', 'created_at']).default('score').meta({ description: 'Every order is newest first (scores and counts are all 0)' }),
});

export type ModelListQuery = z.output<typeof modelListQuery>;

// ---------------------------------------------------------------------------------------
// Response

const sampleEntity = z.object({ title: z.string(), text: z.string(), task_id: z.string(), audio: z.string() });
export const modelEntity = z.object({
  _id: z.string(),
  type: z.enum(['svc', 'tts']),
  title: z.string(),
  description: z.string(),
  cover_image: z.string().meta({ description: 'Path of the cover image (GET, same auth), or "" when none' }),
  train_mode: z.enum(['fast', 'full']),
  state: z.enum(['created', 'training', 'trained', 'failed']),
  tags: z.array(z.string()),
  samples: z.array(sampleEntity).meta({ description: '`audio` is the path of the sample as WAV (GET, same auth)' }),
  languages: z.array(z.string()),
  default_text: z.string(),
  visibility: z.enum(['public', 'unlist', 'private']),
  lock_visibility: z.boolean(),
  dmca_taken_down: z.boolean(),
  source: z.string().nullable(),
  pvc_release_state: z.enum(['released', 'retiring']).nullable(),
  pvc_notice_period_months: z.number().int().nullable(),
  pvc_released_at: z.string().nullable(),
  pvc_retire_requested_at: z.string().nullable(),
  pvc_retire_effective_at: z.string().nullable(),
  quality: z.null(),
  like_count: z.number().int(),
  mark_count: z.number().int(),
  shared_count: z.number().int(),
  task_count: z.number().int(),
  liked: z.boolean(),
  marked: z.boolean(),
  unliked: z.boolean(),
  author: z.object({ _id: z.string(), nickname: z.string(), avatar: z.string() }),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ModelEntity = z.output<typeof modelEntity>;

export const modelListBody = z.object({
  total: z.number().int(),
  items: z.array(modelEntity),
  has_more: z.boolean(),
  max_offset: z.number().int().nullable(),
  accessible_upper_bound: z.number().int().nullable(),
  window_limited: z.boolean(),
  total_is_exact: z.boolean(),
});

export function toModelEntity(r: VoiceModelRow): ModelEntity {
  return {
    _id: r.id,
    type: r.type,
    title: r.title,
    description: r.description,
    cover_image: r.has_cover ? `/model/${r.id}/cover` : '',
    train_mode: r.train_mode,
    state: r.state,
    tags: r.tags,
    samples: r.samples.map((s) => ({ title: s.title, text: s.text, task_id: '', audio: `/model/${r.id}/samples/${s.ordinal}` })),
    languages: r.languages,
    default_text: '',
    visibility: r.visibility,
    lock_visibility: false,
    dmca_taken_down: false,
    source: r.backend_voice_id ? 'voice_design' : null,
    pvc_release_state: null,
    pvc_notice_period_months: null,
    pvc_released_at: null,
    pvc_retire_requested_at: null,
    pvc_retire_effective_at: null,
    quality: null,
    like_count: 0,
    mark_count: 0,
    shared_count: 0,
    task_count: 0,
    liked: false,
    marked: false,
    unliked: false,
    author: { _id: r.team_id, nickname: r.team_name, avatar: '' },
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

// ---------------------------------------------------------------------------------------
// Service

/** Keeps a voice design candidate on its backend; answers the backend's lasting voice id (src/voice-design). */
export type KeepDesign = (teamId: string, candidateId: string, name: string, description: string, o: { signal?: AbortSignal; requestId?: string }) => Promise<string>;

export class VoiceService {
  constructor(
    private readonly sql: Sql,
    private readonly inference: InferenceClient,
    private readonly log: Logger,
    private readonly keepDesign?: KeepDesign,
  ) {}

  async create(teamId: string, req: ModelCreate, o: { signal?: AbortSignal; requestId?: string } = {}): Promise<ModelEntity> {
    const cover = req.cover_image ? checkCover(req.cover_image) : undefined;
    const samples: NewVoiceSample[] = [];
    let totalMs = 0;
    // One file at a time, so a request holds at most one decoded upload besides the kept PCM.
    for (const [i, file] of req.voices.entries()) {
      let decoded;
      try {
        decoded = await decodeAudio(file);
      } catch (err) {
        if (err instanceof ServiceError) throw new ServiceError(err.code, `voices[${i}]: ${err.message}`, { cause: err });
        throw err;
      }
      if (decoded.durationMs < MIN_SAMPLE_MS) throw new ServiceError('bad_request', `voices[${i}]: audio is shorter than 1 second`);
      totalMs += decoded.durationMs;
      if (totalMs > MAX_TOTAL_SAMPLE_MS) throw new ServiceError('bad_request', 'voices: the samples are longer than 10 minutes in total');
      const pcm = resampleAll(decoded.pcm, decoded.sampleRateHz, SAMPLE_RATE_HZ);
      const text = req.texts ? req.texts[i]! : await this.transcribe(teamId, pcm, o);
      samples.push({ title: `voice_${i}`, text, sampleRateHz: SAMPLE_RATE_HZ, durationMs: decoded.durationMs, pcm: new Uint8Array(int16ToPcmBytes(pcm)) });
    }
    // Last, once every sample is judged: keeping a design may create it in a provider's library.
    let backendVoiceId: string | undefined;
    if (req.voice_design_id !== undefined) {
      if (!this.keepDesign) throw new ServiceError('bad_request', 'Voice design is not available here');
      backendVoiceId = await this.keepDesign(teamId, req.voice_design_id, req.title, req.description, o);
    }
    const row = await insertVoiceModel(this.sql, { id: newId('voice'), teamId, title: req.title, description: req.description, visibility: req.visibility, tags: req.tags, cover, backendVoiceId }, samples);
    return toModelEntity(row);
  }

  /** The transcript of a sample by the backend's Transcribe; '' when that fails. */
  private async transcribe(teamId: string, pcm24k: Int16Array, o: { signal?: AbortSignal; requestId?: string }): Promise<string> {
    try {
      const pcm = resampleAll(pcm24k, SAMPLE_RATE_HZ, 16_000);
      const res = await this.inference.transcribe({ input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: 16_000 } }, int16ToPcmBytes(pcm), { signal: o.signal, requestId: o.requestId, teamId });
      return res.text;
    } catch (err) {
      if (o.signal?.aborted) throw err;
      this.log.warn({ err }, 'voice sample transcription failed; storing an empty text');
      return '';
    }
  }

  async list(teamId: string, q: ModelListQuery): Promise<z.output<typeof modelListBody>> {
    const offset = (q.page_number - 1) * q.page_size;
    if (offset >= MAX_LIST_OFFSET) throw new ServiceError('bad_request', `Page offset exceeds ${MAX_LIST_OFFSET} rows`);
    const { rows, total } = await listVoiceModels(
      this.sql, teamId,
      { self: q.self, authorId: q.author_id, title: q.title, tags: q.tag, languages: q.language },
      { limit: q.page_size, offset },
    );
    return {
      total,
      items: rows.map(toModelEntity),
      has_more: offset + rows.length < total,
      max_offset: null,
      accessible_upper_bound: null,
      window_limited: false,
      total_is_exact: true,
    };
  }

  async get(teamId: string, id: string): Promise<ModelEntity> {
    const row = await getReadableVoiceModel(this.sql, teamId, id);
    if (!row) throw modelNotFound();
    return toModelEntity(row);
  }

  /** Only the owning team may update; another team's voice is 404 like a missing one. */
  async update(teamId: string, id: string, p: ModelPatch): Promise<ModelEntity> {
    const current = await getReadableVoiceModel(this.sql, teamId, id);
    if (!current || current.team_id !== teamId) throw modelNotFound();
    const patch: VoicePatch = { title: p.title, description: p.description, visibility: p.visibility, tags: p.tags };
    if (p.cover_image) patch.cover = checkCover(p.cover_image);
    if ((p.visibility ?? current.visibility) === 'public' && !patch.cover && !current.has_cover) throw invalid(['cover_image'], 'A cover image is required for a public voice', 'missing');
    const row = await updateVoiceModel(this.sql, teamId, id, patch);
    if (!row) throw modelNotFound();
    return toModelEntity(row);
  }

  async delete(teamId: string, id: string): Promise<void> {
    if (!(await deleteVoiceModel(this.sql, teamId, id))) throw modelNotFound();
  }

  /** One sample as a WAV file. */
  async sampleWav(teamId: string, id: string, ordinal: string): Promise<Uint8Array> {
    const n = /^\d{1,3}$/.test(ordinal) ? Number(ordinal) : -1;
    const s = n >= 0 ? await readableVoiceSample(this.sql, teamId, id, n) : undefined;
    if (!s) throw new ServiceError('not_found', 'Sample not found');
    return wavFile(s.pcm, s.sample_rate_hz);
  }

  async cover(teamId: string, id: string): Promise<{ bytes: Uint8Array; type: string }> {
    const c = await readableVoiceCover(this.sql, teamId, id);
    if (!c) throw new ServiceError('not_found', 'Cover image not found');
    return c;
  }
}
