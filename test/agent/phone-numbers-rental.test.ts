import t from 'tap';
import { PhoneRentalJob } from '../../src/phone-numbers/rental-job.ts';
import { createLogger } from '../../src/log.ts';
import { insertPurchase } from '../../src/phone-numbers/store.ts';
import { grantCredit } from '../../src/auth/store-teams.ts';
import { startTestServer } from '../helpers/server.ts';
import { creditOf, ledgerOf, ledgerSum, sandboxNumber } from '../telephony/helpers.ts';

const PRICE = 1_000_000n;
const DAY = 24 * 3600_000;
const app = await startTestServer({ config: { phoneNumberDailyPriceMicros: PRICE } });
t.teardown(() => app.close());
const log = createLogger({ level: 'silent' });
// The job under test; the platform's own job runs on the wall clock and never sees these future times.
const job = new PhoneRentalJob({ sql: app.db.sql, log, graceMs: 3 * DAY, retryMs: 3600_000 });

let n = 0;
const buy = async (auth: Record<string, string>) => {
  const r = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('415', n++) }, auth);
  if (r.status !== 201) throw new Error(`purchase failed: ${r.status} ${r.text}`);
  return r.body as { phone_number_id: string };
};
const status = async (auth: Record<string, string>, id: string) => (await app.req('GET', `/v1/agent/phone-numbers/${id}`, undefined, auth)).body;
const rentals = async (teamId: string) => (await ledgerOf(app, teamId)).filter((e) => e.reason === 'phone_number_rental').length;
const at = (ms: number) => new Date(Date.now() + ms);

t.test('each day is charged once, however often and on however many nodes the job ticks', async (t) => {
  const team = await app.newTeam({ creditMicros: 10_000_000n });
  const a = await buy(team.auth);
  await buy(team.auth);
  t.equal(await creditOf(app, team.teamId), 8_000_000n, 'first days charged at purchase');

  t.match(await job.tick(at(DAY - 60_000)), { charged: 0, unpaid: 0 }, 'nothing is due before the first day ends');
  const now = at(DAY + 60_000);
  const second = new PhoneRentalJob({ sql: app.db.sql, log });
  const reports = await Promise.all([job.tick(now), second.tick(now), job.tick(now)]);
  t.equal(reports.reduce((s, r) => s + r.charged, 0), 2, 'two numbers, one day each, across three concurrent ticks');
  t.equal(await creditOf(app, team.teamId), 6_000_000n);
  t.match(await job.tick(now), { charged: 0 }, 'ticking again at the same time charges nothing');

  // A node that was down for days catches up day by day.
  t.match(await job.tick(at(3 * DAY + 60_000)), { charged: 4, unpaid: 0 });
  t.equal(await creditOf(app, team.teamId), 2_000_000n);
  t.equal(await rentals(team.teamId), 8);
  t.equal(await ledgerSum(app, team.teamId), await creditOf(app, team.teamId));

  // Released numbers stop billing.
  t.equal((await app.req('DELETE', `/v1/agent/phone-numbers/${a.phone_number_id}`, undefined, team.auth)).status, 204);
  t.match(await job.tick(at(4 * DAY + 60_000)), { charged: 1 });
  t.equal(await creditOf(app, team.teamId), 1_000_000n);
});

t.test('out of credit: still active during the grace period, suspended after it, active again once every owed day is paid', async (t) => {
  const team = await app.newTeam({ creditMicros: PRICE });
  const num = await buy(team.auth);
  t.equal(await creditOf(app, team.teamId), 0n);

  t.match(await job.tick(at(DAY + 60_000)), { charged: 0, unpaid: 1, suspended: 0 });
  t.match(await status(team.auth, num.phone_number_id), { status: 'active', status_detail: 'Rental unpaid: out of API credit' });
  t.match(await job.tick(at(DAY + 120_000)), { unpaid: 0 }, 'the retry waits its interval');
  t.match(await job.tick(at(DAY + 2 * 3600_000)), { unpaid: 1, suspended: 0 }, 'retried after an hour');
  t.equal(await creditOf(app, team.teamId), 0n, 'never overdrawn');

  t.match(await job.tick(at(4 * DAY + 60_000)), { unpaid: 1, suspended: 1 });
  t.match(await status(team.auth, num.phone_number_id), { status: 'suspended', status_detail: 'Rental unpaid: out of API credit' });
  t.equal((await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth)).body.phone_numbers.length, 1, 'a suspended number is still listed');

  await grantCredit(app.db.sql, team.teamId, 10_000_000n);
  t.match(await job.tick(at(4 * DAY + 2 * 3600_000)), { charged: 4, unpaid: 0 }, 'the four owed days (days 2 to 5)');
  t.match(await status(team.auth, num.phone_number_id), { status: 'active', status_detail: null });
  t.equal(await creditOf(app, team.teamId), 6_000_000n);
  t.equal(await ledgerSum(app, team.teamId), await creditOf(app, team.teamId));

  t.test('a suspended number can be released', async (t) => {
    const poor = await app.newTeam({ creditMicros: PRICE });
    const p = await buy(poor.auth);
    await job.tick(at(5 * DAY));
    t.equal((await status(poor.auth, p.phone_number_id)).status, 'suspended');
    t.equal((await app.req('DELETE', `/v1/agent/phone-numbers/${p.phone_number_id}`, undefined, poor.auth)).status, 204);
    const before = await ledgerOf(app, poor.teamId);
    await job.tick(at(9 * DAY));
    t.same(await ledgerOf(app, poor.teamId), before, 'and is never billed again');
    t.equal((await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('415', n++) }, poor.auth)).status, 402);
  });
});

t.test('a purchase that never completed (its node died) turns error and is refunded', async (t) => {
  const team = await app.newTeam({ creditMicros: 5_000_000n });
  const res = await insertPurchase(app.db.sql, {
    id: 'phnum_0000000000000000000000aa', teamId: team.teamId, phoneNumber: sandboxNumber('212', 0), provider: 'sandbox', label: '', agentId: null, dailyPriceMicros: PRICE, cap: 10,
  });
  t.ok(res.ok);
  t.equal(await creditOf(app, team.teamId), 4_000_000n);
  t.match((await status(team.auth, 'phnum_0000000000000000000000aa')).status, 'provisioning');
  t.equal((await app.req('DELETE', '/v1/agent/phone-numbers/phnum_0000000000000000000000aa', undefined, team.auth)).status, 409, 'not releasable while provisioning');
  t.match(await job.tick(at(5 * 60_000)), { staleFailed: 0 });
  t.match(await job.tick(at(11 * 60_000)), { staleFailed: 1 });
  t.match(await status(team.auth, 'phnum_0000000000000000000000aa'), { status: 'error', status_detail: 'Purchase did not complete' });
  t.equal(await creditOf(app, team.teamId), 5_000_000n);
  t.same((await ledgerOf(app, team.teamId)).slice(1).map((e) => e.reason), ['phone_number_rental', 'phone_number_refund']);
  t.equal((await app.req('DELETE', '/v1/agent/phone-numbers/phnum_0000000000000000000000aa', undefined, team.auth)).status, 204);
});

t.test('start and stop', async (t) => {
  const j = new PhoneRentalJob({ sql: app.db.sql, log, intervalMs: 10 });
  j.start();
  j.start();
  await new Promise((r) => setTimeout(r, 50));
  await j.stop();
  t.pass('stops cleanly, leaving no timer');
});
