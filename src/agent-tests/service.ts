/**
 * Agent tests (docs/api/agent-tests.md; API decided in D-TEST-1): workspace
 * resources attached to one agent, each a scripted user conversation and the criteria that
 * judge it. A run plays the conversation as text against the agent's draft (or a published
 * version), with its prompt, knowledge and tools (every webhook tool `blocking`, really
 * executed), then judges the transcript with the post-call analysis: `pass` when every
 * criterion is `success`, `fail` otherwise, `error` when the run or the judging failed.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Clock } from '../../actors/clock.ts';
import { realClock } from '../../actors/clock.ts';
import type { ServerMessage, SessionTool } from '../../actors/types.ts';
import { analysisModel, analyze, type AnalysisConfig } from '../analysis/index.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import { ServiceError, invalidField, notFound } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import { newId } from '../ids.ts';
import type { InferenceClient } from '../inference/index.ts';
import type { Logger } from '../log.ts';
import type { Resolver } from '../net/index.ts';
import {
  agentTestsOf, deleteAgentTest, getAgentTest, insertAgentTest, insertAgentTestRun, lastAgentTestRuns, listAgentTestRuns, listAgentTests, updateAgentTest,
  type AgentTestRow, type AgentTestRunRow,
} from './store.ts';
import { getAgent } from '../agents/store.ts';
import type { Sql } from '../store/db.ts';
import { getDraft, getVersion } from '../drafts/store.ts';
import type { PageRequest } from '../store/paginate.ts';
import type { SessionRow } from '../sessions/store.ts';
import { frozenToolsForPublish } from '../tools/store.ts';
import { AgentService } from '../agents/service.ts';
import { ANALYSIS_NAME_PATTERN, LIMITS, type StoredDraft } from '../agent-config/index.ts';
import { runTextConversation } from './runner.ts';
import { knowledgeRetriever } from '../knowledge/retrieval.ts';
import { buildPlan, inferenceBackend } from '../sessions/runtime.ts';
import { createSessionTools, toolSystemValues } from '../tools/runtime.ts';

/** Limits of a test (docs/api/agent-tests.md: name 200, each message 2,000, at least one message). */
export const AGENT_TEST_LIMITS = { nameChars: 200, turnChars: 2000, turns: 20, criteria: 10, runBatch: 20 } as const;

const criterion = z.strictObject({
  name: z.string().regex(ANALYSIS_NAME_PATTERN, 'name must match ^[a-z][a-z0-9_]{0,63}$'),
  description: z.string().max(LIMITS.analysisDescriptionChars).default(''),
});
const criteriaList = z.array(criterion).max(AGENT_TEST_LIMITS.criteria).superRefine((list, ctx) => {
  const seen = new Set<string>();
  list.forEach((c, i) => {
    if (seen.has(c.name)) ctx.addIssue({ code: 'custom', message: 'Value error, criterion names must be unique', path: [i, 'name'] });
    seen.add(c.name);
  });
});
const userTurns = z.array(z.string().min(1).max(AGENT_TEST_LIMITS.turnChars)).min(1).max(AGENT_TEST_LIMITS.turns);

export const agentTestCreateBody = z.strictObject({
  agent_id: z.string().min(1),
  name: z.string().min(1).max(AGENT_TEST_LIMITS.nameChars),
  user_turns: userTurns.describe('What the scripted user says, one entry per turn; the agent answers each'),
  criteria: criteriaList.nullable().optional().describe("Pass criteria; omitted or null: the agent's analysis criteria at run time"),
});
export const agentTestPatchBody = z.strictObject({
  name: z.string().min(1).max(AGENT_TEST_LIMITS.nameChars).optional(),
  user_turns: userTurns.optional(),
  criteria: criteriaList.nullable().optional().describe("null: the agent's analysis criteria"),
});
export const agentTestRunBody = z.strictObject({
  test_ids: z.array(z.string().min(1)).min(1).max(AGENT_TEST_LIMITS.runBatch).optional().describe("Default: every test of the agent (at most 20)"),
  version_number: z.number().int().min(1).optional().describe('A published version; omitted: the draft'),
});
export const agentTestListQuery = z.strictObject({ agent_id: z.string().optional() });

export const agentTestRun = z.object({
  run_id: z.string(),
  test_id: z.string(),
  agent_id: z.string(),
  version_number: z.number().int().nullable().describe('null: the draft'),
  config_hash: z.string(),
  verdict: z.enum(['pass', 'fail', 'error']),
  items: z.array(z.looseObject({ type: z.string() })).describe('The conversation: messages, tool calls and results, as a session detail shows them'),
  criteria_results: z.array(z.object({ name: z.string(), result: z.enum(['success', 'failure', 'unknown']), rationale: z.string() })),
  error: z.string().nullable(),
  latency_ms: z.number().int(),
  created_at: z.string(),
});
export const agentTest = z.object({
  test_id: z.string(),
  workspace_id: z.string(),
  agent_id: z.string(),
  name: z.string(),
  user_turns: z.array(z.string()),
  criteria: z.array(criterion).nullable(),
  last_run: agentTestRun.nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export const agentTestRunResult = z.object({ runs: z.array(agentTestRun) });
export type AgentTestRun = z.infer<typeof agentTestRun>;
export type AgentTest = z.infer<typeof agentTest>;

export function toRun(r: AgentTestRunRow): AgentTestRun {
  return {
    run_id: r.id,
    test_id: r.test_id,
    agent_id: r.agent_id,
    version_number: r.version_number,
    config_hash: r.config_hash,
    verdict: r.verdict,
    items: r.transcript as AgentTestRun['items'],
    criteria_results: r.criteria_results as AgentTestRun['criteria_results'],
    error: r.error,
    latency_ms: r.latency_ms,
    created_at: r.created_at.toISOString(),
  };
}

export function toTest(r: AgentTestRow, last: AgentTestRunRow | undefined): AgentTest {
  return {
    test_id: r.id,
    workspace_id: r.workspace_id,
    agent_id: r.agent_id,
    name: r.name,
    user_turns: r.user_turns,
    criteria: r.criteria,
    last_run: last ? toRun(last) : null,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

export interface AgentTestServiceDeps {
  sql: Sql;
  inference: Pick<InferenceClient, 'generate'> & Parameters<typeof inferenceBackend>[0];
  box: SecretBox;
  log: Logger;
  /** `PARLEY_OUTBOUND_ALLOW` for the webhook tools the runs execute. */
  allow: string[];
  lookup?: Resolver;
  clock?: Clock;
  turnTimeoutMs?: number;
}

/** What a run plays against: a draft or a published version, with its pins. */
interface Target {
  config: StoredDraft;
  configHash: string;
  versionNumber: number | null;
  pinned: { tools: unknown[] } | unknown;
}

export class AgentTestService {
  constructor(private readonly d: AgentTestServiceDeps) {}

  async create(p: Principal, body: z.infer<typeof agentTestCreateBody>): Promise<AgentTest> {
    AgentService.requireBeta(p);
    if (!(await getAgent(this.d.sql, p.teamId, body.agent_id))) throw invalidField(['body', 'agent_id'], 'Value error, unknown agent', 'value_error');
    const row = await insertAgentTest(this.d.sql, { id: newId('test'), team_id: p.teamId, agent_id: body.agent_id, name: body.name, user_turns: body.user_turns, criteria: body.criteria ?? null });
    return toTest(row, undefined);
  }

  async get(p: Principal, id: string): Promise<AgentTest> {
    const row = await getAgentTest(this.d.sql, p.teamId, id);
    if (!row) throw notFound('Agent test');
    return toTest(row, (await lastAgentTestRuns(this.d.sql, [row.id])).get(row.id));
  }

  async list(p: Principal, f: { agent_id?: string }, page: PageRequest) {
    const res = await listAgentTests(this.d.sql, p.teamId, { agentId: f.agent_id }, page);
    const last = await lastAgentTestRuns(this.d.sql, res.items.map((r) => r.id));
    return { ...res, items: res.items.map((r) => toTest(r, last.get(r.id))) };
  }

  async update(p: Principal, id: string, body: z.infer<typeof agentTestPatchBody>): Promise<AgentTest> {
    const row = await updateAgentTest(this.d.sql, p.teamId, id, body);
    if (!row) throw notFound('Agent test');
    return toTest(row, (await lastAgentTestRuns(this.d.sql, [row.id])).get(row.id));
  }

  async delete(p: Principal, id: string): Promise<void> {
    if (!(await deleteAgentTest(this.d.sql, p.teamId, id))) throw notFound('Agent test');
  }

  async runs(p: Principal, testId: string, page: PageRequest) {
    if (!(await getAgentTest(this.d.sql, p.teamId, testId))) throw notFound('Agent test');
    return listAgentTestRuns(this.d.sql, p.teamId, testId, page);
  }

  /**
   * Runs tests of an agent, one after another, and stores each run. 404 for an unknown agent
   * or version; 422 for a test id that is not one of the agent's tests; 400 for a custom LLM.
   */
  async run(p: Principal, agentId: string, body: z.infer<typeof agentTestRunBody>, signal?: AbortSignal): Promise<{ runs: AgentTestRun[] }> {
    if (!(await getAgent(this.d.sql, p.teamId, agentId))) throw notFound('Agent');
    const target = await this.target(p.teamId, agentId, body.version_number);
    if (target.config.llm?.custom) throw new ServiceError('bad_request', 'Agent tests cannot run against a custom LLM');
    const tests = await agentTestsOf(this.d.sql, p.teamId, agentId, body.test_ids);
    if (body.test_ids) {
      const found = new Set(tests.map((t) => t.id));
      const errors = body.test_ids.flatMap((id, i) => (found.has(id) ? [] : [{ type: 'value_error', loc: ['body', 'test_ids', i], msg: 'Value error, not a test of this agent', ctx: {} }]));
      if (errors.length) throw new ServiceError('invalid', 'Validation failed', { fields: errors });
    }
    const runs: AgentTestRun[] = [];
    for (const test of tests.slice(0, AGENT_TEST_LIMITS.runBatch)) {
      signal?.throwIfAborted();
      runs.push(toRun(await this.runOne(p.teamId, agentId, test, target, signal)));
    }
    return { runs };
  }

  private async target(teamId: string, agentId: string, versionNumber: number | undefined): Promise<Target> {
    if (versionNumber === undefined) {
      const draft = await getDraft(this.d.sql, teamId, agentId);
      if (!draft) throw notFound('Agent');
      const config = draft.config as StoredDraft;
      return { config, configHash: draft.config_hash, versionNumber: null, pinned: { tools: await frozenToolsForPublish(this.d.sql, teamId, config.tools.tool_ids) } };
    }
    const v = await getVersion(this.d.sql, teamId, agentId, versionNumber);
    if (!v) throw notFound('Version');
    return { config: v.config as StoredDraft, configHash: v.config_hash, versionNumber: v.version_number, pinned: v.pinned };
  }

  private async runOne(teamId: string, agentId: string, test: AgentTestRow, target: Target, signal?: AbortSignal): Promise<AgentTestRunRow> {
    const started = Date.now();
    const { config } = target;
    const clock = this.d.clock ?? realClock;
    // The session record a run would have: a console conversation, now, no overrides or variables.
    const session = {
      id: `test_${randomBytes(12).toString('hex')}`, team_id: teamId, agent_id: agentId, source: 'dashboard', direction: 'inbound',
      overrides: {}, dynamic_variables: {}, created_at: new Date(), timezone: config.conversation.timezone || 'UTC', world_context: true,
      caller_number: null, dialed_number: null, max_duration_seconds: config.conversation.max_duration_seconds, tool_events: true, end_user_id: null,
    } as unknown as SessionRow;
    const plan = buildPlan(session, config);
    const log = this.d.log.child({ agentTestId: test.id });
    const sink = { message: (_m: ServerMessage) => {} };
    let tools: SessionTool[] = [];
    try {
      tools = createSessionTools({ pinned: target.pinned, config: config.tools, box: this.d.box, clock, log, output: sink, outbound: { allow: this.d.allow, lookup: this.d.lookup }, system: toolSystemValues(session, plan.language) }).tools;
    } catch (err) {
      log.warn({ err }, 'agent test tools not available');
    }
    const criteria = test.criteria ?? config.analysis.criteria;
    let verdict: AgentTestRunRow['verdict'] = 'error';
    let error: string | null = null;
    let results: AgentTestRunRow['criteria_results'] = [];
    let items: Record<string, unknown>[] = [];
    try {
      const backend = inferenceBackend(this.d.inference, { teamId, chatModel: `llm-${config.llm?.tier ?? 'medium'}`, requestId: session.id, log });
      const retrieve = knowledgeRetriever(this.d.sql, target.versionNumber === null ? { config, draft: { teamId }, log } : { config, pinned: target.pinned, log });
      const run = await runTextConversation({ plan, backend, tools, retrieve, userTurns: test.user_turns, clock, log, turnTimeoutMs: this.d.turnTimeoutMs });
      items = run.items;
      if (run.error) error = run.error;
      else if (criteria.length === 0) error = 'No criteria to judge by: give the test criteria or the agent analysis criteria';
      else {
        const analysis: AnalysisConfig = { summary: { enabled: false, prompt: null, language: config.analysis.summary.language }, data_fields: [], criteria };
        const judged = await analyze(this.d.inference, { model: analysisModel(config), analysis, transcript: run.transcript, signal, teamId, requestId: session.id, timeoutMs: 60_000 });
        results = judged.criteria_results;
        verdict = results.every((r) => r.result === 'success') ? 'pass' : 'fail';
      }
    } catch (err) {
      if (signal?.aborted) throw err;
      log.warn({ err }, 'agent test run failed');
      error = err instanceof ServiceError ? err.message : 'The run failed';
    }
    return insertAgentTestRun(this.d.sql, {
      id: newId('run'), test_id: test.id, team_id: teamId, agent_id: agentId, version_number: target.versionNumber, config_hash: target.configHash,
      verdict: error ? 'error' : verdict, transcript: items, criteria_results: results, error, latency_ms: Date.now() - started,
    });
  }
}
