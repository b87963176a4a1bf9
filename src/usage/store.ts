import type { Sql } from '../store/db.ts';

export type UsageKind = 'tts_characters' | 'asr_seconds' | 'voice_designs';

export interface UsageRow {
  id: string;
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
export async function insertUsage(sql: Sql, u: { teamId: string; kind: UsageKind; model: string; amount: number; costMicros: bigint }): Promise<UsageRow> {
  const cost = u.costMicros.toString();
  const [row] = await sql<UsageRow[]>`
    with u as (
      insert into usage (team_id, kind, model, amount, cost_micros)
      values (${u.teamId}, ${u.kind}, ${u.model}, ${u.amount}, ${cost}) returning *
    ), t as (
      update teams set credit_micros = credit_micros - u.cost_micros from u where teams.id = u.team_id and u.cost_micros > 0 returning teams.id
    ), l as (
      insert into credit_ledger (team_id, amount_micros, reason, ref)
      select team_id, -cost_micros, 'usage', 'usage:' || id from u where cost_micros > 0 returning id
    )
    select * from u`;
  return row!;
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
