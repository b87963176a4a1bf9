/**
 * Family C voice library, model catalog and user stub (docs/api/compat.md
 * "Family C"): the caller's own voice models in the vendor `Voice` shape.
 */
import type { Sql } from '../../store/db.ts';
import { getOwnVoiceModel, listVoiceModels, type VoiceModelRow } from '../../voices/store.ts';
import { SPEECH_MODEL_IDS, TRANSCRIPTION_MODEL_IDS } from '../../inference/index.ts';
import { ElevenLabsError } from './common.ts';

/** The vendor's Voice (the fields its client validates; null where we have nothing). */
export interface ElevenLabsVoice {
  voice_id: string;
  name: string;
  category: 'cloned';
  labels: Record<string, string>;
  description: string | null;
  preview_url: string | null;
  samples: null;
  settings: null;
  sharing: null;
  high_quality_base_model_ids: string[];
  verified_languages: { language: string; model_id: string }[];
  available_for_tiers: string[];
  is_owner: boolean;
  is_legacy: boolean;
  created_at_unix: number;
}

/**
 * Tags as labels: `key:value` (or `key=value`) becomes `{key: value}`; a plain tag becomes
 * `{tag: ""}` (labels are a string map in the vendor's client; the tag is the key).
 */
export function labelsOf(tags: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const tag of tags) {
    const m = /^([^:=]+)[:=](.*)$/.exec(tag);
    if (m) out[m[1]!.trim()] = m[2]!.trim();
    else out[tag] = '';
  }
  return out;
}

export function toElevenLabsVoice(r: VoiceModelRow): ElevenLabsVoice {
  return {
    voice_id: r.id,
    name: r.title,
    category: 'cloned',
    labels: labelsOf(r.tags),
    description: r.description || null,
    preview_url: null,
    samples: null,
    settings: null,
    sharing: null,
    high_quality_base_model_ids: SPEECH_MODEL_IDS.map((m) => `service/${m}`),
    verified_languages: r.languages.map((language) => ({ language, model_id: `service/${SPEECH_MODEL_IDS[0]}` })),
    available_for_tiers: [],
    is_owner: true,
    is_legacy: false,
    created_at_unix: Math.floor(r.created_at.getTime() / 1000),
  };
}

const ALL = { self: true, tags: [] as string[], languages: [] as string[] };
/** `GET /v1/voices` returns at most this many (the caller's library is small). */
export const V1_VOICES_LIMIT = 1000;

/** `GET /v1/voices`: the caller's voices, newest first. */
export async function listVoicesV1(sql: Sql, teamId: string): Promise<{ voices: ElevenLabsVoice[] }> {
  const { rows } = await listVoiceModels(sql, teamId, ALL, { limit: V1_VOICES_LIMIT, offset: 0 });
  return { voices: rows.map(toElevenLabsVoice) };
}

/**
 * `GET /v2/voices`: a page of the caller's voices. `page_size` 1–100 (default 10),
 * `search` (title substring), `next_page_token` (opaque: the offset). Other vendor filters
 * are accepted and ignored.
 */
export async function searchVoicesV2(sql: Sql, teamId: string, q: URLSearchParams): Promise<{ voices: ElevenLabsVoice[]; has_more: boolean; total_count: number; next_page_token: string | null }> {
  const size = q.has('page_size') ? Number(q.get('page_size')) : 10;
  if (!Number.isInteger(size) || size < 1 || size > 100) throw new ElevenLabsError('invalid_request', 'page_size must be an integer from 1 to 100');
  const token = q.get('next_page_token');
  const offset = token ? Number.parseInt(Buffer.from(token, 'base64url').toString('utf8'), 10) : 0;
  if (!Number.isInteger(offset) || offset < 0) throw new ElevenLabsError('invalid_request', 'Invalid next_page_token');
  const search = q.get('search')?.trim();
  const { rows, total } = await listVoiceModels(sql, teamId, { ...ALL, title: search || undefined }, { limit: size, offset });
  const more = offset + rows.length < total;
  return {
    voices: rows.map(toElevenLabsVoice),
    has_more: more,
    total_count: total,
    next_page_token: more ? Buffer.from(String(offset + rows.length)).toString('base64url') : null,
  };
}

/** `GET /v1/voices/{id}`: the caller's voice; anything else (another team's included) → 404 `voice_not_found`. */
export async function getVoice(sql: Sql, teamId: string, id: string): Promise<ElevenLabsVoice> {
  const row = await getOwnVoiceModel(sql, teamId, id);
  if (!row) throw new ElevenLabsError('voice_not_found', `A voice with the voice_id ${id} was not found.`);
  return toElevenLabsVoice(row);
}

const SPEECH_MODEL_NAMES: Record<string, string> = {
  's2.1-pro': 'S2.1 Pro (recommended; also serves legacy eleven_* model ids)',
  's2.1-pro-free': 'S2.1 Pro Free (zero price, no latency or data-processing guarantees)',
  's2-pro': 'S2 Pro (previous generation)',
  s1: 'S1 (previous generation)',
};

/** `GET /v1/models`: the catalog as a JSON array of the vendor's Model. */
export function modelCatalog(): Record<string, unknown>[] {
  const speech = SPEECH_MODEL_IDS.map((id) => ({
    model_id: `service/${id}`,
    name: SPEECH_MODEL_NAMES[id] ?? id,
    description: SPEECH_MODEL_NAMES[id] ?? id,
    can_do_text_to_speech: true,
    can_do_voice_conversion: false,
    can_be_finetuned: false,
    can_use_style: false,
    can_use_speaker_boost: false,
    serves_pro_voices: false,
    token_cost_factor: 1,
    requires_alpha_access: false,
    maximum_text_length_per_request: 20_000,
  }));
  const transcription = TRANSCRIPTION_MODEL_IDS.map((id) => ({
    model_id: `service/${id}`,
    name: 'Transcribe 1 (speech to text with word timestamps)',
    description: 'Speech to text with word timestamps; no language hint needed',
    can_do_text_to_speech: false,
    can_do_voice_conversion: false,
    can_be_finetuned: false,
    can_use_style: false,
    can_use_speaker_boost: false,
    serves_pro_voices: false,
    token_cost_factor: 1,
    requires_alpha_access: false,
  }));
  return [...speech, ...transcription];
}

/**
 * `GET /v1/user`: a static stub for health checks with every field the official client
 * requires. Quotas are not modelled here: limits read as unlimited-sized numbers.
 */
export function userStub(teamId: string, voicesUsed: number): Record<string, unknown> {
  return {
    user_id: teamId,
    workspace_id: teamId,
    is_new_user: false,
    can_use_delayed_payment_methods: false,
    is_onboarding_completed: true,
    is_onboarding_checklist_completed: true,
    created_at: 0,
    seat_type: 'workspace_admin',
    subscription: {
      tier: 'self_hosted',
      character_count: 0,
      character_limit: 1_000_000_000,
      max_credit_limit_extension: 'unlimited',
      can_extend_character_limit: false,
      allowed_to_extend_character_limit: false,
      voice_slots_used: voicesUsed,
      professional_voice_slots_used: 0,
      professional_voice_slots_used_in_workspace: 0,
      voice_limit: 1_000_000,
      voice_add_edit_counter: 0,
      professional_voice_limit: 0,
      can_extend_voice_limit: false,
      can_use_instant_voice_cloning: true,
      can_use_professional_voice_cloning: false,
      current_overage: { amount: '0', currency: 'usd' },
      status: 'active',
    },
  };
}

/** How many voices the team owns (for the user stub). */
export async function ownVoiceCount(sql: Sql, teamId: string): Promise<number> {
  const { total } = await listVoiceModels(sql, teamId, ALL, { limit: 1, offset: 0 });
  return total;
}
