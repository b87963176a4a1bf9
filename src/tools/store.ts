import type postgres from 'postgres';
import type { Sql } from '../store/db.ts';
import { paginate, type Page, type PageRequest } from '../store/paginate.ts';

/** A header as stored: secret headers keep only `sealed` (ciphertext), others only `value`. */
export interface StoredHeader {
  name: string;
  kind: 'custom' | 'authorization_bearer' | 'authorization_basic';
  secret: boolean;
  value: string | null;
  sealed: string | null;
}

export interface ToolArgument {
  name: string;
  description: string;
}

export interface MockResponse {
  name: string;
  status_code: number;
  content_type: string;
  body: string;
}

/** The writable content of a tool (what create stores and PATCH merges over). */
export interface ToolContent {
  name: string;
  description: string;
  tool_type: 'webhook' | 'client';
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  content_type: string;
  body_template: string;
  arguments: ToolArgument[];
  headers: StoredHeader[];
  timeout_seconds: number;
  error_handling: 'passthrough' | 'hide';
  execution_mode: 'blocking' | 'fire_and_forget' | 'background';
  expects_response: boolean;
  mock_responses: MockResponse[];
}

export interface ToolRow extends ToolContent {
  id: string;
  team_id: string;
  workspace_id: string;
  created_at: Date;
  updated_at: Date;
  /** Agents whose draft references the tool. */
  used_by: number;
}

type Fragment = postgres.PendingQuery<postgres.Row[]>;

/** A draft references a tool when its id is in `config.tools.tool_ids`. */
const draftRefs = (sql: Sql, toolId: Fragment) => sql`d.config->'tools'->'tool_ids' @> jsonb_build_array(${toolId})`;

const toolCols = (sql: Sql) => sql`
  t.id, t.team_id, t.workspace_id, t.name, t.description, t.tool_type, t.method, t.url, t.content_type,
  t.body_template, t.arguments, t.headers, t.timeout_seconds, t.error_handling, t.execution_mode,
  t.expects_response, t.mock_responses, t.created_at, t.updated_at,
  (select count(*)::int from agent_drafts d join agents a on a.id = d.agent_id
    where a.team_id = t.team_id and ${draftRefs(sql, sql`t.id`)}) as used_by`;

const json = (sql: Sql, v: unknown) => sql.json(v as never);

export async function insertTool(sql: Sql, t: { id: string; teamId: string; content: ToolContent }): Promise<ToolRow> {
  const c = t.content;
  await sql`
    insert into tools (id, team_id, workspace_id, name, description, tool_type, method, url, content_type, body_template,
      arguments, headers, timeout_seconds, error_handling, execution_mode, expects_response, mock_responses)
    values (${t.id}, ${t.teamId}, ${t.teamId}, ${c.name}, ${c.description}, ${c.tool_type}, ${c.method}, ${c.url}, ${c.content_type},
      ${c.body_template}, ${json(sql, c.arguments)}, ${json(sql, c.headers)}, ${c.timeout_seconds}, ${c.error_handling},
      ${c.execution_mode}, ${c.expects_response}, ${json(sql, c.mock_responses)})`;
  return (await getTool(sql, t.teamId, t.id))!;
}

export async function getTool(sql: Sql, teamId: string, id: string): Promise<ToolRow | undefined> {
  const [row] = await sql<ToolRow[]>`select ${toolCols(sql)} from tools t where t.id = ${id} and t.team_id = ${teamId}`;
  return row;
}

export interface ToolFilter {
  search?: string;
  /** Only tools referenced by this agent's draft (the caller checks the agent exists). */
  agentId?: string;
}

export async function listTools(sql: Sql, teamId: string, f: ToolFilter, page: PageRequest): Promise<Page<ToolRow>> {
  const search = f.search ? `%${f.search.replace(/[\\%_]/g, (c) => '\\' + c)}%` : null;
  const where = sql`
    t.team_id = ${teamId}
    ${search ? sql`and t.name ilike ${search}` : sql``}
    ${f.agentId ? sql`and exists (select 1 from agent_drafts d where d.agent_id = ${f.agentId} and ${draftRefs(sql, sql`t.id`)})` : sql``}`;
  return paginate<ToolRow>(sql, { select: toolCols(sql), from: sql`tools t`, where, order: 'created', page });
}

/** Replaces the tool's content (the service merged the patch); undefined when missing. */
export async function replaceTool(sql: Sql, teamId: string, id: string, c: ToolContent): Promise<ToolRow | undefined> {
  const rows = await sql`
    update tools set name = ${c.name}, description = ${c.description}, tool_type = ${c.tool_type}, method = ${c.method},
      url = ${c.url}, content_type = ${c.content_type}, body_template = ${c.body_template}, arguments = ${json(sql, c.arguments)},
      headers = ${json(sql, c.headers)}, timeout_seconds = ${c.timeout_seconds}, error_handling = ${c.error_handling},
      execution_mode = ${c.execution_mode}, expects_response = ${c.expects_response}, mock_responses = ${json(sql, c.mock_responses)},
      updated_at = clock_timestamp()
    where id = ${id} and team_id = ${teamId} returning id`;
  if (rows.length === 0) return undefined;
  return getTool(sql, teamId, id);
}

/**
 * Deletes the tool unless a draft references it. `missing` when it does not exist for the
 * team; `attached` with the number of agents whose draft references it.
 */
export async function deleteTool(sql: Sql, teamId: string, id: string): Promise<{ deleted: true } | { deleted: false; missing: true } | { deleted: false; missing: false; attached: number }> {
  return sql.begin(async (tx) => {
    const t = tx as unknown as Sql;
    const [row] = await t`select id from tools where id = ${id} and team_id = ${teamId} for update`;
    if (!row) return { deleted: false as const, missing: true as const };
    const [c] = await t<{ n: number }[]>`
      select count(*)::int as n from agent_drafts d join agents a on a.id = d.agent_id
      where a.team_id = ${teamId} and ${draftRefs(t, t`${id}::text`)}`;
    if (c!.n > 0) return { deleted: false as const, missing: false as const, attached: c!.n };
    await t`delete from tools where id = ${id} and team_id = ${teamId}`;
    return { deleted: true as const };
  });
}

/** Agents whose draft references the tool, newest first. */
export async function agentsUsingTool(sql: Sql, teamId: string, id: string): Promise<{ agent_id: string; name: string }[]> {
  return sql<{ agent_id: string; name: string }[]>`
    select a.id as agent_id, a.name from agents a join agent_drafts d on d.agent_id = a.id
    where a.team_id = ${teamId} and ${draftRefs(sql, sql`${id}::text`)}
    order by a.created_at desc, a.id desc`;
}

/** The subset of `ids` that are tools of the team (the draft config's reference check). */
export async function toolIdsOf(sql: Sql, teamId: string, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await sql<{ id: string }[]>`select id from tools where team_id = ${teamId} and id = any(${[...ids]}::text[])`;
  return new Set(rows.map((r) => r.id));
}

/**
 * Full tool records (headers sealed, as stored) for publishing to pin, in the order of
 * `ids`; ids that are not the team's tools are left out.
 */
export async function frozenToolsForPublish(sql: Sql, teamId: string, ids: readonly string[]): Promise<ToolRow[]> {
  if (ids.length === 0) return [];
  const rows = await sql<ToolRow[]>`select ${toolCols(sql)} from tools t where t.team_id = ${teamId} and t.id = any(${[...ids]}::text[])`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
}
