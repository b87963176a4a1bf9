/**
 * The team's account, credit, usage by day and kind, and credit ledger (docs/usage.md): what
 * the console's Usage page shows, on the public API so a script can read the same.
 * Money is in currency units (6 decimals), like every price of the API.
 */
import { z } from 'zod';
import { ServiceError } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import { listLedger, usageByDay, type LedgerRow, type UsageKindRow } from './store-billing.ts';
import type { Sql } from '../store/db.ts';
import type { PageRequest } from '../store/paginate.ts';
import { paidMicros } from './store-spend.ts';
import { getTeam } from '../auth/store-teams.ts';

export const USAGE_KINDS = ['tts_characters', 'asr_seconds', 'voice_designs', 'session_minutes', 'transfer_minutes', 'phone_number_days'] as const satisfies readonly UsageKindRow[];
/** The unit of each kind's `amount`. */
export const USAGE_UNITS: Record<UsageKindRow, string> = {
  tts_characters: 'characters', asr_seconds: 'seconds', voice_designs: 'calls', session_minutes: 'minutes', transfer_minutes: 'minutes', phone_number_days: 'days',
};
/** Why credit moved (`reason` of a ledger entry). */
export const LEDGER_REASONS = [
  'grant', 'usage', 'session_hold', 'session_usage', 'session_refund', 'transfer_usage', 'phone_number_rental', 'phone_number_refund',
] as const;
/** The longest range one usage request may cover. */
export const MAX_USAGE_DAYS = 366;

const money = (micros: bigint | string) => Number(BigInt(micros)) / 1_000_000;
const DAY_MS = 86_400_000;
const utcDay = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, 'Value error, a date as YYYY-MM-DD').refine((s) => !Number.isNaN(Date.parse(`${s}T00:00:00Z`)), { message: 'Value error, a date as YYYY-MM-DD', params: { type: 'date' } });
const isoInstant = z.string().refine((s) => !Number.isNaN(Date.parse(s)), { message: 'Value error, an ISO 8601 date-time', params: { type: 'datetime' } });

export const teamEntity = z.object({
  team_id: z.string(),
  name: z.string(),
  beta_access: z.boolean(),
  credit: z.number().describe('Credit left, in currency units (may be below 0 after usage settled past it)'),
  paid: z.number().describe('The net of the credit grants (sets the speech concurrency tier)'),
  created_at: z.string(),
});

export const usageQuery = z.strictObject({
  from: utcDay.optional().describe('First UTC day (YYYY-MM-DD); default 29 days before `to`'),
  to: utcDay.optional().describe('Last UTC day, included; default today'),
}).superRefine((q, ctx) => {
  if (!q.from || !q.to) return;
  const days = (Date.parse(q.to) - Date.parse(q.from)) / DAY_MS + 1;
  if (days < 1) ctx.addIssue({ code: 'custom', path: ['to'], message: 'Value error, to must not be before from', params: { type: 'value_error' } });
  else if (days > MAX_USAGE_DAYS) ctx.addIssue({ code: 'custom', path: ['to'], message: `Value error, at most ${MAX_USAGE_DAYS} days at once`, params: { type: 'value_error' } });
});

const usageEntry = z.object({ kind: z.enum(USAGE_KINDS), unit: z.string(), amount: z.number(), cost: z.number(), count: z.number().int() });
export const usageReport = z.object({
  from: z.string(),
  to: z.string(),
  days: z.array(usageEntry.extend({ date: z.string() })).describe('Days with usage only, oldest first'),
  totals: z.array(usageEntry).describe('Per kind over the range (kinds without usage omitted)'),
});

export const ledgerQuery = z.strictObject({
  reason: z.string().optional().describe(`Comma-separated: ${LEDGER_REASONS.join(', ')}`).superRefine((s, ctx) => {
    if (s === undefined) return;
    for (const part of s.split(','))
      if (!(LEDGER_REASONS as readonly string[]).includes(part.trim())) ctx.addIssue({ code: 'custom', message: `Value error, reason must be among ${LEDGER_REASONS.join(', ')}`, params: { type: 'enum' } });
  }),
  created_after: isoInstant.optional(),
  created_before: isoInstant.optional(),
});

export const ledgerEntry = z.object({
  entry_id: z.string(),
  amount: z.number().describe('Positive adds credit, negative takes it'),
  balance: z.number().describe('The credit right after this entry'),
  reason: z.enum(LEDGER_REASONS),
  ref: z.string().nullable().describe('What the entry is for: a session id, a phone number id, `usage:<n>`'),
  created_at: z.string(),
});

export function toLedgerEntry(r: LedgerRow): z.infer<typeof ledgerEntry> {
  return {
    entry_id: r.id, amount: money(r.amount_micros), balance: money(r.balance_micros), reason: r.reason as (typeof LEDGER_REASONS)[number], ref: r.ref,
    created_at: new Date(r.created_at).toISOString(),
  };
}

export class UsageService {
  constructor(private readonly sql: Sql, private readonly now: () => number = Date.now) {}

  async team(p: Principal): Promise<z.infer<typeof teamEntity>> {
    const t = await getTeam(this.sql, p.teamId);
    if (!t) throw new ServiceError('not_found', 'Team not found');
    return { team_id: t.id, name: t.name, beta_access: t.beta_access, credit: money(BigInt(t.credit_micros)), paid: money(await paidMicros(this.sql, t.id)), created_at: new Date(t.created_at).toISOString() };
  }

  async usage(p: Principal, q: z.output<typeof usageQuery>): Promise<z.infer<typeof usageReport>> {
    const to = q.to ?? new Date(this.now()).toISOString().slice(0, 10);
    const from = q.from ?? new Date(Date.parse(to) - 29 * DAY_MS).toISOString().slice(0, 10);
    if (Date.parse(to) < Date.parse(from)) throw new ServiceError('invalid', 'Validation failed', { fields: [{ type: 'value_error', loc: ['query', 'from'], msg: 'Value error, from must not be after to', ctx: {} }] });
    const rows = await usageByDay(this.sql, p.teamId, new Date(`${from}T00:00:00Z`), new Date(Date.parse(`${to}T00:00:00Z`) + DAY_MS));
    const totals = new Map<UsageKindRow, { amount: number; cost: bigint; count: number }>();
    for (const r of rows) {
      const t = totals.get(r.kind) ?? { amount: 0, cost: 0n, count: 0 };
      totals.set(r.kind, { amount: t.amount + r.amount, cost: t.cost + r.cost_micros, count: t.count + r.count });
    }
    return {
      from, to,
      days: rows.map((r) => ({ date: r.date, kind: r.kind, unit: USAGE_UNITS[r.kind], amount: r.amount, cost: money(r.cost_micros), count: r.count })),
      totals: USAGE_KINDS.filter((k) => totals.has(k)).map((k) => ({ kind: k, unit: USAGE_UNITS[k], amount: totals.get(k)!.amount, cost: money(totals.get(k)!.cost), count: totals.get(k)!.count })),
    };
  }

  ledger(p: Principal, q: z.output<typeof ledgerQuery>, page: PageRequest) {
    return listLedger(this.sql, p.teamId, {
      reasons: q.reason ? [...new Set(q.reason.split(',').map((s) => s.trim()))] : undefined,
      createdAfter: q.created_after ? new Date(q.created_after) : undefined,
      createdBefore: q.created_before ? new Date(q.created_before) : undefined,
    }, page);
  }
}
