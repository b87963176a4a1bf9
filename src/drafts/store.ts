import type { Sql } from '../store/db.ts';
import { paginate, type Page, type PageRequest } from '../store/paginate.ts';

export interface DraftRow {
  agent_id: string;
  config: unknown;
  config_hash: string;
  updated_at: Date;
}

export interface VersionRow {
  agent_id: string;
  version_number: number;
  config: unknown;
  config_hash: string;
  version_title: string | null;
  version_description: string | null;
  published_at: Date;
  pinned: unknown;
}

export type VersionSummaryRow = Omit<VersionRow, 'config' | 'pinned'>;

/** The draft of one of the team's agents. */
export async function getDraft(sql: Sql, teamId: string, agentId: string): Promise<DraftRow | undefined> {
  const [row] = await sql<DraftRow[]>`
    select d.agent_id, d.config, d.config_hash, d.updated_at from agent_drafts d join agents a on a.id = d.agent_id
    where d.agent_id = ${agentId} and a.team_id = ${teamId}`;
  return row;
}

/**
 * Read-modify-write of a draft under a row lock, so concurrent PATCHes never lose each
 * other's changes. `change` returns the new config and hash, or throws (validation): then
 * nothing is written and the draft keeps its content and hash.
 */
export async function updateDraft(
  sql: Sql,
  teamId: string,
  agentId: string,
  change: (current: DraftRow, tx: Sql) => Promise<{ config: unknown; hash: string } | null>,
): Promise<DraftRow | undefined> {
  return sql.begin(async (tx) => {
    const [current] = await tx<DraftRow[]>`
      select d.agent_id, d.config, d.config_hash, d.updated_at from agent_drafts d join agents a on a.id = d.agent_id
      where d.agent_id = ${agentId} and a.team_id = ${teamId} for update of d`;
    if (!current) return undefined;
    const next = await change(current, tx as unknown as Sql);
    if (!next) return current;
    const [row] = await tx<DraftRow[]>`
      update agent_drafts set config = ${tx.json(next.config as never)}, config_hash = ${next.hash}, updated_at = clock_timestamp()
      where agent_id = ${agentId} returning agent_id, config, config_hash, updated_at`;
    return row;
  });
}

/**
 * How publish decides, when the caller has its own notion of the draft's state (the agent
 * service folds the attached tools and knowledge revisions into the hash, `src/drafts/service.ts`).
 */
export interface PublishPolicy {
  /** The `config_hash` a new version gets for this draft and what `pin` froze. */
  hash(draft: DraftRow, pinned: unknown): string;
  /** True when `latest` already is this draft with these pins: publish returns it unchanged. */
  unchanged(latest: VersionRow, draft: DraftRow, pinned: unknown, hash: string): boolean;
}

/**
 * Publishes the draft: when the latest version already is the draft (same hash, and `pin`
 * freezes the same thing that version froze), that version is returned unchanged
 * (`created: false`); otherwise version N+1 is written with the draft's config and what `pin`
 * freezes. Comparing the pins too is what lets an edited tool or a new knowledge revision
 * reach live sessions at the next publish ("editing a tool changes every agent that uses it")
 * although the draft itself, which holds only their ids, is unchanged. Without a `policy`, the
 * hash is the draft's and pins compare by jsonb equality. The draft row lock serialises
 * concurrent publishes.
 */
export async function publishDraft(
  sql: Sql,
  teamId: string,
  agentId: string,
  meta: { title: string | null; description: string | null },
  pin: (draft: DraftRow, tx: Sql) => Promise<unknown>,
  policy?: PublishPolicy,
): Promise<{ version: VersionRow; created: boolean } | undefined> {
  return sql.begin(async (tx) => {
    const [draft] = await tx<DraftRow[]>`
      select d.agent_id, d.config, d.config_hash, d.updated_at from agent_drafts d join agents a on a.id = d.agent_id
      where d.agent_id = ${agentId} and a.team_id = ${teamId} for update of d`;
    if (!draft) return undefined;
    const [latest] = await tx<VersionRow[]>`
      select * from agent_versions where agent_id = ${agentId} order by version_number desc limit 1`;
    const pinned = await pin(draft, tx as unknown as Sql);
    const hash = policy ? policy.hash(draft, pinned) : draft.config_hash;
    if (latest && policy && policy.unchanged(latest, draft, pinned, hash)) return { version: latest, created: false };
    if (latest && !policy && latest.config_hash === draft.config_hash) {
      // jsonb equality: key order and whitespace of the stored form do not matter.
      const [same] = await tx<{ same: boolean }[]>`select ${tx.json(pinned as never)}::jsonb = ${tx.json(latest.pinned as never)}::jsonb as same`;
      if (same?.same) return { version: latest, created: false };
    }
    const [version] = await tx<VersionRow[]>`
      insert into agent_versions (agent_id, version_number, config, config_hash, version_title, version_description, pinned)
      values (${agentId}, ${(latest?.version_number ?? 0) + 1}, ${tx.json(draft.config as never)}, ${hash},
              ${meta.title}, ${meta.description}, ${tx.json(pinned as never)})
      returning *`;
    await tx`update agents set updated_at = clock_timestamp() where id = ${agentId}`;
    return { version: version!, created: true };
  });
}

export async function getVersion(sql: Sql, teamId: string, agentId: string, n: number): Promise<VersionRow | undefined> {
  const [row] = await sql<VersionRow[]>`
    select v.* from agent_versions v join agents a on a.id = v.agent_id
    where v.agent_id = ${agentId} and a.team_id = ${teamId} and v.version_number = ${n}`;
  return row;
}

/** The version sessions run against: the highest number. */
export async function latestVersion(sql: Sql, teamId: string, agentId: string): Promise<VersionRow | undefined> {
  const [row] = await sql<VersionRow[]>`
    select v.* from agent_versions v join agents a on a.id = v.agent_id
    where v.agent_id = ${agentId} and a.team_id = ${teamId} order by v.version_number desc limit 1`;
  return row;
}

export function listVersions(sql: Sql, agentId: string, page: PageRequest): Promise<Page<VersionSummaryRow>> {
  return paginate<VersionSummaryRow>(sql, {
    select: sql`agent_id, version_number, config_hash, version_title, version_description, published_at`,
    from: sql`agent_versions`,
    where: sql`agent_id = ${agentId}`,
    order: { column: 'version_number' },
    page,
  });
}
