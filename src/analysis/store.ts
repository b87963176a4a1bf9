import type { StoredDraft } from '../agent-config/index.ts';
import type { Sql } from '../store/db.ts';
import type { SessionRow } from '../sessions/store.ts';
import { analyzedQueueCte } from '../webhooks/store.ts';

/**
 * Claims up to `limit` due analyses: `queued` ones whose `analysis_due_at` passed and `running`
 * ones whose lease expired (their node died). Claiming counts the attempt. Safe across nodes
 * (SKIP LOCKED).
 */
export async function claimDueAnalyses(sql: Sql, o: { limit: number; leaseMs: number; claimId: string }): Promise<SessionRow[]> {
  if (o.limit <= 0) return [];
  return sql<SessionRow[]>`
    update sessions s set analysis_status = 'running', analysis_attempts = s.analysis_attempts + 1, analysis_claim = ${o.claimId},
      analysis_lease_until = clock_timestamp() + make_interval(secs => ${o.leaseMs / 1000})
    where s.id in (
      select c.id from sessions c
      where (c.analysis_status = 'queued' and c.analysis_due_at <= clock_timestamp())
         or (c.analysis_status = 'running' and c.analysis_lease_until < clock_timestamp())
      order by c.analysis_due_at
      limit ${o.limit}
      for update skip locked)
    returning s.*`;
}

/** The version a session ran (a preview: the draft frozen at its creation) and its transcript (messages only, in order). */
export async function loadAnalysisInput(sql: Sql, session: SessionRow): Promise<{ config: StoredDraft; messages: { role: 'user' | 'assistant'; content: string }[] } | undefined> {
  const [version] = session.preview
    ? session.preview_config ? [{ config: session.preview_config }] : []
    : await sql<{ config: StoredDraft }[]>`
    select config from agent_versions where agent_id = ${session.agent_id} and version_number = ${session.version_number}`;
  if (!version) return undefined;
  const rows = await sql<{ role: 'user' | 'assistant'; content: string }[]>`
    select payload->>'role' as role, payload->>'content' as content from session_items
    where session_id = ${session.id} and type = 'message' and payload->>'role' in ('user', 'assistant')
    order by seq`;
  return { config: version.config, messages: rows.map((r) => ({ role: r.role, content: r.content ?? '' })) };
}

/**
 * Settles a claimed analysis (`completed` or `error`) and queues its `call.analyzed` deliveries
 * in the same statement. False when the claim is no longer ours (another node took it over).
 */
export async function settleAnalysis(
  sql: Sql,
  sessionId: string,
  claimId: string,
  o: { status: 'completed' | 'error'; analysis: unknown; error: string | null },
): Promise<boolean> {
  const rows = await sql`
    with analyzed as (
      update sessions s set analysis_status = ${o.status}, analysis = ${sql.json(o.analysis as never)},
        analysis_finished_at = clock_timestamp(), analysis_due_at = null, analysis_lease_until = null, analysis_claim = null
      where s.id = ${sessionId} and s.analysis_claim = ${claimId} and s.analysis_status = 'running'
      returning s.*
    ),
    webhooks as (${analyzedQueueCte(sql, o.error)}),
    -- A preview keeps no transcript: it was kept only for this analysis.
    purge as (delete from session_items i using analyzed a where i.session_id = a.id and a.preview)
    select id from analyzed`;
  return rows.length === 1;
}

/** Gives a claimed analysis back: due again after `delayMs` (a retry) or at once (this node stops). */
export async function releaseAnalysis(sql: Sql, sessionId: string, claimId: string, o: { delayMs: number; uncount?: boolean }): Promise<boolean> {
  const rows = await sql`
    update sessions set analysis_status = 'queued', analysis_claim = null, analysis_lease_until = null,
      analysis_due_at = clock_timestamp() + make_interval(secs => ${o.delayMs / 1000}),
      analysis_attempts = case when ${o.uncount ?? false}::boolean then greatest(analysis_attempts - 1, 0) else analysis_attempts end
    where id = ${sessionId} and analysis_claim = ${claimId} and analysis_status = 'running'
    returning id`;
  return rows.length === 1;
}
