import type { Sql } from '../store/db.ts';

export type Visibility = 'public' | 'unlist' | 'private';

export interface VoiceSampleMeta {
  ordinal: number;
  title: string;
  text: string;
  duration_ms: number;
}

export interface VoiceModelRow {
  id: string;
  team_id: string;
  team_name: string;
  type: 'tts' | 'svc';
  title: string;
  description: string;
  visibility: Visibility;
  train_mode: 'fast' | 'full';
  state: 'created' | 'training' | 'trained' | 'failed';
  tags: string[];
  languages: string[];
  has_cover: boolean;
  /** The backend's voice id of a voice saved from a voice design candidate; null for cloned voices. */
  backend_voice_id: string | null;
  created_at: Date;
  updated_at: Date;
  samples: VoiceSampleMeta[];
}

export interface NewVoiceSample {
  title: string;
  text: string;
  sampleRateHz: number;
  durationMs: number;
  /** Mono s16le PCM bytes. */
  pcm: Uint8Array;
}

const cols = (sql: Sql) => sql`
  m.id, m.team_id, t.name as team_name, m.type, m.title, m.description, m.visibility, m.train_mode, m.state,
  m.tags, m.languages, (m.cover_image is not null) as has_cover, m.backend_voice_id, m.created_at, m.updated_at,
  coalesce((select json_agg(json_build_object('ordinal', s.ordinal, 'title', s.title, 'text', s.text, 'duration_ms', s.duration_ms) order by s.ordinal)
    from voice_samples s where s.model_id = m.id), '[]'::json) as samples`;

/** Rows a team may read: its own, and other teams' public and unlisted voices. */
const readable = (sql: Sql, teamId: string) => sql`(m.team_id = ${teamId} or m.visibility in ('public', 'unlist'))`;

/** Creates the voice and its samples in one transaction. */
export async function insertVoiceModel(
  sql: Sql,
  m: { id: string; teamId: string; title: string; description: string; visibility: Visibility; tags: string[]; cover?: { bytes: Uint8Array; type: string }; backendVoiceId?: string },
  samples: NewVoiceSample[],
): Promise<VoiceModelRow> {
  return sql.begin(async (tx) => {
    const t = tx as unknown as Sql;
    await t`
      insert into voice_models (id, team_id, type, title, description, visibility, train_mode, state, tags, cover_image, cover_type, backend_voice_id)
      values (${m.id}, ${m.teamId}, 'tts', ${m.title}, ${m.description}, ${m.visibility}, 'fast', 'trained', ${t.json(m.tags)},
        ${m.cover ? Buffer.from(m.cover.bytes) : null}, ${m.cover?.type ?? null}, ${m.backendVoiceId ?? null})`;
    for (const [i, s] of samples.entries()) {
      await t`
        insert into voice_samples (model_id, ordinal, title, text, sample_rate_hz, duration_ms, pcm)
        values (${m.id}, ${i}, ${s.title}, ${s.text}, ${s.sampleRateHz}, ${Math.round(s.durationMs)}, ${Buffer.from(s.pcm.buffer, s.pcm.byteOffset, s.pcm.byteLength)})`;
    }
    const [row] = await t<VoiceModelRow[]>`select ${cols(t)} from voice_models m join teams t on t.id = m.team_id where m.id = ${m.id}`;
    return row!;
  });
}

/** A voice the team may read (its own, or another team's public or unlisted one). */
export async function getReadableVoiceModel(sql: Sql, teamId: string, id: string): Promise<VoiceModelRow | undefined> {
  const [row] = await sql<VoiceModelRow[]>`select ${cols(sql)} from voice_models m join teams t on t.id = m.team_id where m.id = ${id} and ${readable(sql, teamId)}`;
  return row;
}

export async function getOwnVoiceModel(sql: Sql, teamId: string, id: string): Promise<VoiceModelRow | undefined> {
  const [row] = await sql<VoiceModelRow[]>`select ${cols(sql)} from voice_models m join teams t on t.id = m.team_id where m.id = ${id} and m.team_id = ${teamId}`;
  return row;
}

export interface VoiceFilter {
  /** Only the team's own voices (every visibility). Otherwise: own plus every team's public voices. */
  self: boolean;
  /** Owner team id (ignored with `self`). */
  authorId?: string;
  /** Case-insensitive substring of the title. */
  title?: string;
  /** The voice carries every one of these tags. */
  tags: string[];
  /** The voice lists at least one of these languages. */
  languages: string[];
}

/** A page of voices, newest first, and the total matching. */
export async function listVoiceModels(sql: Sql, teamId: string, f: VoiceFilter, page: { limit: number; offset: number }): Promise<{ rows: VoiceModelRow[]; total: number }> {
  const title = f.title ? `%${f.title.replace(/[\\%_]/g, (c) => '\\' + c)}%` : null;
  const where = sql`
    ${f.self ? sql`m.team_id = ${teamId}` : sql`(m.team_id = ${teamId} or m.visibility = 'public')`}
    ${!f.self && f.authorId ? sql`and m.team_id = ${f.authorId}` : sql``}
    ${title ? sql`and m.title ilike ${title}` : sql``}
    ${f.tags.length ? sql`and m.tags @> ${sql.json(f.tags)}` : sql``}
    ${f.languages.length ? sql`and m.languages ?| ${f.languages}` : sql``}`;
  const rows = await sql<VoiceModelRow[]>`
    select ${cols(sql)} from voice_models m join teams t on t.id = m.team_id where ${where}
    order by m.created_at desc, m.id desc limit ${page.limit} offset ${page.offset}`;
  const [c] = await sql<{ n: number }[]>`select count(*)::int as n from voice_models m where ${where}`;
  return { rows, total: c!.n };
}

export interface VoicePatch {
  title?: string;
  description?: string;
  visibility?: Visibility;
  tags?: string[];
  cover?: { bytes: Uint8Array; type: string };
}

/** Updates the team's own voice; undefined when it is not the team's (or does not exist). */
export async function updateVoiceModel(sql: Sql, teamId: string, id: string, p: VoicePatch): Promise<VoiceModelRow | undefined> {
  const set: Record<string, unknown> = {};
  if (p.title !== undefined) set.title = p.title;
  if (p.description !== undefined) set.description = p.description;
  if (p.visibility !== undefined) set.visibility = p.visibility;
  if (p.tags !== undefined) set.tags = sql.json(p.tags);
  if (p.cover !== undefined) {
    set.cover_image = Buffer.from(p.cover.bytes);
    set.cover_type = p.cover.type;
  }
  if (Object.keys(set).length === 0) return getOwnVoiceModel(sql, teamId, id);
  const rows = await sql`update voice_models set ${sql(set as Record<string, never>)}, updated_at = clock_timestamp() where id = ${id} and team_id = ${teamId} returning id`;
  if (rows.length === 0) return undefined;
  return getOwnVoiceModel(sql, teamId, id);
}

export async function deleteVoiceModel(sql: Sql, teamId: string, id: string): Promise<boolean> {
  const rows = await sql`delete from voice_models where id = ${id} and team_id = ${teamId} returning id`;
  return rows.length === 1;
}

export interface StoredSample {
  ordinal: number;
  title: string;
  text: string;
  sample_rate_hz: number;
  pcm: Buffer;
}

/**
 * What synthesis needs of a voice the team may use (its own, or another team's public or
 * unlisted one, in state `trained`): the backend's voice id of a designed voice, else the
 * samples. Undefined otherwise.
 */
export async function usableVoice(sql: Sql, teamId: string, id: string): Promise<{ backendVoiceId: string | null; samples: StoredSample[] } | undefined> {
  const [m] = await sql<{ backend_voice_id: string | null }[]>`select m.backend_voice_id from voice_models m where m.id = ${id} and m.state = 'trained' and ${readable(sql, teamId)}`;
  if (!m) return undefined;
  if (m.backend_voice_id) return { backendVoiceId: m.backend_voice_id, samples: [] };
  const samples = await sql<StoredSample[]>`select ordinal, title, text, sample_rate_hz, pcm from voice_samples where model_id = ${id} order by ordinal`;
  return { backendVoiceId: null, samples };
}

/** One sample's PCM, when the team may read the voice. */
export async function readableVoiceSample(sql: Sql, teamId: string, id: string, ordinal: number): Promise<StoredSample | undefined> {
  const [row] = await sql<StoredSample[]>`
    select s.ordinal, s.title, s.text, s.sample_rate_hz, s.pcm from voice_samples s join voice_models m on m.id = s.model_id
    where s.model_id = ${id} and s.ordinal = ${ordinal} and ${readable(sql, teamId)}`;
  return row;
}

/** The cover image, when the team may read the voice and it has one. */
export async function readableVoiceCover(sql: Sql, teamId: string, id: string): Promise<{ bytes: Buffer; type: string } | undefined> {
  const [row] = await sql<{ cover_image: Buffer | null; cover_type: string | null }[]>`
    select m.cover_image, m.cover_type from voice_models m where m.id = ${id} and ${readable(sql, teamId)}`;
  if (!row?.cover_image) return undefined;
  return { bytes: row.cover_image, type: row.cover_type ?? 'application/octet-stream' };
}
