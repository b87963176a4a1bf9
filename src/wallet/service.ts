/**
 * The wallet endpoints of the speech API (`/wallet/{user_id}/api-credit`, `/wallet/{user_id}/package`),
 * which the official clients' `user` calls read. In Parley the wallet is the team's: `user_id`
 * is `self` or the caller's own team id (anything else is `404`, like another team's resource).
 * What each field holds is in D-BILL-2 (docs/decisions.md).
 */
import { z } from 'zod';
import { ServiceError } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import type { Sql } from '../store/db.ts';
import { walletOf, type WalletRow } from './store.ts';

/** Micro-units as a decimal string: at least two decimals, at most six, exact (`25.00`, `0.123456`, `-1.50`). */
export function decimalOf(micros: bigint): string {
  const sign = micros < 0n ? '-' : '';
  const abs = micros < 0n ? -micros : micros;
  const units = abs / 1_000_000n;
  const frac = (abs % 1_000_000n).toString().padStart(6, '0');
  return `${sign}${units}.${trimDecimals(frac)}`;
}

/** Six decimals with trailing zeros dropped, keeping at least two. */
function trimDecimals(six: string): string {
  let s = six;
  while (s.length > 2 && s.endsWith('0')) s = s.slice(0, -1);
  return s;
}

const booleanQuery = z.enum(['true', 'false', 'True', 'False', '1', '0']).transform((v) => v === 'true' || v === 'True' || v === '1');

export const apiCreditQuery = z.object({
  check_free_credit: booleanQuery.optional().meta({ description: 'Also answer has_free_credit (always false: Parley grants no free credit)' }),
  team_id: z.string().max(256).optional().meta({ description: "The caller's own team id, if given; another id is 404" }),
});

export const apiCreditEntity = z.object({
  _id: z.string().meta({ description: 'The wallet: the team id' }),
  user_id: z.string().meta({ description: 'The team id' }),
  credit: z.string().meta({ description: 'Credit left, a decimal string in currency units (may be negative after usage settled past zero)' }),
  cumulative_top_up: z.string().meta({ description: 'Every credit grant so far, net of corrections, a decimal string' }),
  created_at: z.string().meta({ description: 'When the team was created' }),
  updated_at: z.string().meta({ description: 'When credit last moved (a grant, a charge, a refund)' }),
  has_phone_sha256: z.boolean().meta({ description: 'Always false: Parley keeps no phone number of a user' }),
  has_free_credit: z.boolean().nullable().meta({ description: 'false with check_free_credit=true, else null' }),
});
export type ApiCredit = z.output<typeof apiCreditEntity>;

export const packageEntity = z.object({
  user_id: z.string().meta({ description: 'The team id' }),
  type: z.literal('self_hosted').meta({ description: 'No subscription packages: usage is charged to credit' }),
  total: z.number().int().meta({ description: 'Always 0: no package allowance' }),
  balance: z.number().int().meta({ description: 'Always 0: no package allowance' }),
  created_at: z.string().meta({ description: 'When the team was created' }),
  updated_at: z.string().meta({ description: 'When the team was created (the package never changes)' }),
  finished_at: z.null().meta({ description: 'null: the package does not end' }),
  stripe_subscription_id: z.null(),
  stripe_price_id: z.null(),
  billing_period: z.null(),
  current_period_end: z.null(),
  cancel_at_period_end: z.null(),
  cancel_at: z.null(),
  scheduled_change: z.null(),
  last_synced_at: z.null(),
  subscription_currency: z.null(),
  extra_balance: z.number().int().meta({ description: 'Always 0' }),
  has_used_trial: z.boolean().meta({ description: 'Always false: there is no trial' }),
});
export type PackageEntity = z.output<typeof packageEntity>;

const USER_NOT_FOUND = 'User not found';

export class WalletService {
  constructor(private readonly sql: Sql) {}

  /** The caller's team's wallet; `userId` (and `teamId`, when given) must be `self` or that team. */
  private async wallet(p: Principal, userId: string, teamId?: string): Promise<WalletRow> {
    const own = (id: string) => id === 'self' || id === p.teamId;
    if (!own(userId) || (teamId !== undefined && teamId !== '' && !own(teamId))) throw new ServiceError('not_found', USER_NOT_FOUND);
    const w = await walletOf(this.sql, p.teamId);
    if (!w) throw new ServiceError('not_found', USER_NOT_FOUND);
    return w;
  }

  async apiCredit(p: Principal, userId: string, q: z.output<typeof apiCreditQuery>): Promise<ApiCredit> {
    const w = await this.wallet(p, userId, q.team_id);
    return {
      _id: w.team_id,
      user_id: w.team_id,
      credit: decimalOf(w.credit_micros),
      cumulative_top_up: decimalOf(w.granted_micros),
      created_at: w.created_at.toISOString(),
      updated_at: w.updated_at.toISOString(),
      has_phone_sha256: false,
      has_free_credit: q.check_free_credit ? false : null,
    };
  }

  async package(p: Principal, userId: string): Promise<PackageEntity> {
    const w = await this.wallet(p, userId);
    const created = w.created_at.toISOString();
    return {
      user_id: w.team_id,
      type: 'self_hosted',
      total: 0,
      balance: 0,
      created_at: created,
      updated_at: created,
      finished_at: null,
      stripe_subscription_id: null,
      stripe_price_id: null,
      billing_period: null,
      current_period_end: null,
      cancel_at_period_end: null,
      cancel_at: null,
      scheduled_change: null,
      last_synced_at: null,
      subscription_currency: null,
      extra_balance: 0,
      has_used_trial: false,
    };
  }
}
