import { z } from 'zod';
import { ServiceError, invalidField, notFound } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import { newId } from '../ids.ts';
import type { Logger } from '../log.ts';
import { getAgent } from '../agents/store.ts';
import type { Sql } from '../store/db.ts';
import type { PageRequest } from '../store/paginate.ts';
import {
  getNumber, heldAmong, insertPurchase, isNumberHeld, listNumbers, markActive, markPurchaseFailed, markReleased, setStatusDetail, updateNumber,
  type NumberFilter, type PhoneNumberRow,
} from './store.ts';
import { CarrierRefused, PROVIDERS, type Carriers, type Provider } from '../telephony/index.ts';
import { AgentService } from '../agents/service.ts';
import { E164_PATTERN } from '../agent-config/schema.ts';

const e164 = z.string().regex(E164_PATTERN, 'phone_number must be an E.164 number such as +14155550123');
const label = z.string().max(120);

export const numberSearchQuery = z.object({
  country_code: z.enum(['US', 'CA']).default('US'),
  area_code: z.string().regex(/^[2-9][0-9]{2}$/, 'area_code must be three digits').optional(),
  number_type: z.enum(['local', 'toll_free']).default('local'),
  provider: z.enum(PROVIDERS).optional(),
});

export const numberPurchaseBody = z.strictObject({
  provider: z.enum(PROVIDERS),
  phone_number: e164,
  label: label.optional(),
  agent_id: z.string().min(1).max(64).optional(),
});

/** `agent_id`: a string binds, null unbinds (a named exception to the explicit-null rule), omitted keeps. */
export const numberPatchBody = z.strictObject({
  label: label.optional(),
  agent_id: z.string().min(1).max(64).nullable().optional(),
});

export const numberListQuery = z.object({
  phone_number: e164.optional(),
  agent_id: z.string().min(1).max(64).optional(),
});

export const phoneNumberEntity = z.object({
  phone_number_id: z.string(),
  workspace_id: z.string(),
  phone_number: z.string(),
  provider: z.enum(PROVIDERS),
  label: z.string(),
  agent_id: z.string().nullable(),
  status: z.enum(['provisioning', 'active', 'suspended', 'error']),
  status_detail: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type PhoneNumberEntity = z.infer<typeof phoneNumberEntity>;

export const availableNumberEntity = z.object({
  phone_number: z.string(),
  country_code: z.enum(['US', 'CA']),
  region: z.string(),
  locality: z.string(),
  number_type: z.literal('local'),
  provider: z.enum(PROVIDERS),
  pricing: z.object({ daily_price: z.number() }),
});

export function toEntity(r: PhoneNumberRow): PhoneNumberEntity {
  return {
    phone_number_id: r.id,
    workspace_id: r.team_id,
    phone_number: r.phone_number,
    provider: r.provider as Provider,
    label: r.label,
    agent_id: r.agent_id,
    status: r.status as PhoneNumberEntity['status'],
    status_detail: r.status_detail,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

export interface PhoneNumberServiceOptions {
  sql: Sql;
  carriers: Carriers;
  /** Rental price of one day, charged up front at purchase and then by the rental job. */
  dailyPriceMicros: bigint;
  /** Live numbers one team may hold (`PARLEY_PHONE_NUMBER_LIMIT`). */
  limit: number;
  log: Logger;
}

const SEARCH_RESULTS = 20;
const refused = (provider: string, detail: string, cause?: unknown) => new ServiceError('upstream', `${provider} refused the request: ${detail}`, { cause });
const detailOf = (err: unknown) => (err instanceof CarrierRefused ? err.detail : 'the carrier did not answer');

/** Phone numbers: search, purchase (first day charged up front), bind, release. */
export class PhoneNumberService {
  constructor(private readonly o: PhoneNumberServiceOptions) {}

  async search(q: z.infer<typeof numberSearchQuery>, signal?: AbortSignal): Promise<{ available_phone_numbers: z.infer<typeof availableNumberEntity>[] }> {
    if (q.number_type === 'toll_free') throw new ServiceError('bad_request', 'Toll-free numbers are not available');
    const provider = q.provider ?? this.o.carriers.defaultProvider;
    const carrier = this.o.carriers.get(provider);
    let found;
    try {
      found = await carrier.search({ countryCode: q.country_code, areaCode: q.area_code, numberType: 'local', limit: SEARCH_RESULTS }, signal);
    } catch (err) {
      throw refused(provider, detailOf(err), err);
    }
    const taken = await heldAmong(this.o.sql, found.map((n) => n.phoneNumber));
    const daily = Number(this.o.dailyPriceMicros) / 1_000_000;
    return {
      available_phone_numbers: found
        .filter((n) => !taken.has(n.phoneNumber))
        .map((n) => ({ phone_number: n.phoneNumber, country_code: n.countryCode, region: n.region, locality: n.locality, number_type: n.numberType, provider, pricing: { daily_price: daily } })),
    };
  }

  /**
   * Order of checks: beta (403) → provider configured (400) → a number outside the carrier's
   * inventory (400) → agent (422) → number already
   * held (409) → cap (403) and credit (402), taken with the first day's charge in one statement
   * → carrier (502: the row turns `error` and the charge is refunded).
   */
  async purchase(p: Principal, body: z.infer<typeof numberPurchaseBody>): Promise<PhoneNumberEntity> {
    AgentService.requireBeta(p);
    const carrier = this.o.carriers.get(body.provider);
    if (carrier.offers && !carrier.offers(body.phone_number)) {
      throw new ServiceError('bad_request', `${body.provider} does not offer ${body.phone_number}: choose one from GET /v1/agent/available-phone-numbers`);
    }
    if (body.agent_id !== undefined) await this.requireAgent(p, body.agent_id);
    const taken = () => new ServiceError('conflict', 'This number is already on the platform');
    if (await isNumberHeld(this.o.sql, body.phone_number)) throw taken();
    const id = newId('phnum');
    const res = await insertPurchase(this.o.sql, {
      id, teamId: p.teamId, phoneNumber: body.phone_number, provider: body.provider, label: body.label ?? '', agentId: body.agent_id ?? null,
      dailyPriceMicros: this.o.dailyPriceMicros, cap: this.o.limit,
    });
    if (!res.ok) {
      if (res.reason === 'taken') throw taken();
      if (res.reason === 'limit') throw new ServiceError('forbidden', `Phone number limit reached for this team (${this.o.limit})`);
      if (res.reason === 'agent') throw unresolvedAgent();
      throw new ServiceError('payment_required', 'Out of API credit');
    }
    let carrierRef: string | null;
    try {
      ({ carrierRef } = await carrier.purchase(body.phone_number));
    } catch (err) {
      const detail = detailOf(err);
      this.o.log.warn({ provider: body.provider, phoneNumberId: id, err }, 'carrier refused a purchase');
      await markPurchaseFailed(this.o.sql, id, detail);
      throw refused(body.provider, detail, err);
    }
    const row = await markActive(this.o.sql, id, carrierRef);
    if (!row) {
      // The stale-purchase sweep failed (and refunded) the row meanwhile: give the number back.
      await carrier.release(body.phone_number, carrierRef).catch((err) => this.o.log.error({ err, phoneNumberId: id }, 'could not return a number whose purchase was abandoned'));
      throw refused(body.provider, 'the purchase did not complete in time');
    }
    return toEntity(row);
  }

  async get(p: Principal, id: string): Promise<PhoneNumberRow> {
    const row = await getNumber(this.o.sql, p.teamId, id);
    if (!row) throw notFound('Phone number');
    return row;
  }

  list(p: Principal, f: NumberFilter, page: PageRequest) {
    return listNumbers(this.o.sql, p.teamId, f, page);
  }

  async update(p: Principal, id: string, body: z.infer<typeof numberPatchBody>): Promise<PhoneNumberEntity> {
    await this.get(p, id);
    if (typeof body.agent_id === 'string') await this.requireAgent(p, body.agent_id);
    let row: PhoneNumberRow | undefined;
    try {
      row = await updateNumber(this.o.sql, p.teamId, id, { label: body.label, agentId: body.agent_id });
    } catch (err) {
      if ((err as { code?: string }).code === '23503') throw unresolvedAgent(); // agent deleted meanwhile
      throw err;
    }
    if (!row) throw notFound('Phone number');
    return toEntity(row);
  }

  /**
   * Releases the number. An `error` row never reached the carrier and is simply removed. A
   * live number is given back to the carrier first; when the carrier refuses, the number stays
   * `active` (with the reason in `status_detail`) and releasing again retries.
   */
  async release(p: Principal, id: string): Promise<void> {
    const row = await this.get(p, id);
    if (row.status === 'provisioning') throw new ServiceError('conflict', 'Phone number is still being provisioned; try again shortly');
    if (row.status !== 'error') {
      const carrier = this.o.carriers.get(row.provider as Provider);
      try {
        await carrier.release(row.phone_number, row.carrier_ref);
      } catch (err) {
        const detail = detailOf(err);
        this.o.log.warn({ provider: row.provider, phoneNumberId: id, err }, 'carrier refused a release');
        await setStatusDetail(this.o.sql, id, `Release failed: ${detail}`);
        throw refused(row.provider, detail, err);
      }
    }
    if (!(await markReleased(this.o.sql, p.teamId, id))) throw notFound('Phone number');
  }

  private async requireAgent(p: Principal, agentId: string): Promise<void> {
    if (!(await getAgent(this.o.sql, p.teamId, agentId))) throw unresolvedAgent();
  }
}

function unresolvedAgent(): ServiceError {
  return invalidField(['body', 'agent_id'], 'Value error, no agent with this id exists in the workspace', 'unresolved_reference');
}
