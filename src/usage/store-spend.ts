import type { Sql } from '../store/db.ts';

/**
 * What a team has paid, in micro-units: the net of its credit grants (`credit_ledger` rows
 * with reason `grant`, written by team creation and `parley credit grant`; a negative grant,
 * a correction, lowers it), never below 0. Usage debits, session holds and refunds are not
 * payments and do not count. Sets the speech concurrency tier (D-TTS-5).
 */
export async function paidMicros(sql: Sql, teamId: string): Promise<bigint> {
  const [row] = await sql<{ paid: string | null }[]>`
    select coalesce(sum(amount_micros), 0)::text as paid from credit_ledger where team_id = ${teamId} and reason = 'grant'`;
  const paid = BigInt(row?.paid ?? '0');
  return paid > 0n ? paid : 0n;
}
