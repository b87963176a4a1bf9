// GET /v1/team, /v1/usage, /v1/usage/ledger: what the team was charged for, by day and kind,
// and every movement of its credit; scoped to the caller's team.
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { connect, createSession, sessionRecord } from '../e2e/session-helpers.ts';

const today = () => new Date().toISOString().slice(0, 10);

t.test('usage and ledger follow what the team did: speech, a session, a phone number', async (t) => {
  const app = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => app.close());

  const team = await app.req('GET', '/v1/team');
  t.equal(team.status, 200);
  t.equal(team.body.team_id, app.teamId);
  t.equal(typeof team.body.credit, 'number');
  const startCredit = team.body.credit as number;

  // Speech: 11 characters synthesized.
  const tts = await app.req('POST', '/v1/tts', { text: 'hello there', format: 'wav' });
  t.equal(tts.status, 200, 'synthesized');
  // A phone number: the first rental day charged up front.
  const numbers = await app.req('GET', '/v1/agent/available-phone-numbers?country_code=US');
  const bought = await app.req('POST', '/v1/agent/phone-numbers', { phone_number: numbers.body.available_phone_numbers[0].phone_number, provider: 'sandbox' });
  t.equal(bought.status, 201, bought.text);
  // A session that talked: one started minute.
  const agentId = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const session = await createSession(app, agentId);
  const caller = await connect(session);
  caller.convo.sendUserMessage('hi', { audio: false });
  await caller.waitFor(() => caller.finals('agent').length > 0, 15_000, 'the answer');
  await caller.convo.hangup();
  await sessionRecord(app, session.session_id);

  // Synthesis usage is written in batches (up to 200 ms later, docs/api/usage-wallet.md): read
  // until it shows, as a client polling its usage would.
  let usage = await app.req('GET', '/v1/usage');
  for (let i = 0; i < 50 && usage.status === 200 && !usage.body.days.some((d: any) => d.kind === 'tts_characters'); i++) {
    await new Promise((r) => setTimeout(r, 100));
    usage = await app.req('GET', '/v1/usage');
  }
  t.equal(usage.status, 200, usage.text);
  t.equal(usage.body.to, today());
  const kinds = Object.fromEntries(usage.body.days.map((d: any) => [d.kind, d]));
  t.equal(kinds.tts_characters?.amount, 11, '11 characters synthesized');
  t.equal(kinds.tts_characters.unit, 'characters');
  t.equal(kinds.tts_characters.date, today());
  t.equal(kinds.phone_number_days?.amount, 1);
  t.ok(kinds.phone_number_days.cost > 0, 'the rental day has its price');
  t.equal(kinds.session_minutes?.amount, 1);
  t.equal(kinds.session_minutes.cost, 0.1, 'one started minute at the default price');
  t.same(usage.body.totals.map((x: any) => x.kind), ['tts_characters', 'session_minutes', 'phone_number_days']);

  const ledger = await app.req('GET', '/v1/usage/ledger?include_total=true');
  t.equal(ledger.status, 200, ledger.text);
  const reasons = ledger.body.entries.map((e: any) => e.reason);
  t.same(reasons.slice().reverse().slice(0, 1), ['grant'], 'the starting credit is the oldest entry');
  t.ok(reasons.includes('phone_number_rental') && reasons.includes('usage') && reasons.includes('session_hold'), reasons.join(','));
  const after = await app.req('GET', '/v1/team');
  t.equal(ledger.body.entries[0].balance, after.body.credit, 'the newest entry\'s balance is the credit now');
  const oldest = ledger.body.entries[ledger.body.entries.length - 1];
  t.equal(oldest.balance, oldest.amount, 'the grant starts from zero');
  t.ok(after.body.credit < startCredit);
  t.equal(ledger.body.total, ledger.body.entries.length);

  // Filters and cursor pages.
  const grants = await app.req('GET', '/v1/usage/ledger?reason=grant');
  t.same(grants.body.entries.map((e: any) => e.reason), ['grant']);
  const first = await app.req('GET', '/v1/usage/ledger?page_size=1');
  t.equal(first.body.entries.length, 1);
  t.equal(first.body.has_more, true);
  const second = await app.req('GET', `/v1/usage/ledger?page_size=1&cursor=${first.body.next_cursor}`);
  t.equal(second.body.entries[0].entry_id, ledger.body.entries[1].entry_id, 'the next page continues where the first ended');

  // Another team sees none of it.
  const other = await app.newTeam();
  const theirs = await app.req('GET', '/v1/usage', undefined, other.auth);
  t.same(theirs.body.days, []);
  const theirLedger = await app.req('GET', '/v1/usage/ledger', undefined, other.auth);
  t.same(theirLedger.body.entries.map((e: any) => e.reason), ['grant']);
  t.equal((await app.req('GET', '/v1/team', undefined, other.auth)).body.team_id, other.teamId);
});

t.test('bad ranges and filters are 422 with their loc; a bad key is 401', async (t) => {
  const app = await startTestServer();
  t.teardown(() => app.close());
  const cases: [string, (string | number)[]][] = [
    ['/v1/usage?from=2026-13-01', ['query', 'from']],
    ['/v1/usage?from=2026-05-02&to=2026-05-01', ['query', 'to']],
    ['/v1/usage?from=2024-01-01&to=2026-01-01', ['query', 'to']],
    ['/v1/usage/ledger?reason=gift', ['query', 'reason']],
  ];
  for (const [path, loc] of cases) {
    const r = await app.req('GET', path);
    t.equal(r.status, 422, path);
    t.same(r.body[0].loc, loc, path);
  }
  const range = await app.req('GET', '/v1/usage?from=2026-01-01&to=2026-01-31');
  t.equal(range.status, 200);
  t.same([range.body.from, range.body.to, range.body.days], ['2026-01-01', '2026-01-31', []]);
  const bad = await fetch(`${app.url}/v1/team`, { headers: { Authorization: 'Bearer pk_nope' } });
  t.equal(bad.status, 401);
  t.same(await bad.json(), { status: 401, message: 'Invalid token' });
});

t.test('the routes are in the OpenAPI document', async (t) => {
  const app = await startTestServer();
  t.teardown(() => app.close());
  const doc = (await app.req('GET', '/openapi.json')).body;
  for (const p of ['/v1/team', '/v1/usage', '/v1/usage/ledger']) t.ok(doc.paths[p]?.get, p);
  t.ok(doc.paths['/v1/agent/sessions'].get.parameters.some((x: any) => x.name === 'phone_number'), 'sessions filter by phone number');
});

t.test('GET /v1/agent/sessions?phone_number: the calls through one of the team\'s numbers', async (t) => {
  const app = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => app.close());
  const agentId = await makeAgent(app);
  const available = (await app.req('GET', '/v1/agent/available-phone-numbers?country_code=US')).body.available_phone_numbers;
  const buy = async (n: string) => (await app.req('POST', '/v1/agent/phone-numbers', { phone_number: n, provider: 'sandbox', agent_id: agentId })).body;
  const [a, b] = [await buy(available[0].phone_number), await buy(available[1].phone_number)];
  const call = await app.req('POST', '/v1/agent/phone-calls', { agent_id: agentId, phone_number_id: a.phone_number_id, to_number: '+14155550199' });
  t.equal(call.status, 201, call.text);
  const all = 'status=pending,active,completed,failed,unknown';
  const viaA = await app.req('GET', `/v1/agent/sessions?${all}&phone_number=${encodeURIComponent(a.phone_number)}`);
  t.same(viaA.body.sessions.map((s: any) => s.session_id), [call.body.session_id], 'the outbound call placed from it');
  const bare = await app.req('GET', `/v1/agent/sessions?${all}&phone_number=${a.phone_number.slice(1)}`);
  t.equal(bare.body.sessions.length, 1, 'a bare number gets its +');
  t.same((await app.req('GET', `/v1/agent/sessions?${all}&phone_number=${encodeURIComponent(b.phone_number)}`)).body.sessions, [], 'none through the other number');
  const other = await app.newTeam();
  t.same((await app.req('GET', `/v1/agent/sessions?${all}&phone_number=${encodeURIComponent(a.phone_number)}`, undefined, other.auth)).body.sessions, [], 'another team sees none');
  const bad = await app.req('GET', '/v1/agent/sessions?phone_number=12ab');
  t.equal(bad.status, 422);
  t.same(bad.body[0].loc, ['query', 'phone_number']);
});
