import type { Sql } from '../store/db.ts';
import { paginate, type Page, type PageRequest } from '../store/paginate.ts';

export interface AgentRow {
  id: string;
  team_id: string;
  workspace_id: string;
  name: string;
  description: string;
  status: 'active' | 'archived';
  public_enabled: boolean;
  allowed_origins: string[];
  overrides_allowed: string[];
  created_at: Date;
  updated_at: Date;
  /** Highest published version number, or null when never published. */
  live_version: number | null;
}

const agentCols = (sql: Sql) => sql`
  a.id, a.team_id, a.workspace_id, a.name, a.description, a.status, a.public_enabled,
  a.allowed_origins, a.overrides_allowed, a.created_at, a.updated_at,
  (select max(v.version_number) from agent_versions v where v.agent_id = a.id) as live_version`;

/** Creates the agent and its draft configuration in one transaction. */
export async function insertAgent(
  sql: Sql,
  a: { id: string; teamId: string; name: string; description: string; draft: unknown; draftHash: string },
): Promise<AgentRow> {
  return sql.begin(async (tx) => {
    await tx`insert into agents (id, team_id, workspace_id, name, description) values (${a.id}, ${a.teamId}, ${a.teamId}, ${a.name}, ${a.description})`;
    await tx`insert into agent_drafts (agent_id, config, config_hash) values (${a.id}, ${tx.json(a.draft as never)}, ${a.draftHash})`;
    const [row] = await tx<AgentRow[]>`select ${agentCols(tx as unknown as Sql)} from agents a where a.id = ${a.id}`;
    return row!;
  });
}

export async function getAgent(sql: Sql, teamId: string, id: string): Promise<AgentRow | undefined> {
  const [row] = await sql<AgentRow[]>`select ${agentCols(sql)} from agents a where a.id = ${id} and a.team_id = ${teamId}`;
  return row;
}

export interface AgentFilter {
  search?: string;
  includeArchived: boolean;
  publicationState: 'all' | 'live' | 'draft';
}

export async function listAgents(sql: Sql, teamId: string, f: AgentFilter, page: PageRequest): Promise<Page<AgentRow>> {
  const search = f.search ? `%${f.search.replace(/[\\%_]/g, (c) => '\\' + c)}%` : null;
  const live = sql`exists (select 1 from agent_versions v where v.agent_id = a.id)`;
  const where = sql`
    a.team_id = ${teamId}
    ${f.includeArchived ? sql`` : sql`and a.status = 'active'`}
    ${search ? sql`and (a.name ilike ${search} or a.description ilike ${search})` : sql``}
    ${f.publicationState === 'live' ? sql`and ${live}` : f.publicationState === 'draft' ? sql`and not ${live}` : sql``}`;
  return paginate<AgentRow>(sql, { select: agentCols(sql), from: sql`agents a`, where, order: 'created', page });
}

export interface AgentPatch {
  name?: string;
  description?: string;
  status?: 'active' | 'archived';
  public_enabled?: boolean;
  allowed_origins?: string[];
  overrides_allowed?: string[];
}

export async function updateAgent(sql: Sql, teamId: string, id: string, p: AgentPatch): Promise<AgentRow | undefined> {
  const set: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(p)) if (v !== undefined) set[k] = Array.isArray(v) ? sql.json(v) : v;
  if (Object.keys(set).length === 0) return getAgent(sql, teamId, id);
  const rows = await sql`update agents set ${sql(set as Record<string, never>)}, updated_at = clock_timestamp() where id = ${id} and team_id = ${teamId} returning id`;
  if (rows.length === 0) return undefined;
  return getAgent(sql, teamId, id);
}

/** Deletes the agent with its draft and versions (sessions keep their records). */
export async function deleteAgent(sql: Sql, teamId: string, id: string): Promise<boolean> {
  const rows = await sql`delete from agents where id = ${id} and team_id = ${teamId} returning id`;
  return rows.length === 1;
}
