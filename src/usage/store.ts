import type { Sql } from '../store/db.ts';

export type UsageKind = 'tts_characters' | 'asr_seconds' | 'voice_designs';

export interface UsageRow {
  id: string;
  /** The platform's id for the record, given before its first write (null on rows older than it). */
  ref: string | null;
  team_id: string;
  kind: UsageKind;
  model: string;
  amount: number;
  cost_micros: bigint;
  created_at: Date;
}

/**
 * Records one call's usage and settles it: the usage row, the debit of the team's credit
 * (which may go below zero: a started call is never refused afterwards) and the ledger
 * entry. One statement (data-modifying CTEs), so it is atomic without an explicit
 * transaction (which the embedded PGlite store interleaves badly with other connections).
 */
export async function insertUsage(sql: Sql, u: NewUsage): Promise<UsageRow | undefined> {
  return (await insertUsages(sql, [u]))[0];
}

export interface NewUsage {
  /** Unique per call, given before its first write and the same on every attempt (`recordUsage`). */
  ref: string;
  teamId: string;
  kind: UsageKind;
  model: string;
  amount: number;
  costMicros: bigint;
}

/**
 * `insertUsage` for several calls in one statement: a row and a ledger entry per call, one
 * debit per team (the sum). Idempotent by `ref`: a call whose ref is already stored (an earlier
 * attempt committed although its answer was lost) is skipped, and only the rows inserted by this
 * statement are debited and get a ledger entry; its stored row is answered. Rows come back in the
 * order given (undefined for one whose earlier write is not visible yet, which happens only when
 * two attempts overlap).
 */
export async function insertUsages(sql: Sql, list: NewUsage[]): Promise<(UsageRow | undefined)[]> {
  if (list.length === 0) return [];
  const values = list.map((u) => ({ ref: u.ref, team_id: u.teamId, kind: u.kind, model: u.model, amount: u.amount, cost_micros: u.costMicros.toString() }));
  const rows = await sql<UsageRow[]>`
    with u as (
      insert into usage ${sql(values as never, 'ref', 'team_id', 'kind', 'model', 'amount', 'cost_micros')}
      on conflict (ref) do nothing returning *
    ), s as (
      select team_id, sum(cost_micros) as total from u where cost_micros > 0 group by team_id
    ), t as (
      update teams set credit_micros = credit_micros - s.total from s where teams.id = s.team_id returning teams.id
    ), l as (
      insert into credit_ledger (team_id, amount_micros, reason, ref)
      select team_id, -cost_micros, 'usage', 'usage:' || id from u where cost_micros > 0 order by id returning id
    )
    select * from u
    union all
    select * from usage where ref in ${sql(values.map((v) => v.ref))}`;
  // The last select sees the table as it was before the statement: only earlier attempts' rows.
  const byRef = new Map(rows.map((r) => [r.ref, r]));
  return list.map((u) => byRef.get(u.ref));
}

/** A team's usage rows, newest first. */
export async function listUsage(sql: Sql, teamId: string, limit = 100): Promise<UsageRow[]> {
  return sql<UsageRow[]>`select * from usage where team_id = ${teamId} order by id desc limit ${limit}`;
}

/** The team's credit in micro-units, or undefined for an unknown team. */
export async function creditOf(sql: Sql, teamId: string): Promise<bigint | undefined> {
  const [row] = await sql<{ credit_micros: string | bigint }[]>`select credit_micros from teams where id = ${teamId}`;
  return row ? BigInt(row.credit_micros) : undefined;
}
