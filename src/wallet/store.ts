import type { Sql } from '../store/db.ts';

/** What the wallet endpoints read about a team, in one query. */
export interface WalletRow {
  team_id: string;
  created_at: Date;
  credit_micros: bigint;
  /** The net of the team's credit grants, never below 0 (the same sum as `paidMicros`). */
  granted_micros: bigint;
  /** When credit last moved (the newest ledger entry), or the team's creation. */
  updated_at: Date;
}

/** The team's wallet, or undefined for an unknown team. */
export async function walletOf(sql: Sql, teamId: string): Promise<WalletRow | undefined> {
  const [row] = await sql<{ team_id: string; created_at: Date; credit_micros: string; granted_micros: string; last_moved: Date | null }[]>`
    select t.id as team_id, t.created_at, t.credit_micros::text as credit_micros,
      (select coalesce(sum(amount_micros), 0) from credit_ledger where team_id = t.id and reason = 'grant')::text as granted_micros,
      (select max(created_at) from credit_ledger where team_id = t.id) as last_moved
    from teams t where t.id = ${teamId}`;
  if (!row) return undefined;
  const granted = BigInt(row.granted_micros);
  return {
    team_id: row.team_id,
    created_at: row.created_at,
    credit_micros: BigInt(row.credit_micros),
    granted_micros: granted > 0n ? granted : 0n,
    updated_at: row.last_moved && row.last_moved > row.created_at ? row.last_moved : row.created_at,
  };
}
