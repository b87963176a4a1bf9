import type { Sql } from '../store/db.ts';
import { paginate, type Page, type PageRequest } from '../store/paginate.ts';

/**
 * What a team was charged for, per UTC day and kind, read from the records each charge
 * settles with (docs/usage.md): `usage` rows (speech), ended sessions (minutes started, at
 * their end), call transfers (minutes), and the phone-number rental entries of the ledger
 * (days; a refunded day counts back).
 */
export type UsageKindRow = 'tts_characters' | 'asr_seconds' | 'voice_designs' | 'session_minutes' | 'transfer_minutes' | 'phone_number_days';

export interface UsageDayRow {
  date: string;
  kind: UsageKindRow;
  amount: number;
  cost_micros: bigint;
  count: number;
}

/** Usage in [from, to) (UTC instants), per day and kind, oldest day first. */
export async function usageByDay(sql: Sql, teamId: string, from: Date, to: Date): Promise<UsageDayRow[]> {
  const day = (col: string) => sql.unsafe(`to_char(${col} at time zone 'UTC', 'YYYY-MM-DD')`);
  const rows = await sql<{ date: string; kind: UsageKindRow; amount: string; cost_micros: string; count: number }[]>`
    select date, kind, sum(amount)::text as amount, sum(cost_micros)::text as cost_micros, sum(n)::int as count from (
      select ${day('created_at')} as date, kind, amount::numeric as amount, cost_micros, 1 as n
        from usage where team_id = ${teamId} and created_at >= ${from} and created_at < ${to}
      union all
      select ${day('ended_at')}, 'session_minutes', greatest(1, ceil(extract(epoch from (ended_at - started_at)) / 60)), charged_micros, 1
        from sessions where team_id = ${teamId} and started_at is not null and ended_at >= ${from} and ended_at < ${to}
      union all
      select ${day('ended_at')}, 'transfer_minutes', minutes, cost_micros, 1
        from call_transfers where team_id = ${teamId} and ended_at >= ${from} and ended_at < ${to}
      union all
      select ${day('created_at')}, 'phone_number_days', sign(-amount_micros), -amount_micros, 1
        from credit_ledger where team_id = ${teamId} and reason in ('phone_number_rental', 'phone_number_refund')
          and created_at >= ${from} and created_at < ${to}
    ) u group by date, kind order by date, kind`;
  return rows.map((r) => ({ date: r.date, kind: r.kind, amount: Number(r.amount), cost_micros: BigInt(r.cost_micros), count: r.count }));
}

export interface LedgerRow {
  id: string;
  amount_micros: string;
  reason: string;
  ref: string | null;
  created_at: Date;
  /** The credit right after this entry: today's credit less every later entry. */
  balance_micros: string;
}

export interface LedgerFilter {
  reasons?: string[];
  createdAfter?: Date;
  createdBefore?: Date;
}

/** The team's credit ledger, newest first (cursor on the entry id). */
export function listLedger(sql: Sql, teamId: string, f: LedgerFilter, page: PageRequest): Promise<Page<LedgerRow>> {
  const conds = [sql`l.team_id = ${teamId}`];
  if (f.reasons?.length) conds.push(sql`l.reason in ${sql(f.reasons)}`);
  if (f.createdAfter) conds.push(sql`l.created_at > ${f.createdAfter}`);
  if (f.createdBefore) conds.push(sql`l.created_at < ${f.createdBefore}`);
  const where = conds.reduce((a, c) => sql`${a} and ${c}`);
  return paginate<LedgerRow>(sql, {
    select: sql`l.id::text as id, l.amount_micros::text as amount_micros, l.reason, l.ref, l.created_at,
      (t.credit_micros - coalesce((select sum(x.amount_micros) from credit_ledger x where x.team_id = l.team_id and x.id > l.id), 0))::text as balance_micros`,
    from: sql`credit_ledger l join teams t on t.id = l.team_id`,
    where,
    order: { column: 'l.id' },
    page,
  });
}
