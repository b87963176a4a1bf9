import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { ledgerOf, sandboxOf } from './helpers.ts';
import { listCallTransfers } from '../../src/phone-calls/store.ts';
import { connected, humanLine, keepAlive, sessionOf, sleep, TRANSFER_HUMAN, transferAgent, transfersOf } from './calls-helpers.ts';

// Transfer minutes have their own price (PARLEY_TRANSFER_PRICE_PER_MINUTE): 0.25 here.
const TRANSFER_PRICE = 250_000n;
const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' }, config: { phoneCalls: { transferPricePerMinuteMicros: TRANSFER_PRICE } } });
t.teardown(() => app.close());

const HUMAN = TRANSFER_HUMAN;
const agent = (destination: Record<string, unknown>, index: number) => transferAgent(app, destination, index);

t.test('transfer_call is offered on phone sessions with a destination, never listed in tools', async (t) => {
  const { agentId } = await agent({}, 1);
  const cfg = await app.req('GET', `/v1/agent/agents/${agentId}/config`);
  t.same(cfg.body.tools.tool_ids ?? [], [], 'not a tool of the agent');
  t.equal(cfg.body.conversation.transfer_destinations[0].phone_number, HUMAN);
  const bad = await app.req('PATCH', `/v1/agent/agents/${agentId}/config`, { conversation: { transfer_destinations: [{ phone_number: '+442071838750' }] } });
  t.equal(bad.status, 422, 'a destination outside the allow-list is refused');
  t.match(bad.body[0], { loc: ['body', 'conversation', 'transfer_destinations', 0, 'phone_number'], type: 'destination_not_allowed', msg: /US \(\+1\), CA \(\+1\), JP \(\+81\)/ });
});

t.test('cold transfer: the agent announces, the carrier hands off to the human, the session ends', async (t) => {
  const { number } = await agent({ mode: 'cold' }, 2);
  const human = await humanLine(t, app);
  const caller = await connected(app, number, '+16505550201');
  t.teardown(() => caller.close());
  await caller.speak('Please transfer call to sales.');
  const stop = keepAlive(caller);
  const ring = await human.event('call.ringing', 20_000);
  t.equal(ring.from, number, 'the destination sees our number');
  t.equal(caller.heard(), 'Please hold while I transfer your call.', 'the caller heard the announcement first');
  human.send({ type: 'answer' });
  await caller.event('call.transferred');
  await stop();
  caller.resetAudio();
  await human.speak('Sales here, how can I help?', 300);
  await caller.waitFor(() => caller.heard() === 'Sales here, how can I help?', 10_000, 'the human');
  t.pass('caller and human talk directly');
  await sleep(2500);
  const s = await sessionOf(app, '+16505550201');
  t.match(s, { status: 'completed', ended_reason: 'call_transferred' });
  const calls = s.items.filter((i: any) => i.type === 'tool_call' || i.type === 'tool_result');
  t.match(calls, [{ type: 'tool_call', tool_name: 'transfer_call' }, { type: 'tool_result', tool_name: 'transfer_call', status: 'completed' }]);
  // The hold line the tool spoke is in the transcript, as the agent's.
  const said = s.items.filter((i: any) => i.type === 'message' && i.role === 'assistant').map((i: any) => i.content);
  t.same(said, ['Hello.', 'Please hold while I transfer your call.'], 'the tool\'s hold line is an assistant message');
  t.match(s.items.find((i: any) => i.content === 'Please hold while I transfer your call.'), { role: 'assistant', audience: 'caller', source: 'transfer_call' });
  t.same(await listCallTransfers(app.db.sql, s.session_id), [], 'transfer minutes run until the human leg ends');
  caller.send({ type: 'hangup' });
  await human.event('call.ended');
  human.close();
  // docs/api/phone.md: transfer minutes are billed separately: from the handoff to the end of the human leg.
  const transfers = await transfersOf(app, s.session_id);
  t.equal(transfers.length, 1, 'one transfer recorded');
  t.match(transfers[0], { mode: 'cold', destination: HUMAN, minutes: 1, price_per_minute_micros: TRANSFER_PRICE, cost_micros: TRANSFER_PRICE });
  t.ok(transfers[0]!.ended_at! > transfers[0]!.started_at, 'from the handoff to the end of the human leg');
  const ledger = await ledgerOf(app, app.teamId);
  t.match(ledger.filter((e) => e.ref === transfers[0]!.id), [{ amount: -TRANSFER_PRICE, reason: 'transfer_usage' }], 'its own ledger entry, at its own price');
  t.notOk(ledger.some((e) => e.ref === s.session_id && e.reason === 'transfer_usage'), 'not part of the session charge');
});

t.test('cold transfer refused by the carrier: the agent apologizes and the call goes on', async (t) => {
  const { number } = await agent({ mode: 'cold' }, 3);
  sandboxOf(app).failNext('transfer', 'the destination refused the handoff');
  const caller = await connected(app, number, '+16505550202');
  t.teardown(() => caller.close());
  await caller.speak('Please transfer call to sales.');
  const stop = keepAlive(caller);
  await caller.waitFor(() => caller.heard().endsWith('"}'), 20_000, 'the apology');
  t.equal(
    caller.heard(),
    'Please hold while I transfer your call.transfer_call returned: {"ok":false,"error":"The transfer to Sales did not go through (the destination refused the handoff). Apologize to the caller and keep helping them."}',
    'the announcement, then the model apologizes from the failed result (the scripted model reads it out)',
  );
  await stop();
  caller.resetAudio();
  await caller.speak('Are you still there?');
  await caller.waitFor(() => caller.heard() === 'You said: Are you still there?', 15_000, 'the next answer');
  t.pass('the conversation continued');
  const s = await sessionOf(app, '+16505550202');
  t.equal(s.status, 'active');
  t.match(s.items.find((i: any) => i.type === 'tool_result'), { tool_name: 'transfer_call', status: 'failed' });
  t.same(await listCallTransfers(app.db.sql, s.session_id), [], 'a refused transfer bills no transfer minutes');
  caller.send({ type: 'hangup' });
  await caller.closed;
});
