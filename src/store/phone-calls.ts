/**
 * Phone calls: the outbound limits (attempts per UTC day, calls in progress), the
 * `Idempotency-Key` record of call creation, dial outcomes, and the number a call reached.
 */
import type { Sql } from './db.ts';
import type { PhoneNumberRow } from './phone-numbers.ts';

/** How long an `Idempotency-Key` is remembered (GAPS.md §13.3). */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000;

/** Counts one outbound attempt of the team for the current UTC day; returns the day's count including it. */
export async function countOutboundAttempt(sql: Sql, teamId: string): Promise<number> {
  const [row] = await sql<{ attempts: number }[]>`
    insert into phone_call_days (team_id, day, attempts) values (${teamId}, (clock_timestamp() at time zone 'UTC')::date, 1)
    on conflict (team_id, day) do update set attempts = phone_call_days.attempts + 1
    returning attempts`;
  return row!.attempts;
}

/** Outbound calls of the team that are ringing or live. */
export async function liveOutboundCalls(sql: Sql, teamId: string): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from sessions
    where team_id = ${teamId} and source = 'phone' and direction = 'outbound' and status in ('pending', 'active')`;
  return row!.n;
}

export type IdempotencyClaim =
  | { state: 'new' }
  | { state: 'replay'; status: number; response: unknown }
  | { state: 'in_progress' }
  | { state: 'reused' };

/**
 * Claims `key` for a request whose body hashes to `bodyHash`. `new`: this request owns the key
 * (complete or release it); `replay`: the stored answer; `in_progress`: the first request is
 * still running; `reused`: the key was used with another body. Keys older than the window
 * are forgotten.
 */
export async function claimIdempotencyKey(sql: Sql, teamId: string, key: string, bodyHash: string): Promise<IdempotencyClaim> {
  await sql`delete from phone_call_requests where team_id = ${teamId} and key = ${key} and created_at < clock_timestamp() - ${IDEMPOTENCY_WINDOW_MS / 1000} * interval '1 second'`;
  const inserted = await sql`
    insert into phone_call_requests (team_id, key, body_hash) values (${teamId}, ${key}, ${bodyHash})
    on conflict (team_id, key) do nothing returning key`;
  if (inserted.length) return { state: 'new' };
  const [row] = await sql<{ body_hash: string; status: number | null; response: unknown }[]>`
    select body_hash, status, response from phone_call_requests where team_id = ${teamId} and key = ${key}`;
  if (!row) return claimIdempotencyKey(sql, teamId, key, bodyHash);
  if (row.body_hash !== bodyHash) return { state: 'reused' };
  if (row.status === null) return { state: 'in_progress' };
  return { state: 'replay', status: row.status, response: row.response };
}

export async function completeIdempotencyKey(sql: Sql, teamId: string, key: string, status: number, response: unknown): Promise<void> {
  await sql`update phone_call_requests set status = ${status}, response = ${sql.json(response as never)} where team_id = ${teamId} and key = ${key}`;
}

/** Forgets a claimed key whose request failed, so that a retry with the same key runs again. */
export async function releaseIdempotencyKey(sql: Sql, teamId: string, key: string): Promise<void> {
  await sql`delete from phone_call_requests where team_id = ${teamId} and key = ${key} and status is null`;
}

/** Records how the dial of an outbound call ended (`answered`, `busy`, `no_answer`, `failed`). */
export async function setDialStatus(sql: Sql, sessionId: string, dialStatus: string, answeredBy: string | null): Promise<void> {
  await sql`update sessions set dial_status = ${dialStatus}, answered_by = ${answeredBy} where id = ${sessionId}`;
}

/** The active number that holds `phoneNumber`, on any team (an inbound call reached it). */
export async function numberForInbound(sql: Sql, phoneNumber: string): Promise<PhoneNumberRow | undefined> {
  const [row] = await sql<PhoneNumberRow[]>`select * from phone_numbers where phone_number = ${phoneNumber} and status = 'active' limit 1`;
  return row;
}

/** A live number of the team by id. */
export async function numberOfTeam(sql: Sql, teamId: string, id: string): Promise<PhoneNumberRow | undefined> {
  const [row] = await sql<PhoneNumberRow[]>`select * from phone_numbers where id = ${id} and team_id = ${teamId} and status <> 'released'`;
  return row;
}
