import type { Sql } from '../store/db.ts';

export interface Team {
  id: string;
  name: string;
  beta_access: boolean;
  credit_micros: bigint;
  created_at: Date;
}

export async function createTeam(sql: Sql, t: { id: string; name: string; betaAccess: boolean; creditMicros: bigint }): Promise<Team> {
  return sql.begin(async (tx) => {
    const [team] = await tx<Team[]>`
      insert into teams (id, name, beta_access, credit_micros) values (${t.id}, ${t.name}, ${t.betaAccess}, ${t.creditMicros.toString()})
      returning *`;
    if (t.creditMicros !== 0n)
      await tx`insert into credit_ledger (team_id, amount_micros, reason) values (${t.id}, ${t.creditMicros.toString()}, 'grant')`;
    return team!;
  });
}

export async function getTeam(sql: Sql, id: string): Promise<Team | undefined> {
  const [team] = await sql<Team[]>`select * from teams where id = ${id}`;
  return team;
}

export async function countTeams(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from teams`;
  return row!.n;
}

export async function firstTeam(sql: Sql): Promise<Team | undefined> {
  const [team] = await sql<Team[]>`select * from teams order by created_at asc, id asc limit 1`;
  return team;
}

export async function setBetaAccess(sql: Sql, id: string, on: boolean): Promise<boolean> {
  const rows = await sql`update teams set beta_access = ${on} where id = ${id} returning id`;
  return rows.length === 1;
}

/** Adds (or, with a negative amount, removes) credit and writes the ledger entry, atomically. */
export async function grantCredit(sql: Sql, teamId: string, amountMicros: bigint, reason = 'grant', ref: string | null = null): Promise<bigint | undefined> {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ credit_micros: bigint }[]>`
      update teams set credit_micros = credit_micros + ${amountMicros.toString()} where id = ${teamId} returning credit_micros`;
    if (!row) return undefined;
    await tx`insert into credit_ledger (team_id, amount_micros, reason, ref) values (${teamId}, ${amountMicros.toString()}, ${reason}, ${ref})`;
    return row.credit_micros;
  });
}
