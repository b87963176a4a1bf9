/**
 * Outbound refusals that need their own platform settings (403 `outbound_disabled`), a number
 * whose carrier places no calls here (422 `number_provider_unsupported`), and the concurrency
 * limit under racing requests (leased slots in the shared state).
 */
import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { sandboxNumber } from './helpers.ts';
import { phoneCallSettings } from '../../src/phone-calls/service.ts';

const call = (app: TestServer, body: Record<string, unknown>, auth = app.auth) => app.req('POST', '/v1/agent/phone-calls', body, auth);

t.test('settings from the environment: PARLEY_OUTBOUND_CALLS, limits, ring time and PARLEY_TRANSFER_PRICE_PER_MINUTE', async (t) => {
  t.same(phoneCallSettings({}), { dailyLimit: 200, concurrencyLimit: 10, outboundEnabled: true, ringTimeoutMs: 30_000, transferPricePerMinuteMicros: 100_000n }, 'the defaults (transfer minutes at 0.10)');
  const s = phoneCallSettings({ PARLEY_OUTBOUND_CALLS: 'OFF', PARLEY_OUTBOUND_CONCURRENCY: '3', PARLEY_TRANSFER_PRICE_PER_MINUTE: '0.25' });
  t.match(s, { outboundEnabled: false, concurrencyLimit: 3, transferPricePerMinuteMicros: 250_000n });
  t.throws(() => phoneCallSettings({ PARLEY_TRANSFER_PRICE_PER_MINUTE: 'cheap' }), /PARLEY_TRANSFER_PRICE_PER_MINUTE must be a non-negative number/);
  t.throws(() => phoneCallSettings({ PARLEY_OUTBOUND_CONCURRENCY: '-1' }), /PARLEY_OUTBOUND_CONCURRENCY must be a non-negative integer/);
});

t.test('403 outbound_disabled: outbound calls switched off (PARLEY_OUTBOUND_CALLS=off) are refused before anything else is checked', async (t) => {
  const app = await startTestServer({ config: { phoneCalls: { outboundEnabled: false } } });
  t.teardown(() => app.close());
  const agent = await makeAgent(app);
  const n = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('415', 31), agent_id: agent });
  t.equal(n.status, 201);
  const r = await call(app, { agent_id: agent, phone_number_id: n.body.phone_number_id, to_number: '+13125550100' });
  t.equal(r.status, 403);
  t.same(r.body, { status: 403, message: 'Outbound calls are disabled on this platform', reason: 'outbound_disabled' });
  const missing = await call(app, { agent_id: 'agent_nope', phone_number_id: 'phnum_nope', to_number: '+13125550100' });
  t.equal(missing.body.reason, 'outbound_disabled', 'the switch comes before the number and agent checks');
  const [day] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from phone_call_days`;
  t.equal(day!.n, 0, 'a refused call never reached the daily count');
  const invalid = await call(app, { agent_id: agent });
  t.equal(invalid.status, 422, 'body validation still comes first');
});

t.test('the main platform', async (t) => {
  const app = await startTestServer();
  t.teardown(() => app.close());

  t.test('422 number_provider_unsupported: a number whose carrier is not configured here places no calls', async (t) => {
    const agent = await makeAgent(app);
    // A `managed` (livekit-sip) number, while this platform has no LiveKit configured.
    await app.db.sql`
      insert into phone_numbers (id, team_id, phone_number, provider, agent_id, status, daily_price_micros, paid_through, next_charge_at)
      values ('phnum_managed1', ${app.teamId}, '+14155550999', 'managed', ${agent}, 'active', 0, now() + interval '1 day', now() + interval '1 day')`;
    const r = await call(app, { agent_id: agent, phone_number_id: 'phnum_managed1', to_number: '+13125550100' });
    t.equal(r.status, 422);
    t.equal(r.body[0].type, 'number_provider_unsupported');
    t.same(r.body[0].loc, ['body', 'phone_number_id']);
    t.match(r.body[0].msg, /Provider managed cannot place calls on this platform/);
  });

  t.test('concurrency limit under a race: 20 simultaneous requests against a limit of 10 give exactly 10 × 201 and 10 × 429', async (t) => {
    const team = await app.newTeam();
    const agent = await makeAgent(app, { auth: team.auth });
    const n = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('512', 31) }, team.auth);
    t.equal(n.status, 201);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => call(app, { agent_id: agent, phone_number_id: n.body.phone_number_id, to_number: `+1312555${3000 + i}` }, team.auth)),
    );
    const created = results.filter((r) => r.status === 201);
    const refused = results.filter((r) => r.status === 429);
    t.equal(created.length, 10, 'exactly 10 calls were placed');
    t.equal(refused.length, 10, 'the other 10 were refused');
    for (const r of refused) {
      t.same(r.body, { status: 429, message: 'Too many calls in progress (10 at once)', reason: 'concurrency_limit_exceeded' });
      t.equal(r.headers.get('retry-after'), '10');
    }
    const [live] = await app.db.sql<{ n: number }[]>`
      select count(*)::int as n from sessions where team_id = ${team.teamId} and direction = 'outbound' and status in ('pending', 'active')`;
    t.equal(live!.n, 10, 'ten calls ring');
    for (const r of created) await app.req('POST', `/v1/agent/sessions/${r.body.session_id}/end`, undefined, team.auth);
    // Ended calls give their slots back: a new call goes through (after the cancelled dials settle).
    let again = await call(app, { agent_id: agent, phone_number_id: n.body.phone_number_id, to_number: '+13125553100' }, team.auth);
    for (let i = 0; i < 50 && again.status === 429; i++) again = (await new Promise((r) => setTimeout(r, 100)), await call(app, { agent_id: agent, phone_number_id: n.body.phone_number_id, to_number: '+13125553100' }, team.auth));
    t.equal(again.status, 201);
    await app.req('POST', `/v1/agent/sessions/${again.body.session_id}/end`, undefined, team.auth);
  });
  t.end();
});
