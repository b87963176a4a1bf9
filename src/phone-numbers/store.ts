import type postgres from 'postgres';
import type { Sql } from '../store/db.ts';
import { paginate, type Page, type PageRequest } from '../store/paginate.ts';

/**
 * Phone numbers and their rental. Every change of status that moves money or the team's count
 * of live numbers is ONE statement (atomic on its own: no multi-statement transaction, which
 * the embedded PGlite cannot interleave across pooled connections).
 *
 * Live statuses (they hold the number on the platform and count toward the team's cap):
 * `provisioning`, `active`, `suspended`. `error` rows hold nothing; `released` rows are
 * internal and never read back through the API.
 */
export type NumberStatus = 'provisioning' | 'active' | 'suspended' | 'error' | 'released';

export interface PhoneNumberRow {
  id: string;
  team_id: string;
  phone_number: string;
  provider: string;
  label: string;
  agent_id: string | null;
  status: NumberStatus;
  status_detail: string | null;
  carrier_ref: string | null;
  daily_price_micros: bigint;
  paid_through: Date;
  next_charge_at: Date;
  created_at: Date;
  updated_at: Date;
  released_at: Date | null;
}

const LIVE = ['provisioning', 'active', 'suspended'];

export interface NewPurchase {
  id: string;
  teamId: string;
  phoneNumber: string;
  provider: string;
  label: string;
  agentId: string | null;
  dailyPriceMicros: bigint;
  /** The team's maximum of live numbers. */
  cap: number;
}

export type PurchaseResult =
  | { ok: true; row: PhoneNumberRow }
  | { ok: false; reason: 'limit' | 'credit' | 'taken' | 'agent' };

/** Whether a live row anywhere on the platform holds this number. */
export async function isNumberHeld(sql: Sql, phoneNumber: string): Promise<boolean> {
  const rows = await sql`select 1 from phone_numbers where phone_number = ${phoneNumber} and status in ${sql(LIVE)} limit 1`;
  return rows.length > 0;
}

/**
 * Takes the first rental day, counts the number toward the cap, writes the ledger entry and
 * inserts the row in status `provisioning`, all in one statement. The team row's conditional
 * UPDATE checks credit and cap together: concurrent purchases queue on that row and can never
 * overdraw or pass the cap. A number held by another live row fails the whole statement
 * (unique index), so nothing is charged.
 */
export async function insertPurchase(sql: Sql, p: NewPurchase): Promise<PurchaseResult> {
  const price = p.dailyPriceMicros.toString();
  try {
    const [row] = await sql<PhoneNumberRow[]>`
      with paid as (
        update teams set credit_micros = credit_micros - ${price}::bigint, live_phone_numbers = live_phone_numbers + 1
        where id = ${p.teamId} and credit_micros >= ${price}::bigint and live_phone_numbers < ${p.cap}
        returning id
      ),
      ledger as (
        insert into credit_ledger (team_id, amount_micros, reason, ref)
        select id, ${(-p.dailyPriceMicros).toString()}::bigint, 'phone_number_rental', ${p.id} from paid
      )
      insert into phone_numbers (id, team_id, phone_number, provider, label, agent_id, status, daily_price_micros, paid_through, next_charge_at)
      select ${p.id}, ${p.teamId}, ${p.phoneNumber}, ${p.provider}, ${p.label}, ${p.agentId}, 'provisioning', ${price}::bigint,
        clock_timestamp() + interval '1 day', clock_timestamp() + interval '1 day'
      from paid
      returning *`;
    if (row) return { ok: true, row };
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === '23505') return { ok: false, reason: 'taken' };
    if (code === '23503') return { ok: false, reason: 'agent' }; // the agent was deleted meanwhile
    throw err;
  }
  const [team] = await sql<{ live: number }[]>`select live_phone_numbers as live from teams where id = ${p.teamId}`;
  return { ok: false, reason: team && team.live >= p.cap ? 'limit' : 'credit' };
}

/** `provisioning` → `active` once the carrier confirmed the purchase. */
export async function markActive(sql: Sql, id: string, carrierRef: string | null): Promise<PhoneNumberRow | undefined> {
  const [row] = await sql<PhoneNumberRow[]>`
    update phone_numbers set status = 'active', status_detail = null, carrier_ref = ${carrierRef}, updated_at = clock_timestamp()
    where id = ${id} and status = 'provisioning' returning *`;
  return row;
}

/**
 * `provisioning` → `error`: refunds what the purchase charged (a `phone_number_refund` ledger
 * entry beside the `phone_number_rental` one) and frees the cap slot, in one statement.
 * `where` picks one row by id, or every stale provisioning row (the periodic job's sweep).
 */
async function failProvisioning(sql: Sql, where: postgres.PendingQuery<postgres.Row[]>, detail: string): Promise<PhoneNumberRow[]> {
  return sql<PhoneNumberRow[]>`
    with o as (
      select id from phone_numbers where status = 'provisioning' and ${where} for update skip locked
    ),
    n as (
      update phone_numbers p set status = 'error', status_detail = ${detail}, updated_at = clock_timestamp()
      from o where p.id = o.id returning p.*
    ),
    g as (select team_id, count(*)::int as k, sum(daily_price_micros)::bigint as total from n group by team_id),
    t as (
      update teams set credit_micros = credit_micros + g.total, live_phone_numbers = live_phone_numbers - g.k
      from g where teams.id = g.team_id
    ),
    l as (
      insert into credit_ledger (team_id, amount_micros, reason, ref)
      select team_id, daily_price_micros, 'phone_number_refund', id from n
    )
    select * from n`;
}

export async function markPurchaseFailed(sql: Sql, id: string, detail: string): Promise<PhoneNumberRow | undefined> {
  const [row] = await failProvisioning(sql, sql`id = ${id}`, detail);
  return row;
}

/** Purchases that never completed (the node died between charge and carrier): error + refund. */
export async function failStaleProvisioning(sql: Sql, createdBefore: Date): Promise<number> {
  const rows = await failProvisioning(sql, sql`created_at < ${createdBefore}::timestamptz`, 'Purchase did not complete');
  return rows.length;
}

export async function getNumber(sql: Sql, teamId: string, id: string): Promise<PhoneNumberRow | undefined> {
  const [row] = await sql<PhoneNumberRow[]>`select * from phone_numbers where id = ${id} and team_id = ${teamId} and status <> 'released'`;
  return row;
}

export interface NumberFilter {
  phoneNumber?: string;
  agentId?: string;
}

export async function listNumbers(sql: Sql, teamId: string, f: NumberFilter, page: PageRequest): Promise<Page<PhoneNumberRow>> {
  const where = sql`
    team_id = ${teamId} and status <> 'released'
    ${f.phoneNumber !== undefined ? sql`and phone_number = ${f.phoneNumber}` : sql``}
    ${f.agentId !== undefined ? sql`and agent_id = ${f.agentId}` : sql``}`;
  return paginate<PhoneNumberRow>(sql, { select: sql`*`, from: sql`phone_numbers`, where, order: 'created', page });
}

/** `agentId`: undefined keeps, null unbinds, a string binds. Undefined when missing or released. */
export async function updateNumber(sql: Sql, teamId: string, id: string, p: { label?: string; agentId?: string | null }): Promise<PhoneNumberRow | undefined> {
  const set: Record<string, unknown> = {};
  if (p.label !== undefined) set.label = p.label;
  if (p.agentId !== undefined) set.agent_id = p.agentId;
  if (Object.keys(set).length === 0) return getNumber(sql, teamId, id);
  const [row] = await sql<PhoneNumberRow[]>`
    update phone_numbers set ${sql(set as Record<string, never>)}, updated_at = clock_timestamp()
    where id = ${id} and team_id = ${teamId} and status <> 'released' returning *`;
  return row;
}

/** Records why the last carrier operation on a live number failed (the number stays live). */
export async function setStatusDetail(sql: Sql, id: string, detail: string | null): Promise<void> {
  await sql`update phone_numbers set status_detail = ${detail}, updated_at = clock_timestamp() where id = ${id} and status <> 'released'`;
}

/**
 * Marks the number released (billing stops, it disappears from the API, the number is free for
 * anyone) and frees its cap slot when it was live, in one statement. False when it was already
 * released or missing (a concurrent release won).
 */
export async function markReleased(sql: Sql, teamId: string, id: string): Promise<boolean> {
  const [row] = await sql<{ n: number }[]>`
    with o as (
      select id, status from phone_numbers where id = ${id} and team_id = ${teamId} and status <> 'released' for update
    ),
    n as (
      update phone_numbers p set status = 'released', released_at = clock_timestamp(), updated_at = clock_timestamp(), agent_id = null
      from o where p.id = o.id returning o.status as was
    ),
    t as (
      update teams set live_phone_numbers = live_phone_numbers - 1
      where id = ${teamId} and exists (select 1 from n where n.was in ${sql(LIVE)})
    )
    select count(*)::int as n from n`;
  return row!.n === 1;
}

export interface RentalOutcome {
  id: string;
  teamId: string;
  paid: boolean;
  status: NumberStatus;
}

/**
 * Settles ONE due rental day, if any number is due at `now`: locks the most overdue live
 * number (skipping rows another node holds), charges its daily price if the team has it (ledger
 * `phone_number_rental`) and moves `paid_through` one day on, or schedules a retry after
 * `retryMs`. A number whose rental is unpaid for `graceMs` past `paid_through` becomes
 * `suspended`; paying every owed day makes it `active` again. Idempotent: a day is charged only
 * while `paid_through` is behind, and the charge and the advance are the same statement.
 */
export async function settleNextRentalDay(sql: Sql, now: Date, o: { graceMs: number; retryMs: number }): Promise<RentalOutcome | undefined> {
  const nowTs = now.toISOString();
  const [row] = await sql<{ id: string; team_id: string; paid: boolean; status: NumberStatus }[]>`
    with due as (
      select id, team_id, daily_price_micros as price, paid_through, status from phone_numbers
      where status in ('active', 'suspended') and next_charge_at <= ${nowTs}::timestamptz
      order by next_charge_at, id
      limit 1
      for update skip locked
    ),
    paid as (
      update teams t set credit_micros = t.credit_micros - due.price
      from due where t.id = due.team_id and t.credit_micros >= due.price
      returning due.id
    ),
    ledger as (
      insert into credit_ledger (team_id, amount_micros, reason, ref)
      select due.team_id, -due.price, 'phone_number_rental', due.id from due join paid on paid.id = due.id
    ),
    r as (
      select due.*, exists (select 1 from paid) as ok,
        case when exists (select 1 from paid) then due.paid_through + interval '1 day' else due.paid_through end as through
      from due
    ),
    upd as (
      update phone_numbers n set
        paid_through = r.through,
        next_charge_at = case when r.ok then r.through else ${nowTs}::timestamptz + ${o.retryMs} * interval '1 millisecond' end,
        status = case
          when r.through > ${nowTs}::timestamptz then 'active'
          when r.through + ${o.graceMs} * interval '1 millisecond' <= ${nowTs}::timestamptz then 'suspended'
          else r.status end,
        status_detail = case when r.through > ${nowTs}::timestamptz then null else 'Rental unpaid: out of API credit' end,
        updated_at = clock_timestamp()
      from r where n.id = r.id
      returning n.id, n.team_id, r.ok as paid, n.status
    )
    select * from upd`;
  return row ? { id: row.id, teamId: row.team_id, paid: row.paid, status: row.status } : undefined;
}

/** Which of `numbers` a live row on the platform holds. */
export async function heldAmong(sql: Sql, numbers: string[]): Promise<Set<string>> {
  if (numbers.length === 0) return new Set();
  const rows = await sql<{ phone_number: string }[]>`
    select phone_number from phone_numbers where phone_number in ${sql(numbers)} and status in ${sql(LIVE)}`;
  return new Set(rows.map((r) => r.phone_number));
}
