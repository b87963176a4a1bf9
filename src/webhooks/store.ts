import type { Sql } from '../store/db.ts';

export type DeliveryStatus = 'pending' | 'delivering' | 'delivered' | 'failed';

/** One `webhook_deliveries` row (migration 008). */
export interface DeliveryRow {
  id: string;
  team_id: string;
  session_id: string;
  endpoint_index: number;
  url: string;
  secret_sealed: string | null;
  event: string;
  seq: number;
  body: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: Date | null;
  lease_until: Date | null;
  claim_id: string | null;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  delivered_at: Date | null;
}

/**
 * The `session` object of a post-call body (docs/api/webhooks.md), built from a `sessions` row aliased
 * `e` (compact JSON; `metadata` embedded as the stored `json` text, so verbatim).
 */
function sessionSnapshot(sql: Sql, atDial = false) {
  // `atDial`: the snapshot of `phone_call.dial_finished`, taken at dial time: no end, no duration.
  return sql`
    select row_to_json(x) as session from (
      select e.id, e.agent_id, e.agent_name, null::text as branch_id, e.source, ${atDial ? sql`'pending'::text` : sql`e.status`} as status, e.direction,
             e.dial_status, e.answered_by, null::text as batch_call_id,
             to_char(e.started_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as conversation_started_at,
             ${atDial ? sql`null::text` : sql`to_char(e.ended_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`} as conversation_ended_at,
             ${atDial ? sql`null::int` : sql`round(extract(epoch from (e.ended_at - e.started_at)))::int`} as duration_seconds,
             coalesce(e.end_user_id, '') as end_user_id, e.metadata, e.config_hash
    ) x`;
}

/**
 * The body of a data-modifying CTE that queues the post-call deliveries of the sessions a
 * statement just ended. Contract: the enclosing statement has a CTE named `ended` whose rows
 * are `sessions` rows as updated (`returning s.*`). Run inside that statement, the queue is
 * written atomically with the end: a session is never ended without its deliveries.
 *
 * Which sessions: every one that started (someone joined) and is not a builder preview
 * (`preview`, migration 011; previews send nothing, docs/api/webhooks.md); a session nobody joined
 * sends nothing, like an expired pending one.
 * Which endpoints: every `webhooks.post_call` entry of the version the session ran.
 * What: `call.ended` (seq 1); and `call.analyzed` (seq 2) at once when the same statement
 * settled the analysis as `skipped` (analysis disabled, or no user message). A queued analysis
 * queues its `call.analyzed` when it settles (`analyzedQueueCte`).
 * Bodies are built here once and never rebuilt: every attempt sends the same bytes.
 */
export function postCallQueueCte(sql: Sql) {
  return sql`
    insert into webhook_deliveries (id, team_id, session_id, endpoint_index, url, secret_sealed, event, seq, body, next_attempt_at)
    select 'whd_' || substr(md5(gen_random_uuid()::text), 1, 24), e.team_id, e.id, (w.ord - 1)::int,
           w.ep->>'url', w.ep->'secret'->>'sealed', ev.event, ev.seq, ev.body, clock_timestamp()
    from ended e
    join agent_versions v on v.agent_id = e.agent_id and v.version_number = e.version_number
    cross join lateral jsonb_array_elements(coalesce(v.config->'webhooks'->'post_call', '[]'::jsonb)) with ordinality as w(ep, ord)
    cross join lateral (${sessionSnapshot(sql)}) s
    cross join lateral (
      select 1 as seq, 'call.ended' as event, (select row_to_json(p)::text from (select 'call.ended' as event, s.session, e.ended_reason) p) as body
      union all
      select 2, 'call.analyzed', (select row_to_json(p)::text from (
        select 'call.analyzed' as event, s.session, '{"status":"skipped","summary":null,"data":[],"criteria_results":[]}'::json as analysis, null::text as error,
               to_char(e.ended_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as finished_at) p)
      where e.analysis_status = 'skipped'
    ) ev
    where e.started_at is not null and not e.preview`;
}

/**
 * The body of a data-modifying CTE that queues `phone_call.dial_finished` (seq 0: before
 * `call.ended`) of outbound calls whose dial a statement just settled (docs/api/webhooks.md: once per
 * call, answered or not). Contract: the enclosing statement has a CTE named `dialed` of
 * `sessions` rows as updated, with `dial_status` and `answered_by` set. Same endpoints (the
 * version's `webhooks.post_call`) and signing as the post-call events; the session snapshot is
 * the one at dial time (status `pending`, end and duration null). Body:
 * `{event: "phone_call.dial_finished", session, dial_status, answered_by}`.
 */
export function dialFinishedQueueCte(sql: Sql) {
  return sql`
    insert into webhook_deliveries (id, team_id, session_id, endpoint_index, url, secret_sealed, event, seq, body, next_attempt_at)
    select 'whd_' || substr(md5(gen_random_uuid()::text), 1, 24), e.team_id, e.id, (w.ord - 1)::int,
           w.ep->>'url', w.ep->'secret'->>'sealed', 'phone_call.dial_finished', 0,
           (select row_to_json(p)::text from (
             select 'phone_call.dial_finished' as event, s.session, e.dial_status, e.answered_by) p),
           clock_timestamp()
    from dialed e
    join agent_versions v on v.agent_id = e.agent_id and v.version_number = e.version_number
    cross join lateral jsonb_array_elements(coalesce(v.config->'webhooks'->'post_call', '[]'::jsonb)) with ordinality as w(ep, ord)
    cross join lateral (${sessionSnapshot(sql, true)}) s
    where e.direction = 'outbound' and not e.preview
    on conflict (session_id, endpoint_index, seq) do nothing`;
}

/**
 * The body of a data-modifying CTE that queues `call.analyzed` (seq 2) for sessions whose
 * analysis a statement just settled. Contract: the enclosing statement has a CTE named
 * `analyzed` of `sessions` rows as updated, with `analysis` (the entity), `analysis_finished_at`
 * set, and `error` given here (null unless the analysis failed). Same endpoints and session
 * snapshot as `postCallQueueCte`; an analysis settled twice queues nothing the second time.
 */
export function analyzedQueueCte(sql: Sql, error: string | null) {
  return sql`
    insert into webhook_deliveries (id, team_id, session_id, endpoint_index, url, secret_sealed, event, seq, body, next_attempt_at)
    select 'whd_' || substr(md5(gen_random_uuid()::text), 1, 24), e.team_id, e.id, (w.ord - 1)::int,
           w.ep->>'url', w.ep->'secret'->>'sealed', 'call.analyzed', 2,
           (select row_to_json(p)::text from (
             select 'call.analyzed' as event, s.session, e.analysis::json as analysis, ${error}::text as error,
                    to_char(e.analysis_finished_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as finished_at) p),
           clock_timestamp()
    from analyzed e
    join agent_versions v on v.agent_id = e.agent_id and v.version_number = e.version_number
    cross join lateral jsonb_array_elements(coalesce(v.config->'webhooks'->'post_call', '[]'::jsonb)) with ordinality as w(ep, ord)
    cross join lateral (${sessionSnapshot(sql)}) s
    where e.started_at is not null and not e.preview
    on conflict (session_id, endpoint_index, seq) do nothing`;
}

/**
 * Claims up to `limit` deliveries that are due: pending ones whose `next_attempt_at` passed,
 * and delivering ones whose lease expired (their worker died). A row is skipped while an
 * earlier event of the same session and endpoint is unfinished, so `call.ended` always goes
 * before `call.analyzed`. Claiming counts the attempt. Safe across nodes (SKIP LOCKED).
 */
export async function claimDueDeliveries(sql: Sql, o: { limit: number; leaseMs: number; claimId: string }): Promise<DeliveryRow[]> {
  if (o.limit <= 0) return [];
  return sql<DeliveryRow[]>`
    update webhook_deliveries d set
      status = 'delivering', attempts = d.attempts + 1, claim_id = ${o.claimId}, updated_at = clock_timestamp(),
      lease_until = clock_timestamp() + make_interval(secs => ${o.leaseMs / 1000})
    where d.id in (
      select c.id from webhook_deliveries c
      where ((c.status = 'pending' and c.next_attempt_at <= clock_timestamp()) or (c.status = 'delivering' and c.lease_until < clock_timestamp()))
        and not exists (
          select 1 from webhook_deliveries p
          where p.session_id = c.session_id and p.endpoint_index = c.endpoint_index and p.seq < c.seq and p.status in ('pending', 'delivering'))
      order by c.next_attempt_at nulls first
      limit ${o.limit}
      for update skip locked)
    returning d.*`;
}

/** Outcome of one attempt, written only while the claim is still ours. */
export type AttemptOutcome =
  | { kind: 'delivered'; statusCode: number }
  | { kind: 'retry'; statusCode: number | null; error: string; delayMs: number }
  | { kind: 'failed'; statusCode: number | null; error: string }
  /** Interrupted by this node's shutdown: not counted, due again at once. */
  | { kind: 'released' };

export async function recordAttempt(sql: Sql, id: string, claimId: string, o: AttemptOutcome): Promise<boolean> {
  let rows;
  switch (o.kind) {
    case 'delivered':
      rows = await sql`
        update webhook_deliveries set status = 'delivered', last_status_code = ${o.statusCode}, last_error = null,
          delivered_at = clock_timestamp(), next_attempt_at = null, lease_until = null, claim_id = null, updated_at = clock_timestamp()
        where id = ${id} and claim_id = ${claimId} returning id`;
      break;
    case 'retry':
      rows = await sql`
        update webhook_deliveries set status = 'pending', last_status_code = ${o.statusCode}, last_error = ${o.error},
          next_attempt_at = clock_timestamp() + make_interval(secs => ${o.delayMs / 1000}), lease_until = null, claim_id = null,
          updated_at = clock_timestamp()
        where id = ${id} and claim_id = ${claimId} returning id`;
      break;
    case 'failed':
      rows = await sql`
        update webhook_deliveries set status = 'failed', last_status_code = ${o.statusCode}, last_error = ${o.error},
          next_attempt_at = null, lease_until = null, claim_id = null, updated_at = clock_timestamp()
        where id = ${id} and claim_id = ${claimId} returning id`;
      break;
    case 'released':
      rows = await sql`
        update webhook_deliveries set status = 'pending', attempts = greatest(attempts - 1, 0), next_attempt_at = clock_timestamp(),
          lease_until = null, claim_id = null, updated_at = clock_timestamp()
        where id = ${id} and claim_id = ${claimId} returning id`;
      break;
  }
  return rows.length === 1;
}

/** The deliveries of one of the team's sessions, by endpoint then event order. */
export function listSessionDeliveries(sql: Sql, teamId: string, sessionId: string): Promise<DeliveryRow[]> {
  return sql<DeliveryRow[]>`
    select * from webhook_deliveries where team_id = ${teamId} and session_id = ${sessionId}
    order by endpoint_index, seq, created_at`;
}

/**
 * Queues a delivery again with a fresh budget of attempts, due now (same body; a new
 * signature at send time). `busy` when an attempt is in flight; undefined when missing.
 */
export async function redeliver(sql: Sql, teamId: string, sessionId: string, id: string): Promise<DeliveryRow | 'busy' | undefined> {
  const [row] = await sql<DeliveryRow[]>`
    update webhook_deliveries set status = 'pending', attempts = 0, next_attempt_at = clock_timestamp(), lease_until = null,
      claim_id = null, updated_at = clock_timestamp()
    where id = ${id} and team_id = ${teamId} and session_id = ${sessionId} and status <> 'delivering'
    returning *`;
  if (row) return row;
  const [exists] = await sql`select 1 from webhook_deliveries where id = ${id} and team_id = ${teamId} and session_id = ${sessionId}`;
  return exists ? 'busy' : undefined;
}
