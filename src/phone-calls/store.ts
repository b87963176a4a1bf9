/**
 * Phone calls: the outbound daily limit (attempts per UTC day; calls in progress are leased
 * slots of the shared state, src/phone-calls/service.ts), the `Idempotency-Key` record of call
 * creation, dial outcomes (and their `phone_call.dial_finished` webhooks), transfer minutes,
 * and the number a call reached.
 */
import type { Sql } from '../store/db.ts';
import type { PhoneNumberRow } from '../phone-numbers/store.ts';
import { dialFinishedQueueCte } from '../webhooks/store.ts';

/** How long an `Idempotency-Key` is remembered (docs/api/phone.md). */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600_000;

/** Counts one outbound attempt of the team for the current UTC day; returns the day's count including it. */
export async function countOutboundAttempt(sql: Sql, teamId: string): Promise<number> {
  const [row] = await sql<{ attempts: number }[]>`
    insert into phone_call_days (team_id, day, attempts) values (${teamId}, (clock_timestamp() at time zone 'UTC')::date, 1)
    on conflict (team_id, day) do update set attempts = phone_call_days.attempts + 1
    returning attempts`;
  return row!.attempts;
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

/**
 * Records how the dial of an outbound call ended (`answered`, `busy`, `no_answer`, `failed`),
 * once, and queues its `phone_call.dial_finished` webhooks in the same statement
 * (`dialFinishedQueueCte`). False when the dial was already recorded.
 */
export async function setDialStatus(sql: Sql, sessionId: string, dialStatus: string, answeredBy: string | null): Promise<boolean> {
  const rows = await sql`
    with dialed as (
      update sessions set dial_status = ${dialStatus}, answered_by = ${answeredBy}
      where id = ${sessionId} and dial_status is null returning *
    ),
    webhooks as (${dialFinishedQueueCte(sql)})
    select id from dialed`;
  return rows.length === 1;
}

/** One `call_transfers` row (migration 012): a handed-off call, billed on its own. */
export interface CallTransferRow {
  id: string;
  team_id: string;
  session_id: string;
  mode: 'cold' | 'warm';
  destination: string;
  started_at: Date;
  ended_at: Date | null;
  minutes: number;
  price_per_minute_micros: bigint;
  cost_micros: bigint;
}

/**
 * Transfer minutes (docs/api/phone.md, billed separately from the session): records the handed-off
 * call from the handoff (`startedAt`) to the end of the human leg (now), charges every started
 * minute at `pricePerMinuteMicros` (the balance may go below zero: the call happened) with a
 * `transfer_usage` ledger entry whose ref is the transfer id. One statement.
 */
export async function recordTransfer(
  sql: Sql,
  t: { id: string; teamId: string; sessionId: string; mode: 'cold' | 'warm'; destination: string; startedAt: Date; pricePerMinuteMicros: bigint },
): Promise<CallTransferRow> {
  const [row] = await sql<CallTransferRow[]>`
    with x as (
      insert into call_transfers (id, team_id, session_id, mode, destination, started_at, ended_at, minutes, price_per_minute_micros, cost_micros)
      select ${t.id}, ${t.teamId}, ${t.sessionId}, ${t.mode}, ${t.destination}, ${t.startedAt}, n.ts, m.minutes,
             ${t.pricePerMinuteMicros.toString()}::bigint, m.minutes * ${t.pricePerMinuteMicros.toString()}::bigint
      from (select clock_timestamp() as ts) n,
           lateral (select greatest(1, ceil(extract(epoch from (n.ts - ${t.startedAt}::timestamptz)) / 60))::int as minutes) m
      returning *
    ),
    credit as (update teams set credit_micros = credit_micros - x.cost_micros from x where teams.id = x.team_id and x.cost_micros > 0),
    ledger as (
      insert into credit_ledger (team_id, amount_micros, reason, ref)
      select team_id, -cost_micros, 'transfer_usage', id from x where cost_micros > 0
    )
    select * from x`;
  return row!;
}

/** The transfers of a session, oldest first. */
export function listCallTransfers(sql: Sql, sessionId: string): Promise<CallTransferRow[]> {
  return sql<CallTransferRow[]>`select * from call_transfers where session_id = ${sessionId} order by started_at`;
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
