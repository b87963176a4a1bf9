import type { TestServer } from '../helpers/server.ts';

/** The sandbox carrier of a running test platform (its failure switches). */
export function sandboxOf(app: TestServer) {
  const t = app.telephony;
  if (!t) throw new Error('the platform built no sandbox carrier');
  return t.sandbox;
}

/** The `i`-th sandbox number of an area code (`+1 <area> 555 01xx`). */
export const sandboxNumber = (area: string, i: number) => `+1${area}55501${String(i).padStart(2, '0')}`;

export async function creditOf(app: TestServer, teamId: string): Promise<bigint> {
  const [row] = await app.db.sql<{ credit_micros: bigint }[]>`select credit_micros from teams where id = ${teamId}`;
  return row!.credit_micros;
}

export async function ledgerOf(app: TestServer, teamId: string): Promise<{ amount: bigint; reason: string; ref: string | null }[]> {
  const rows = await app.db.sql<{ amount_micros: bigint; reason: string; ref: string | null }[]>`
    select amount_micros, reason, ref from credit_ledger where team_id = ${teamId} order by id`;
  return rows.map((r) => ({ amount: r.amount_micros, reason: r.reason, ref: r.ref }));
}

export async function ledgerSum(app: TestServer, teamId: string): Promise<bigint> {
  return (await ledgerOf(app, teamId)).reduce((s, e) => s + e.amount, 0n);
}
