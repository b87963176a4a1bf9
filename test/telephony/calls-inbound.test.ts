import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { verifySignature } from '../../src/webhooks/sign.ts';
import { startReceiver } from '../webhooks/helpers.ts';
import { sandboxNumber } from './helpers.ts';
import { boundAgent, phone, sessionOf, sleep } from './calls-helpers.ts';

// The conversation-init endpoint: variables for callers it knows, a slow answer for one it does not.
const hook = await startReceiver((r, res) => {
  const body = JSON.parse(r.body);
  if (body.caller_number === '+16505550333') {
    setTimeout(() => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"dynamic_variables":{"customer":"Late"}}'), 2500).unref();
    return true;
  }
  res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ dynamic_variables: { customer: 'Dana', tier: 3 } }));
  return true;
});
// The config schema checks webhook URLs against PARLEY_OUTBOUND_ALLOW (this test process only).
process.env.PARLEY_OUTBOUND_ALLOW = `127.0.0.1:${hook.port}`;
const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' }, config: { outboundAllow: [`127.0.0.1:${hook.port}`] } });
t.teardown(async () => {
  await app.close();
  await hook.close();
});

t.test('an inbound call reaches the bound agent: its first message in 8 kHz audio, then a spoken answer', async (t) => {
  const { number } = await boundAgent(app, {
    prompt: { first_message_mode: 'fixed', first_message: 'Hello, you reached {{system.dialed_number}}.', system_prompt: 'Caller {{system.caller_number}} on {{system.channel}}.' },
    conversation: { eagerness: 'eager' },
  }, '415', 1);
  const caller = await phone(app, { dial: number, from: '+16505550123' });
  const started = await caller.event('call.started');
  t.match(started, { direction: 'inbound', from: '+16505550123', to: number, sample_rate_hz: 8000, encoding: 'pcm_s16le' });
  const silence = caller.silence(6000); // an open line carries silence
  await caller.waitFor(() => caller.heard() === `Hello, you reached ${number}.`, 15_000, 'the opener');
  await silence;
  t.equal(caller.heard(), `Hello, you reached ${number}.`, 'the first message, rendered, heard through 8 kHz audio');
  caller.resetAudio();
  await caller.speak('What are your opening hours?');
  await caller.waitFor(() => caller.heard() === 'You said: What are your opening hours?', 15_000, 'the answer');
  t.pass('the spoken question got a spoken answer');
  caller.send({ type: 'hangup' });
  const closed = await caller.closed;
  t.equal(closed.code, 1000);
  await sleep(300);
  const s = await sessionOf(app, '+16505550123');
  t.match(s, { source: 'phone', direction: 'inbound', caller_number: '+16505550123', dialed_number: number, status: 'completed', ended_reason: 'user_hangup' });
  t.same(s.items.filter((i: any) => i.type === 'message').map((i: any) => [i.role, i.content]), [
    ['assistant', `Hello, you reached ${number}.`],
    ['user', 'What are your opening hours?'],
    ['assistant', 'You said: What are your opening hours?'],
  ]);
});

const initAgent = () =>
  boundAgent(app, {
    prompt: { first_message_mode: 'fixed', first_message: 'Hello {{customer}}.' },
    webhooks: { conversation_init: { url: `${hook.url}/init`, secret: 'init-secret', timeout_seconds: 1 } },
  }, '415', 2);

t.test('conversation_init: the signed webhook reply dynamic_variables render into the first message', async (t) => {
  const { agentId, number } = await initAgent();
  const caller = await phone(app, { dial: number, from: '+16505550222' });
  await caller.event('call.started');
  const silence = caller.silence(4000);
  await caller.waitFor(() => caller.heard() === 'Hello Dana.', 15_000, 'the opener');
  await silence;
  t.pass('the variable from the webhook was spoken');
  const req = hook.requests.find((r) => JSON.parse(r.body).caller_number === '+16505550222')!;
  t.equal(req.method, 'POST');
  t.same(JSON.parse(req.body), { event: 'conversation.init', agent_id: agentId, caller_number: '+16505550222', dialed_number: number });
  t.ok(verifySignature('init-secret', String(req.headers['x-service-webhook-signature']), req.body), 'signed like post-call webhooks');
  caller.send({ type: 'hangup' });
  await caller.closed;
  await sleep(200);
  t.match((await sessionOf(app, '+16505550222')).dynamic_variables, { customer: 'Dana', tier: 3 });
});

t.test('conversation_init: past timeout_seconds the call connects without variables', async (t) => {
  const { number } = await boundAgent(app, {
    prompt: { first_message_mode: 'fixed', first_message: 'Hello {{customer}}.' },
    webhooks: { conversation_init: { url: `${hook.url}/init`, timeout_seconds: 1 } },
  }, '415', 3);
  const caller = await phone(app, { dial: number, from: '+16505550333' });
  await caller.event('call.started', 10_000);
  const silence = caller.silence(4000);
  await caller.waitFor(() => caller.heard() === 'Hello {{customer}}.', 15_000, 'the opener');
  await silence;
  t.pass('the placeholder stayed literal: no variables');
  caller.send({ type: 'hangup' });
  await caller.closed;
});

t.test('an unbound number rings busy; a number nobody holds is not in service', async (t) => {
  const r = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('415', 4) });
  t.equal(r.status, 201);
  const busy = await phone(app, { dial: sandboxNumber('415', 4), from: '+16505550444' });
  t.equal((await busy.event('call.ended')).reason, 'busy');
  t.equal((await busy.closed).code, 1000);
  const none = await phone(app, { dial: sandboxNumber('415', 5), from: '+16505550444' });
  t.equal((await none.event('call.ended')).reason, 'not_in_service');
  await none.closed;
});

t.test('the sandbox phone endpoint needs an API key and a valid query', async (t) => {
  const bad = await phone(app, { line: '+13125550100' }, 'pk_nope');
  t.equal((await bad.closed).code, 4401);
  const q = await phone(app, { line: 'not-a-number' });
  t.equal((await q.closed).code, 4400);
});
