import type postgres from 'postgres';
import type { Sql } from '../store/db.ts';
import { paginate, type Page, type PageRequest } from '../store/paginate.ts';

type Fragment = postgres.PendingQuery<postgres.Row[]>;

export interface KnowledgeSourceRow {
  id: string;
  team_id: string;
  workspace_id: string;
  name: string;
  description: string;
  revision_number: number;
  file_name: string;
  size_bytes: number;
  chunk_count: number;
  created_at: Date;
  updated_at: Date;
  /** The current revision's text (only from `getKnowledgeSource`). */
  content?: string;
}

/** One upload's text: the file, its bytes, and the passages it was cut into. */
export interface KnowledgeUpload {
  fileName: string;
  sizeBytes: number;
  content: string;
  chunks: string[];
}

const cols = (sql: Sql) => sql`
  k.id, k.team_id, k.workspace_id, k.name, k.description, k.revision_number, k.file_name, k.size_bytes,
  k.chunk_count, k.created_at, k.updated_at`;

async function insertRevision(tx: Sql, id: string, revision: number, u: KnowledgeUpload): Promise<void> {
  await tx`
    insert into knowledge_revisions (source_id, revision_number, file_name, size_bytes, content, chunk_count)
    values (${id}, ${revision}, ${u.fileName}, ${u.sizeBytes}, ${u.content}, ${u.chunks.length})`;
  if (u.chunks.length === 0) return;
  const rows = u.chunks.map((text, ordinal) => ({ source_id: id, revision_number: revision, ordinal, text }));
  // Batches keep each statement's parameter count well under Postgres' 65,535.
  for (let i = 0; i < rows.length; i += 1000) await tx`insert into knowledge_chunks ${tx(rows.slice(i, i + 1000))}`;
}

/** Creates the source with revision 1 (its text and passages) in one transaction. */
export async function insertKnowledgeSource(
  sql: Sql,
  k: { id: string; teamId: string; name: string; description: string; upload: KnowledgeUpload },
): Promise<KnowledgeSourceRow> {
  await sql.begin(async (tx) => {
    const t = tx as unknown as Sql;
    await t`
      insert into knowledge_sources (id, team_id, workspace_id, name, description, revision_number, file_name, size_bytes, chunk_count)
      values (${k.id}, ${k.teamId}, ${k.teamId}, ${k.name}, ${k.description}, 1, ${k.upload.fileName}, ${k.upload.sizeBytes}, ${k.upload.chunks.length})`;
    await insertRevision(t, k.id, 1, k.upload);
  });
  return (await getKnowledgeSource(sql, k.teamId, k.id))!;
}

/** The source with its current content; undefined when missing, another team's or deleted. */
export async function getKnowledgeSource(sql: Sql, teamId: string, id: string): Promise<KnowledgeSourceRow | undefined> {
  const [row] = await sql<KnowledgeSourceRow[]>`
    select ${cols(sql)}, r.content from knowledge_sources k
    join knowledge_revisions r on r.source_id = k.id and r.revision_number = k.revision_number
    where k.id = ${id} and k.team_id = ${teamId} and k.deleted_at is null`;
  return row;
}

export async function listKnowledgeSources(sql: Sql, teamId: string, f: { search?: string }, page: PageRequest): Promise<Page<KnowledgeSourceRow>> {
  const search = f.search ? `%${f.search.replace(/[\\%_]/g, (c) => '\\' + c)}%` : null;
  const where = sql`
    k.team_id = ${teamId} and k.deleted_at is null
    ${search ? sql`and (k.name ilike ${search} or k.file_name ilike ${search})` : sql``}`;
  return paginate<KnowledgeSourceRow>(sql, { select: cols(sql), from: sql`knowledge_sources k`, where, order: 'created', page });
}

/**
 * Updates name/description and, with `upload`, adds the next revision (same id). Undefined
 * when the source is missing. The row lock serialises concurrent uploads to one source.
 */
export async function updateKnowledgeSource(
  sql: Sql,
  teamId: string,
  id: string,
  p: { name?: string; description?: string; upload?: KnowledgeUpload },
): Promise<KnowledgeSourceRow | undefined> {
  const found = await sql.begin(async (tx) => {
    const t = tx as unknown as Sql;
    const [row] = await t<{ revision_number: number }[]>`
      select revision_number from knowledge_sources where id = ${id} and team_id = ${teamId} and deleted_at is null for update`;
    if (!row) return false;
    let revision = row.revision_number;
    if (p.upload) {
      revision += 1;
      await insertRevision(t, id, revision, p.upload);
    }
    const u = p.upload;
    await t`
      update knowledge_sources set
        name = coalesce(${p.name ?? null}, name),
        description = coalesce(${p.description ?? null}, description),
        revision_number = ${revision},
        file_name = coalesce(${u?.fileName ?? null}, file_name),
        size_bytes = coalesce(${u?.sizeBytes ?? null}::int, size_bytes),
        chunk_count = coalesce(${u ? u.chunks.length : null}::int, chunk_count),
        updated_at = clock_timestamp()
      where id = ${id}`;
    return true;
  });
  return found ? getKnowledgeSource(sql, teamId, id) : undefined;
}

/** A draft or the latest published version of the agent references the source. */
function referencedBy(sql: Sql, id: Fragment): Fragment {
  return sql`(
    exists (select 1 from agent_drafts d where d.agent_id = a.id
      and d.config->'knowledge_base'->'knowledge_source_ids' @> jsonb_build_array(${id}))
    or exists (select 1 from agent_versions v where v.agent_id = a.id
      and v.version_number = (select max(v2.version_number) from agent_versions v2 where v2.agent_id = a.id)
      and v.config->'knowledge_base'->'knowledge_source_ids' @> jsonb_build_array(${id})))`;
}

/** Agents whose draft or latest published version references the source, newest first. */
export async function agentsUsingKnowledgeSource(sql: Sql, teamId: string, id: string): Promise<{ agent_id: string; name: string }[]> {
  return sql<{ agent_id: string; name: string }[]>`
    select a.id as agent_id, a.name from agents a
    where a.team_id = ${teamId} and ${referencedBy(sql, sql`${id}::text`)}
    order by a.created_at desc, a.id desc`;
}

/**
 * Soft-deletes the source unless an agent's draft or latest published version references
 * it. Revisions and passages stay for older versions that pinned them.
 */
export async function deleteKnowledgeSource(
  sql: Sql,
  teamId: string,
  id: string,
): Promise<{ deleted: true } | { deleted: false; missing: true } | { deleted: false; missing: false; attached: number }> {
  return sql.begin(async (tx) => {
    const t = tx as unknown as Sql;
    const [row] = await t`select id from knowledge_sources where id = ${id} and team_id = ${teamId} and deleted_at is null for update`;
    if (!row) return { deleted: false as const, missing: true as const };
    const [c] = await t<{ n: number }[]>`select count(*)::int as n from agents a where a.team_id = ${teamId} and ${referencedBy(t, t`${id}::text`)}`;
    if (c!.n > 0) return { deleted: false as const, missing: false as const, attached: c!.n };
    await t`update knowledge_sources set deleted_at = clock_timestamp() where id = ${id}`;
    return { deleted: true as const };
  });
}

/** The subset of `ids` that are live (not deleted) knowledge sources of the team. */
export async function knowledgeSourceIdsOf(sql: Sql, teamId: string, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await sql<{ id: string }[]>`
    select id from knowledge_sources where team_id = ${teamId} and deleted_at is null and id = any(${[...ids]}::text[])`;
  return new Set(rows.map((r) => r.id));
}

/** A pinned source: the id and the revision a published version reads. */
export interface KnowledgeRef {
  id: string;
  revision: number;
}

/** The current revision of each live source of the team in `ids` (publish pins these), in the order of `ids`. */
export async function currentKnowledgeRevisions(sql: Sql, teamId: string, ids: readonly string[]): Promise<KnowledgeRef[]> {
  if (ids.length === 0) return [];
  const rows = await sql<{ id: string; revision_number: number }[]>`
    select id, revision_number from knowledge_sources where team_id = ${teamId} and deleted_at is null and id = any(${[...ids]}::text[])`;
  const byId = new Map(rows.map((r) => [r.id, r.revision_number]));
  return ids.flatMap((id) => (byId.has(id) ? [{ id, revision: byId.get(id)! }] : []));
}

/** The text of one pinned revision (also of a since-deleted source); undefined when it never existed. */
export async function knowledgeRevisionContent(sql: Sql, ref: KnowledgeRef): Promise<{ file_name: string; size_bytes: number; content: string } | undefined> {
  const [row] = await sql<{ file_name: string; size_bytes: number; content: string }[]>`
    select file_name, size_bytes, content from knowledge_revisions where source_id = ${ref.id} and revision_number = ${ref.revision}`;
  return row;
}

export interface KnowledgeHit {
  source_id: string;
  revision_number: number;
  ordinal: number;
  text: string;
  rank: number;
}

/**
 * Full-text search over the passages of the given (source, revision) pairs, best first.
 * The query is free text (a user's last message): its words are normalised with the
 * `simple` configuration (lower-cased; no stemming or stop words, so any language works) and
 * a passage matches when it holds ANY of them (`plainto_tsquery` with its ANDs turned into
 * ORs: a spoken question rarely has every word in one passage); ranked by `ts_rank`, so
 * passages holding more of the words, more often, come first.
 * Callers scope `refs` to what the agent may read (a draft's sources or a version's pins).
 */
export async function searchKnowledge(sql: Sql, refs: readonly KnowledgeRef[], query: string, limit: number): Promise<KnowledgeHit[]> {
  if (refs.length === 0 || query.trim() === '' || limit < 1) return [];
  const ids = refs.map((r) => r.id);
  const revisions = refs.map((r) => r.revision);
  const rows = await sql<KnowledgeHit[]>`
    with q as (select replace(plainto_tsquery('simple', ${query})::text, ' & ', ' | ')::tsquery as q)
    select c.source_id, c.revision_number, c.ordinal, c.text, ts_rank(c.tsv, q.q)::float8 as rank
    from knowledge_chunks c, q
    where (c.source_id, c.revision_number) in (select * from unnest(${ids}::text[], ${revisions}::int[]))
      and c.tsv @@ q.q
    order by rank desc, c.source_id, c.ordinal
    limit ${limit}`;
  return rows.map((r) => ({ ...r, rank: Number(r.rank) }));
}
