import type { Sql } from '../store/db.ts';
import { paginate, type Page, type PageRequest } from '../store/paginate.ts';

/** One `agent_tests` row (migration 009). */
export interface AgentTestRow {
  id: string;
  team_id: string;
  workspace_id: string;
  agent_id: string;
  name: string;
  user_turns: string[];
  criteria: { name: string; description: string }[] | null;
  created_at: Date;
  updated_at: Date;
}

/** One `agent_test_runs` row. */
export interface AgentTestRunRow {
  id: string;
  test_id: string;
  team_id: string;
  agent_id: string;
  version_number: number | null;
  config_hash: string;
  verdict: 'pass' | 'fail' | 'error';
  transcript: Record<string, unknown>[];
  criteria_results: { name: string; result: string; rationale: string }[];
  error: string | null;
  latency_ms: number;
  created_at: Date;
}

export async function insertAgentTest(sql: Sql, t: Omit<AgentTestRow, 'created_at' | 'updated_at' | 'workspace_id'>): Promise<AgentTestRow> {
  const [row] = await sql<AgentTestRow[]>`
    insert into agent_tests (id, team_id, workspace_id, agent_id, name, user_turns, criteria)
    values (${t.id}, ${t.team_id}, ${t.team_id}, ${t.agent_id}, ${t.name}, ${sql.json(t.user_turns)}, ${t.criteria === null ? null : sql.json(t.criteria)})
    returning *`;
  return row!;
}

export async function getAgentTest(sql: Sql, teamId: string, id: string): Promise<AgentTestRow | undefined> {
  const [row] = await sql<AgentTestRow[]>`select * from agent_tests where id = ${id} and team_id = ${teamId}`;
  return row;
}

/** The team's tests of one agent (all when `ids` is undefined, else those ids), oldest first. */
export function agentTestsOf(sql: Sql, teamId: string, agentId: string, ids?: readonly string[]): Promise<AgentTestRow[]> {
  return sql<AgentTestRow[]>`
    select * from agent_tests where team_id = ${teamId} and agent_id = ${agentId}
    ${ids ? sql`and id = any(${[...ids]}::text[])` : sql``}
    order by created_at, id`;
}

export function listAgentTests(sql: Sql, teamId: string, f: { agentId?: string }, page: PageRequest): Promise<Page<AgentTestRow>> {
  const where = sql`team_id = ${teamId} ${f.agentId !== undefined ? sql`and agent_id = ${f.agentId}` : sql``}`;
  return paginate<AgentTestRow>(sql, { select: sql`*`, from: sql`agent_tests`, where, order: 'created', page });
}

/** Partial update; `criteria` null means "the agent's criteria". Undefined when missing. */
export async function updateAgentTest(
  sql: Sql,
  teamId: string,
  id: string,
  p: { name?: string; user_turns?: string[]; criteria?: AgentTestRow['criteria'] },
): Promise<AgentTestRow | undefined> {
  const [row] = await sql<AgentTestRow[]>`
    update agent_tests set
      name = coalesce(${p.name ?? null}, name),
      user_turns = coalesce(${p.user_turns ? sql.json(p.user_turns) : null}::jsonb, user_turns),
      criteria = case when ${p.criteria !== undefined} then ${p.criteria ? sql.json(p.criteria) : null}::jsonb else criteria end,
      updated_at = clock_timestamp()
    where id = ${id} and team_id = ${teamId}
    returning *`;
  return row;
}

export async function deleteAgentTest(sql: Sql, teamId: string, id: string): Promise<boolean> {
  const rows = await sql`delete from agent_tests where id = ${id} and team_id = ${teamId} returning id`;
  return rows.length === 1;
}

export async function insertAgentTestRun(sql: Sql, r: Omit<AgentTestRunRow, 'created_at'>): Promise<AgentTestRunRow> {
  const [row] = await sql<AgentTestRunRow[]>`
    insert into agent_test_runs (id, test_id, team_id, agent_id, version_number, config_hash, verdict, transcript, criteria_results, error, latency_ms)
    values (${r.id}, ${r.test_id}, ${r.team_id}, ${r.agent_id}, ${r.version_number}, ${r.config_hash}, ${r.verdict},
      ${sql.json(r.transcript as never)}, ${sql.json(r.criteria_results as never)}, ${r.error}, ${r.latency_ms})
    returning *`;
  return row!;
}

export function listAgentTestRuns(sql: Sql, teamId: string, testId: string, page: PageRequest): Promise<Page<AgentTestRunRow>> {
  return paginate<AgentTestRunRow>(sql, { select: sql`*`, from: sql`agent_test_runs`, where: sql`team_id = ${teamId} and test_id = ${testId}`, order: 'created', page });
}

/** The newest run of each of the given tests. */
export async function lastAgentTestRuns(sql: Sql, testIds: readonly string[]): Promise<Map<string, AgentTestRunRow>> {
  if (testIds.length === 0) return new Map();
  const rows = await sql<AgentTestRunRow[]>`
    select distinct on (test_id) * from agent_test_runs where test_id = any(${[...testIds]}::text[])
    order by test_id, created_at desc, id desc`;
  return new Map(rows.map((r) => [r.test_id, r]));
}
