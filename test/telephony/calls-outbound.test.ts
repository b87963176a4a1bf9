import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { sandboxOf, sandboxNumber, creditOf } from './helpers.ts';
import { boundAgent, phone, settleSession, sleep } from './calls-helpers.ts';
import { openApiValidator } from '../helpers/openapi.ts';

const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' } });
t.teardown(() => app.close());

const call = (body: Record<string, unknown>, headers: Record<string, string> = {}, auth = app.auth) => app.req('POST', '/v1/agent/phone-calls', body, { ...auth, ...headers });
const settle = (id: string, pred: (s: any) => boolean, what: string) => settleSession(app, id, pred, what);

const { agentId, numberId, number } = await boundAgent(app, { prompt: { first_message_mode: 'fixed', first_message: 'Hi, this is Acme calling on {{system.channel}}.' } }, '212', 1);

t.test('an outbound call rings the destination; answered, the agent speaks first (8 kHz)', async (t) => {
  const to = '+13125550142';
  const line = await phone(app, { line: to });
  await line.event('line.ready');
  const r = await call({ agent_id: agentId, phone_number_id: numberId, to_number: to, metadata: { crm: 7 } });
  t.equal(r.status, 201);
  t.match(r.body, { session_id: /^sess_/, status: 'queued' });
  const ringing = await line.event('call.ringing');
  t.match(ringing, { from: number, to });
  line.send({ type: 'answer' });
  await line.event('call.started');
  const silence = line.silence(5000);
  await line.waitFor(() => line.heard() === 'Hi, this is Acme calling on phone_outbound.', 15_000, 'the opener');
  t.pass('the first message was heard by the person called');
  await silence;
  const s = await settle(r.body.session_id, (s) => s.status === 'active', 'active');
  t.match(s, { source: 'phone', direction: 'outbound', dial_status: 'answered', answered_by: 'human', caller_number: to, dialed_number: number, metadata: { crm: 7 } });
  // POST …/end ends a call in progress: the carrier leg is hung up.
  t.equal((await app.req('POST', `/v1/agent/sessions/${r.body.session_id}/end`)).status, 204);
  const ended = await line.event('call.ended');
  t.equal(ended.reason, 'hangup', 'the phone was hung up');
  const done = await settle(r.body.session_id, (s) => s.status === 'completed', 'completed');
  t.equal(done.ended_reason, 'ended_by_api');
  line.close();
});

t.test("another team's phone on the same number never rings for this team's call", async (t) => {
  const to = '+13125550144';
  const other = await app.newTeam();
  const stranger = await phone(app, { line: to }, other.key);
  await stranger.event('line.ready');
  const line = await phone(app, { line: to });
  await line.event('line.ready');
  const r = await call({ agent_id: agentId, phone_number_id: numberId, to_number: to });
  t.equal(r.status, 201);
  t.match(await line.event('call.ringing'), { from: number, to }, "the calling team's own line rings");
  line.send({ type: 'reject' });
  await settleSession(app, r.body.session_id, (s) => s.status !== 'pending', 'ended');
  t.same(stranger.events.map((e) => e.type), ['line.ready'], "the other team's line heard nothing of the call");
  stranger.close();
  line.close();
});

t.test('a declined call: dial_status busy, the session ends unbilled', async (t) => {
  const to = '+13125550143';
  const line = await phone(app, { line: to });
  await line.event('line.ready');
  const before = await creditOf(app, app.teamId);
  const r = await call({ agent_id: agentId, phone_number_id: numberId, to_number: to });
  t.equal(r.status, 201);
  await line.event('call.ringing');
  line.send({ type: 'reject' });
  const s = await settle(r.body.session_id, (s) => s.status !== 'pending', 'ended');
  t.match(s, { status: 'completed', ended_reason: 'dial_busy', dial_status: 'busy', answered_by: null, started_at: null });
  t.equal(await creditOf(app, app.teamId), before, 'the up-front hold was given back: ringing is free');
  line.close();
});

t.test('refusals: every status and reason of call creation', async (t) => {
  const base = { agent_id: agentId, phone_number_id: numberId, to_number: '+13125550150' };
  const expect = async (body: Record<string, unknown>, status: number, reason: string, message?: RegExp) => {
    const r = await call(body);
    t.equal(r.status, status, `${reason}: status`);
    if (status === 422) t.equal(r.body[0].type, reason, `${reason}: the 422 entry names the reason`);
    else {
      t.equal(r.body.reason, reason, `${reason}: reason`);
      t.equal(r.body.status, status);
      if (message) t.match(r.body.message, message);
    }
  };
  await expect({ ...base, phone_number_id: 'phnum_nope' }, 404, 'number_not_found', /^Phone number not found$/);
  await expect({ ...base, agent_id: 'agent_nope' }, 404, 'agent_not_found', /^Agent not found$/);
  const draft = await makeAgent(app, { publish: false });
  await expect({ ...base, agent_id: draft }, 409, 'agent_not_published', /^Agent has no published version$/);
  await expect({ ...base, to_number: '3125550150' }, 422, 'destination_invalid');
  await expect({ ...base, to_number: '+442071838750' }, 422, 'destination_not_allowed');
  await expect({ ...base, to_number: '+81570123456' }, 422, 'premium_destination_blocked');
  await expect({ ...base, to_number: '+819901234567' }, 422, 'premium_destination_blocked');
  await expect({ ...base, to_number: number }, 422, 'self_call_blocked');
  sandboxOf(app).failNext('purchase');
  const failed = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('212', 9) });
  t.equal(failed.status, 502);
  const errored = (await app.req('GET', '/v1/agent/phone-numbers')).body;
  t.ok(errored);
  const [row] = await app.db.sql<{ id: string }[]>`select id from phone_numbers where phone_number = ${sandboxNumber('212', 9)} and status = 'error'`;
  await expect({ ...base, phone_number_id: row!.id }, 422, 'number_inactive');
  // 402: a team whose credit paid its number and nothing more.
  const poor = await app.newTeam({ creditMicros: app.config.phoneNumberDailyPriceMicros });
  const poorAgent = await makeAgent(app, { auth: poor.auth });
  const n = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('212', 8) }, poor.auth);
  t.equal(n.status, 201);
  const r = await call({ agent_id: poorAgent, phone_number_id: n.body.phone_number_id, to_number: '+13125550150' }, {}, poor.auth);
  t.equal(r.status, 402);
  t.same(r.body, { status: 402, message: 'Out of API credit', reason: 'insufficient_credit' });
  // Another team's number and agent are not found.
  const other = await app.newTeam();
  t.equal((await call(base, {}, other.auth)).body.reason, 'number_not_found');
});

t.test('Idempotency-Key: a retry replays the first answer; another body with the same key is refused', async (t) => {
  const body = { agent_id: agentId, phone_number_id: numberId, to_number: '+13125550160' };
  const a = await call(body, { 'Idempotency-Key': 'key-1' });
  t.equal(a.status, 201);
  const b = await call(body, { 'Idempotency-Key': 'key-1' });
  t.equal(b.status, 201);
  t.same(b.body, a.body, 'the same session: no second call');
  const c = await call({ ...body, to_number: '+13125550161' }, { 'Idempotency-Key': 'key-1' });
  t.equal(c.status, 422);
  t.equal(c.body[0].type, 'idempotency_key_reuse');
  await app.req('POST', `/v1/agent/sessions/${a.body.session_id}/end`);
  await settle(a.body.session_id, (s) => s.status !== 'pending', 'ended');
});

t.test('concurrency limit: 10 calls ringing or live; the 11th is refused with 429 concurrency_limit_exceeded', async (t) => {
  const team = await app.newTeam();
  const agent = await makeAgent(app, { auth: team.auth });
  const n = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('206', 1) }, team.auth);
  const body = (i: number) => ({ agent_id: agent, phone_number_id: n.body.phone_number_id, to_number: `+1312555${String(2000 + i)}` });
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    const r = await call(body(i), {}, team.auth);
    t.equal(r.status, 201, `call ${i + 1} of 10 rings`);
    ids.push(r.body.session_id);
  }
  const r = await call(body(10), {}, team.auth);
  t.equal(r.status, 429);
  t.same(r.body, { status: 429, message: 'Too many calls in progress (10 at once)', reason: 'concurrency_limit_exceeded' });
  t.equal(r.headers.get('retry-after'), '10');
  // Ending a ringing call cancels its dial and frees a slot.
  t.equal((await app.req('POST', `/v1/agent/sessions/${ids[0]}/end`, undefined, team.auth)).status, 204);
  const ended = (await app.req('GET', `/v1/agent/sessions/${ids[0]}`, undefined, team.auth)).body;
  t.match(ended, { status: 'completed', ended_reason: 'ended_by_api' });
  // The slot is freed once the dial is cancelled (a moment after the 204): retry as Retry-After says.
  let again = await call(body(11), {}, team.auth);
  for (let i = 0; i < 50 && again.status === 429; i++) again = (await sleep(100), await call(body(11), {}, team.auth));
  t.equal(again.status, 201, 'a slot was free again');
  ids.push(again.body.session_id);
  for (const id of ids) await app.req('POST', `/v1/agent/sessions/${id}/end`, undefined, team.auth);
});

t.test('daily limit: 200 attempts per UTC day, refused attempts count; the 201st is refused with 429 daily_limit_exceeded', async (t) => {
  const team = await app.newTeam();
  const agent = await makeAgent(app, { auth: team.auth });
  const n = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('206', 2) }, team.auth);
  const body = { agent_id: agent, phone_number_id: n.body.phone_number_id, to_number: '+13125550170' };
  // 199 attempts already today (placed or refused alike).
  await app.db.sql`insert into phone_call_days (team_id, day, attempts) values (${team.teamId}, (now() at time zone 'UTC')::date, 199)`;
  const ok = await call(body, {}, team.auth);
  t.equal(ok.status, 201, 'the 200th attempt of the day is placed');
  const r = await call(body, {}, team.auth);
  t.equal(r.status, 429);
  t.same(r.body, { status: 429, message: 'Daily outbound call limit reached (200 per UTC day)', reason: 'daily_limit_exceeded' });
  const retry = Number(r.headers.get('retry-after'));
  t.ok(retry >= 1 && retry <= 86_400, 'Retry-After: until the next UTC midnight');
  await call(body, {}, team.auth);
  const [day] = await app.db.sql<{ attempts: number }[]>`select attempts from phone_call_days where team_id = ${team.teamId}`;
  t.equal(day!.attempts, 202, 'refused attempts count toward the day');
  await app.req('POST', `/v1/agent/sessions/${ok.body.session_id}/end`, undefined, team.auth);
});

t.test('/openapi.json describes POST /v1/agent/phone-calls truthfully', async (t) => {
  const v = openApiValidator((await app.req('GET', '/openapi.json')).body);
  const ok = await call({ agent_id: agentId, phone_number_id: numberId, to_number: '+13125550180' });
  t.same(v.check('POST', '/v1/agent/phone-calls', 201, ok.body), []);
  const missing = await call({ agent_id: agentId, phone_number_id: 'phnum_nope', to_number: '+13125550180' });
  t.same(v.check('POST', '/v1/agent/phone-calls', 404, missing.body), []);
  const extra = await call({ agent_id: agentId, phone_number_id: numberId, to_number: '+13125550180', nope: 1 });
  t.equal(extra.status, 422, 'unknown fields are refused');
  t.equal(extra.body[0].loc.join('.'), 'body.nope');
  await app.req('POST', `/v1/agent/sessions/${ok.body.session_id}/end`);
});
