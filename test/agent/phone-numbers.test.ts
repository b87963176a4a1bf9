import t from 'tap';
import { loadConfig } from '../../src/config.ts';
import { openApiValidator } from '../helpers/openapi.ts';
import { startTestServer } from '../helpers/server.ts';
import { creditOf, ledgerOf, ledgerSum, sandboxNumber, sandboxOf } from '../telephony/helpers.ts';

const PRICE = 1_000_000n; // one day of rental: 1.00
const LIMIT = 12;
const app = await startTestServer({ config: { phoneNumberDailyPriceMicros: PRICE, phoneNumberLimit: LIMIT } });
t.teardown(() => app.close());
const sandbox = sandboxOf(app);

// Each test buys from its own area-code slice so the tests never collide on a number.
const used = new Map<string, number>();
const fresh = (area = '415') => {
  const i = used.get(area) ?? 0;
  used.set(area, i + 1);
  return sandboxNumber(area, i);
};
const buy = (auth: Record<string, string>, body: Record<string, unknown>) => app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', ...body }, auth);

t.test('configuration defaults: 10 numbers per team, 0.05 per day', async (t) => {
  const c = loadConfig({});
  t.equal(c.phoneNumberLimit, 10);
  t.equal(c.phoneNumberDailyPriceMicros, 50_000n);
  t.equal(loadConfig({ PARLEY_PHONE_NUMBER_LIMIT: '3', PARLEY_PHONE_NUMBER_DAILY_PRICE: '0.2' }).phoneNumberDailyPriceMicros, 200_000n);
});

t.test('search', async (t) => {
  const res = await app.req('GET', '/v1/agent/available-phone-numbers');
  t.equal(res.status, 200);
  const list = res.body.available_phone_numbers;
  t.equal(list.length, 20);
  t.same(list[0], { phone_number: '+14155550100', country_code: 'US', region: 'CA', locality: 'San Francisco', number_type: 'local', provider: 'sandbox', pricing: { daily_price: 1 } });
  t.ok(list.every((n: { country_code: string }) => n.country_code === 'US'), 'US by default');

  const ca = await app.req('GET', '/v1/agent/available-phone-numbers?country_code=CA&area_code=604&number_type=local&provider=sandbox');
  t.equal(ca.status, 200);
  t.ok(ca.body.available_phone_numbers.length > 0);
  t.ok(ca.body.available_phone_numbers.every((n: { phone_number: string }) => n.phone_number.startsWith('+1604')));
  t.same((await app.req('GET', '/v1/agent/available-phone-numbers?country_code=US&area_code=604')).body, { available_phone_numbers: [] }, 'area code of another country');

  const tollFree = await app.req('GET', '/v1/agent/available-phone-numbers?number_type=toll_free');
  t.same([tollFree.status, tollFree.body], [400, { status: 400, message: 'Toll-free numbers are not available' }]);
  const managed = await app.req('GET', '/v1/agent/available-phone-numbers?provider=managed');
  t.same([managed.status, managed.body], [400, { status: 400, message: 'Phone number provider is not configured: managed' }]);
  const bad = await app.req('GET', '/v1/agent/available-phone-numbers?country_code=JP&area_code=41&number_type=mobile&provider=twilio');
  t.equal(bad.status, 422);
  t.same(bad.body.map((e: { loc: unknown[] }) => e.loc), [['query', 'country_code'], ['query', 'area_code'], ['query', 'number_type'], ['query', 'provider']]);

  // A number held on the platform is not offered.
  const n = fresh('206');
  t.equal(n, sandboxNumber('206', 0));
  t.equal((await buy(app.auth, { phone_number: n })).status, 201);
  const after = await app.req('GET', '/v1/agent/available-phone-numbers?area_code=206');
  t.notOk(after.body.available_phone_numbers.some((x: { phone_number: string }) => x.phone_number === n));
  t.equal(after.body.available_phone_numbers[0].phone_number, sandboxNumber('206', 1));
});

t.test('purchase, read, list: the first day is charged up front', async (t) => {
  const team = await app.newTeam({ creditMicros: 5_000_000n });
  const phone = fresh();
  const res = await buy(team.auth, { phone_number: phone, label: 'Front desk' });
  t.equal(res.status, 201);
  const n = res.body;
  t.match(n.phone_number_id, /^phnum_[0-9a-f]{24}$/);
  t.same(Object.keys(n).sort(), ['agent_id', 'created_at', 'label', 'phone_number', 'phone_number_id', 'provider', 'status', 'status_detail', 'updated_at', 'workspace_id']);
  t.match(n, { workspace_id: team.teamId, phone_number: phone, provider: 'sandbox', label: 'Front desk', agent_id: null, status: 'active', status_detail: null });
  t.equal(await creditOf(app, team.teamId), 4_000_000n);
  t.same((await ledgerOf(app, team.teamId)).slice(1), [{ amount: -PRICE, reason: 'phone_number_rental', ref: n.phone_number_id }]);
  t.ok(sandbox.holds(phone), 'the carrier holds it');

  const got = await app.req('GET', `/v1/agent/phone-numbers/${n.phone_number_id}`, undefined, team.auth);
  t.same([got.status, got.body], [200, n]);
  const list = await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth);
  t.same(list.body, { phone_numbers: [n], has_more: false, next_cursor: null, total: null });
  const byNumber = await app.req('GET', `/v1/agent/phone-numbers?phone_number=${encodeURIComponent(phone)}`, undefined, team.auth);
  t.same(byNumber.body.phone_numbers, [n]);
  const none = await app.req('GET', `/v1/agent/phone-numbers?phone_number=${encodeURIComponent('+14155550199')}`, undefined, team.auth);
  t.same(none.body.phone_numbers, []);
  t.equal((await app.req('GET', '/v1/agent/phone-numbers?phone_number=4155550100', undefined, team.auth)).status, 422, 'filter must be E.164');
});

t.test('purchase validation (422) and beta access (403)', async (t) => {
  const cases: [unknown, unknown[][]][] = [
    [{}, [['body', 'provider'], ['body', 'phone_number']]],
    [{ provider: 'twilio', phone_number: '4155550100' }, [['body', 'provider'], ['body', 'phone_number']]],
    [{ provider: 'sandbox', phone_number: fresh(), label: 'x'.repeat(121), agent_id: null, extra: 1 }, [['body', 'label'], ['body', 'agent_id'], ['body', 'extra']]],
    [{ provider: 'sandbox', phone_number: fresh(), agent_id: 'agent_000000000000000000000000' }, [['body', 'agent_id']]],
  ];
  const before = await creditOf(app, app.teamId);
  for (const [body, locs] of cases) {
    const res = await app.req('POST', '/v1/agent/phone-numbers', body);
    t.equal(res.status, 422, JSON.stringify(body));
    t.same(res.body.map((e: { loc: unknown[] }) => e.loc), locs);
  }
  const nul = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: fresh(), agent_id: null });
  t.equal(nul.body[0].type, 'null_forbidden');
  const unresolved = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: fresh(), agent_id: 'agent_000000000000000000000000' });
  t.equal(unresolved.body[0].type, 'unresolved_reference');
  t.equal(await creditOf(app, app.teamId), before, 'nothing charged');

  const noBeta = await app.newTeam({ beta: false });
  const res = await buy(noBeta.auth, { phone_number: fresh() });
  t.equal(res.status, 403);
  t.match(res.body.message, /^Agent platform is in private beta/);
  const managed = await buy(app.auth, { provider: 'managed', phone_number: fresh() });
  t.same([managed.status, managed.body.message], [400, 'Phone number provider is not configured: managed']);
});

t.test('402 Out of API credit: nothing charged, nothing created', async (t) => {
  const team = await app.newTeam({ creditMicros: PRICE - 1n });
  const ledger = await ledgerOf(app, team.teamId);
  const res = await buy(team.auth, { phone_number: fresh() });
  t.same([res.status, res.body], [402, { status: 402, message: 'Out of API credit' }]);
  t.equal(await creditOf(app, team.teamId), PRICE - 1n);
  t.same(await ledgerOf(app, team.teamId), ledger);
  t.same((await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth)).body.phone_numbers, []);
});

t.test('403 at the cap of live numbers; error rows do not count; releasing frees a slot', async (t) => {
  const team = await app.newTeam({ creditMicros: 100_000_000n });
  const ids: string[] = [];
  for (let i = 0; i < LIMIT; i++) {
    const r = await buy(team.auth, { phone_number: fresh('512') });
    t.equal(r.status, 201);
    ids.push(r.body.phone_number_id);
  }
  const credit = await creditOf(app, team.teamId);
  const over = await buy(team.auth, { phone_number: fresh('512') });
  t.same([over.status, over.body], [403, { status: 403, message: `Phone number limit reached for this team (${LIMIT})` }]);
  t.equal(await creditOf(app, team.teamId), credit, 'nothing charged');
  t.equal((await app.req('DELETE', `/v1/agent/phone-numbers/${ids[0]}`, undefined, team.auth)).status, 204);
  sandbox.failNext('purchase', 'no capacity');
  t.equal((await buy(team.auth, { phone_number: fresh('512') })).status, 502, 'a failed purchase leaves an error row');
  t.equal((await buy(team.auth, { phone_number: fresh('512') })).status, 201, 'the error row holds no slot');
  t.equal((await buy(team.auth, { phone_number: fresh('512') })).status, 403);
});

t.test('409 This number is already on the platform', async (t) => {
  const a = await app.newTeam();
  const b = await app.newTeam();
  const phone = fresh();
  const first = await buy(a.auth, { phone_number: phone });
  t.equal(first.status, 201);
  const creditB = await creditOf(app, b.teamId);
  for (const team of [b, a]) {
    const res = await buy(team.auth, { phone_number: phone });
    t.same([res.status, res.body], [409, { status: 409, message: 'This number is already on the platform' }]);
  }
  t.equal(await creditOf(app, b.teamId), creditB, 'nothing charged');
  t.equal((await app.req('DELETE', `/v1/agent/phone-numbers/${first.body.phone_number_id}`, undefined, a.auth)).status, 204);
  t.equal((await buy(b.auth, { phone_number: phone })).status, 201, 'free again once released');
});

t.test('carrier refuses a purchase → 502, error row, refund (both ledger entries), releasable', async (t) => {
  const team = await app.newTeam({ creditMicros: 10_000_000n });
  const phone = fresh();
  sandbox.failNext('purchase', 'line unavailable');
  const res = await buy(team.auth, { phone_number: phone, label: 'doomed' });
  t.same([res.status, res.body], [502, { status: 502, message: 'sandbox refused the request: line unavailable' }]);
  t.equal(await creditOf(app, team.teamId), 10_000_000n, 'refunded');
  const ledger = (await ledgerOf(app, team.teamId)).slice(1);
  t.equal(ledger.length, 2);
  t.same(ledger.map((e) => [e.amount, e.reason]), [[-PRICE, 'phone_number_rental'], [PRICE, 'phone_number_refund']]);
  t.equal(ledger[0]!.ref, ledger[1]!.ref);
  t.equal(await ledgerSum(app, team.teamId), await creditOf(app, team.teamId));

  const list = await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth);
  t.equal(list.body.phone_numbers.length, 1);
  const row = list.body.phone_numbers[0];
  t.match(row, { phone_number_id: ledger[0]!.ref, phone_number: phone, label: 'doomed', status: 'error', status_detail: 'line unavailable' });
  t.notOk(sandbox.holds(phone));
  t.equal((await app.req('GET', `/v1/agent/phone-numbers/${row.phone_number_id}`, undefined, team.auth)).body.status, 'error');

  // Retry is safe: the error row holds nothing, so the same number can be bought again.
  const retry = await buy(team.auth, { phone_number: phone });
  t.equal(retry.status, 201);
  t.equal(retry.body.status, 'active');

  t.equal((await app.req('DELETE', `/v1/agent/phone-numbers/${row.phone_number_id}`, undefined, team.auth)).status, 204, 'the error row is releasable');
  t.equal((await app.req('GET', `/v1/agent/phone-numbers/${row.phone_number_id}`, undefined, team.auth)).status, 404);
  t.ok(sandbox.holds(phone), 'releasing the error row did not touch the live purchase');
  t.same((await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth)).body.phone_numbers.map((n: { phone_number_id: string }) => n.phone_number_id), [retry.body.phone_number_id]);

  const before = await creditOf(app, team.teamId);
  const listed = (await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth)).body.phone_numbers.length;
  const outside = await buy(team.auth, { phone_number: '+14155559999' });
  t.same([outside.status, outside.body.message], [400, 'sandbox does not offer +14155559999: choose one from GET /v1/agent/available-phone-numbers'], 'a number outside the inventory is the client\'s mistake, not a carrier failure');
  t.equal(await creditOf(app, team.teamId), before, 'nothing charged');
  t.equal((await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth)).body.phone_numbers.length, listed, 'no error row left behind');
  t.equal(await ledgerSum(app, team.teamId), await creditOf(app, team.teamId), 'the ledger sums to the balance');
});

t.test('carrier refuses a release → 502, still active and listed; releasing again retries', async (t) => {
  const team = await app.newTeam();
  const phone = fresh();
  const n = (await buy(team.auth, { phone_number: phone })).body;
  sandbox.failNext('release', 'carrier maintenance');
  const del = await app.req('DELETE', `/v1/agent/phone-numbers/${n.phone_number_id}`, undefined, team.auth);
  t.same([del.status, del.body], [502, { status: 502, message: 'sandbox refused the request: carrier maintenance' }]);
  const got = await app.req('GET', `/v1/agent/phone-numbers/${n.phone_number_id}`, undefined, team.auth);
  t.match(got.body, { status: 'active', status_detail: 'Release failed: carrier maintenance' });
  t.equal((await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth)).body.phone_numbers.length, 1);
  t.ok(sandbox.holds(phone));
  t.equal((await buy((await app.newTeam()).auth, { phone_number: phone })).status, 409, 'still held');

  t.equal((await app.req('DELETE', `/v1/agent/phone-numbers/${n.phone_number_id}`, undefined, team.auth)).status, 204);
  t.notOk(sandbox.holds(phone));
  const missing = await app.req('GET', '/v1/agent/phone-numbers/phnum_000000000000000000000000', undefined, team.auth);
  t.same(missing.body, { status: 404, message: 'Phone number not found' });
  for (const [method, body] of [['GET', undefined], ['PATCH', { label: 'x' }], ['DELETE', undefined]] as const) {
    const r = await app.req(method, `/v1/agent/phone-numbers/${n.phone_number_id}`, body, team.auth);
    t.same([r.status, r.text], [404, missing.text], `released: ${method} behaves as missing`);
  }
  t.same((await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth)).body.phone_numbers, []);
  t.same((await app.req('GET', `/v1/agent/phone-numbers?phone_number=${encodeURIComponent(phone)}`, undefined, team.auth)).body.phone_numbers, []);
});

t.test('PATCH: label, bind to an agent, null unbinds, omitted keeps', async (t) => {
  const team = await app.newTeam();
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'Reception' }, team.auth)).body;
  const other = await app.newTeam();
  const foreign = (await app.req('POST', '/v1/agent/agents', { name: 'Theirs' }, other.auth)).body;
  const n = (await buy(team.auth, { phone_number: fresh() })).body;
  const url = `/v1/agent/phone-numbers/${n.phone_number_id}`;

  const bound = await app.req('PATCH', url, { agent_id: agent.agent_id, label: 'Main line' }, team.auth);
  t.equal(bound.status, 200);
  t.match(bound.body, { agent_id: agent.agent_id, label: 'Main line', status: 'active' });
  t.ok(bound.body.updated_at >= n.updated_at);
  const kept = await app.req('PATCH', url, { label: 'Renamed' }, team.auth);
  t.match(kept.body, { agent_id: agent.agent_id, label: 'Renamed' }, 'agent_id omitted keeps the binding');
  const byAgent = await app.req('GET', `/v1/agent/phone-numbers?agent_id=${agent.agent_id}`, undefined, team.auth);
  t.same(byAgent.body.phone_numbers.map((x: { phone_number_id: string }) => x.phone_number_id), [n.phone_number_id]);

  for (const id of [foreign.agent_id, 'agent_000000000000000000000000']) {
    const r = await app.req('PATCH', url, { agent_id: id }, team.auth);
    t.equal(r.status, 422);
    t.same(r.body, [{ type: 'unresolved_reference', loc: ['body', 'agent_id'], msg: 'Value error, no agent with this id exists in the workspace', ctx: {} }]);
  }
  const badLabel = await app.req('PATCH', url, { label: null, status: 'active' }, team.auth);
  t.equal(badLabel.status, 422);
  t.same(badLabel.body.map((e: { type: string }) => e.type), ['null_forbidden', 'extra_forbidden']);
  t.equal((await app.req('GET', url, undefined, team.auth)).body.agent_id, agent.agent_id, 'refused patches change nothing');

  const unbound = await app.req('PATCH', url, { agent_id: null }, team.auth);
  t.match(unbound.body, { agent_id: null, label: 'Renamed' });
  t.same((await app.req('GET', `/v1/agent/phone-numbers?agent_id=${agent.agent_id}`, undefined, team.auth)).body.phone_numbers, []);

  await app.req('PATCH', url, { agent_id: agent.agent_id }, team.auth);
  t.equal((await app.req('DELETE', `/v1/agent/agents/${agent.agent_id}`, undefined, team.auth)).status, 204);
  t.equal((await app.req('GET', url, undefined, team.auth)).body.agent_id, null, 'deleting the agent unbinds its numbers');
});

t.test("another team's number gives exactly the same 404 as a missing one", async (t) => {
  const owner = await app.newTeam();
  const n = (await buy(owner.auth, { phone_number: fresh() })).body;
  const missing = await app.req('GET', '/v1/agent/phone-numbers/phnum_000000000000000000000000');
  t.equal(missing.status, 404);
  for (const [method, body] of [['GET', undefined], ['PATCH', { label: 'mine' }], ['DELETE', undefined]] as const) {
    const r = await app.req(method, `/v1/agent/phone-numbers/${n.phone_number_id}`, body);
    t.same([r.status, r.text], [404, missing.text], method);
  }
  t.notOk((await app.req('GET', '/v1/agent/phone-numbers')).body.phone_numbers.some((x: { phone_number_id: string }) => x.phone_number_id === n.phone_number_id));
  const still = await app.req('GET', `/v1/agent/phone-numbers/${n.phone_number_id}`, undefined, owner.auth);
  t.match(still.body, { status: 'active', label: '' }, 'untouched');
});

t.test('pagination', async (t) => {
  const team = await app.newTeam();
  const ids: string[] = [];
  for (let i = 0; i < LIMIT; i++) ids.push((await buy(team.auth, { phone_number: fresh('212') })).body.phone_number_id);
  const newestFirst = ids.slice().reverse();
  const seen: string[] = [];
  let q = '?page_size=5';
  for (let guard = 0; guard < 10; guard++) {
    const r = await app.req('GET', `/v1/agent/phone-numbers${q}`, undefined, team.auth);
    t.equal(r.status, 200);
    seen.push(...r.body.phone_numbers.map((x: { phone_number_id: string }) => x.phone_number_id));
    if (!r.body.has_more) break;
    q = `?page_size=5&cursor=${r.body.next_cursor}`;
  }
  t.same(seen, newestFirst, 'a cursor walk sees each number once, newest first');
  const page3 = await app.req('GET', '/v1/agent/phone-numbers?page=3&page_size=5', undefined, team.auth);
  t.same([page3.body.total, page3.body.has_more, page3.body.phone_numbers.map((x: { phone_number_id: string }) => x.phone_number_id)], [LIMIT, false, newestFirst.slice(10)]);
  await app.req('DELETE', `/v1/agent/phone-numbers/${ids[0]}`, undefined, team.auth);
  t.equal((await app.req('GET', '/v1/agent/phone-numbers?include_total=true', undefined, team.auth)).body.total, LIMIT - 1, 'released numbers are not counted');
  t.equal((await app.req('GET', '/v1/agent/phone-numbers?page=1&cursor=abc', undefined, team.auth)).status, 400);
  t.equal((await app.req('GET', '/v1/agent/phone-numbers?cursor=!!', undefined, team.auth)).body.message, 'Invalid cursor');
});

t.test('concurrent purchases racing for the last credit never leave a partial charge', async (t) => {
  const start = PRICE * 2n + PRICE / 2n; // room for exactly two days
  const team = await app.newTeam({ creditMicros: start });
  const results = await Promise.all(Array.from({ length: 8 }, () => buy(team.auth, { phone_number: fresh('416') })));
  const statuses = results.map((r) => r.status).sort();
  t.same(statuses, [201, 201, 402, 402, 402, 402, 402, 402]);
  t.equal(await creditOf(app, team.teamId), start - 2n * PRICE);
  t.equal(await ledgerSum(app, team.teamId), await creditOf(app, team.teamId), 'the ledger sums exactly to the balance');
  t.equal((await ledgerOf(app, team.teamId)).filter((e) => e.reason === 'phone_number_rental').length, 2);
  t.equal((await app.req('GET', '/v1/agent/phone-numbers', undefined, team.auth)).body.phone_numbers.length, 2);

  t.test('with carrier failures in the race, refunds are exact too', async (t) => {
    const racer = await app.newTeam({ creditMicros: start });
    sandbox.failNext('purchase', 'busy', 2);
    const rs = await Promise.all(Array.from({ length: 6 }, () => buy(racer.auth, { phone_number: fresh('416') })));
    const created = rs.filter((r) => r.status === 201).length;
    t.ok(rs.every((r) => [201, 402, 502].includes(r.status)));
    t.equal(await creditOf(app, racer.teamId), start - BigInt(created) * PRICE);
    t.equal(await ledgerSum(app, racer.teamId), await creditOf(app, racer.teamId));
  });

  t.test('two teams racing for one number: one 201, one 409, the loser pays nothing', async (t) => {
    const a = await app.newTeam();
    const b = await app.newTeam();
    const phone = fresh('604');
    const [ra, rb] = await Promise.all([buy(a.auth, { phone_number: phone }), buy(b.auth, { phone_number: phone })]);
    t.same([ra.status, rb.status].sort(), [201, 409]);
    const loser = ra.status === 409 ? a : b;
    t.equal(await creditOf(app, loser.teamId), 100_000_000n);
    t.equal((await ledgerOf(app, loser.teamId)).length, 1, 'only the grant');
  });

  t.test('racing for the last slot under the cap', async (t) => {
    const team2 = await app.newTeam({ creditMicros: 100_000_000n });
    for (let i = 0; i < LIMIT - 1; i++) await buy(team2.auth, { phone_number: fresh('604') });
    const rs = await Promise.all(Array.from({ length: 4 }, () => buy(team2.auth, { phone_number: fresh('604') })));
    t.same(rs.map((r) => r.status).sort(), [201, 403, 403, 403]);
    t.equal(await creditOf(app, team2.teamId), 100_000_000n - BigInt(LIMIT) * PRICE);
    t.equal(await ledgerSum(app, team2.teamId), await creditOf(app, team2.teamId));
  });
});

t.test('/openapi.json describes every phone-number endpoint truthfully', async (t) => {
  const v = openApiValidator((await app.req('GET', '/openapi.json')).body);
  const team = await app.newTeam();
  const search = await app.req('GET', '/v1/agent/available-phone-numbers?area_code=206', undefined, team.auth);
  t.same(v.check('GET', '/v1/agent/available-phone-numbers', 200, search.body), []);
  const bought = await buy(team.auth, { phone_number: fresh('206') });
  t.same(v.check('POST', '/v1/agent/phone-numbers', 201, bought.body), []);
  const path = '/v1/agent/phone-numbers/{phone_number_id}';
  const url = `/v1/agent/phone-numbers/${bought.body.phone_number_id}`;
  t.same(v.check('GET', path, 200, (await app.req('GET', url, undefined, team.auth)).body), []);
  t.same(v.check('PATCH', path, 200, (await app.req('PATCH', url, { label: 'x' }, team.auth)).body), []);
  t.same(v.check('GET', '/v1/agent/phone-numbers', 200, (await app.req('GET', '/v1/agent/phone-numbers?include_total=true', undefined, team.auth)).body), []);
  const poor = await app.newTeam({ creditMicros: 0n });
  t.same(v.check('POST', '/v1/agent/phone-numbers', 402, (await buy(poor.auth, { phone_number: fresh('206') })).body), []);
  sandbox.failNext('purchase', 'x');
  t.same(v.check('POST', '/v1/agent/phone-numbers', 502, (await buy(team.auth, { phone_number: fresh('206') })).body), []);
  t.equal(v.checked, 7);
});
