/**
 * `phone_call.dial_finished` (docs/api/webhooks.md, docs/api/phone.md): once per outbound call, answered or not,
 * queued durably with the dial status to the version's `webhooks.post_call` endpoints, signed
 * like the post-call events, and delivered before `call.ended`.
 */
import t from 'tap';
import { verifySignature } from '../../src/webhooks/sign.ts';
import { startTestServer } from '../helpers/server.ts';
import { allowWrites, startReceiver } from '../webhooks/helpers.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { phone, sleep } from './calls-helpers.ts';
import { sandboxNumber } from './helpers.ts';

const hook = await startReceiver();
allowWrites(t, `127.0.0.1:${hook.port}`);
const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'fast' }, config: { outboundAllow: [`127.0.0.1:${hook.port}`] } });
t.teardown(async () => {
  await app.close();
  await hook.close();
});
const SECRET = 'whsec_dial_test';

const agentId = await makeAgent(app, {
  config: { prompt: { first_message_mode: 'fixed', first_message: 'Hi.' }, webhooks: { post_call: [{ url: `${hook.url}/calls`, secret: SECRET }] } },
});
const n = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: sandboxNumber('206', 41) });
const numberId: string = n.body.phone_number_id;
const session = async (id: string) => (await app.req('GET', `/v1/agent/sessions/${id}`)).body;
const eventsFor = (id: string) => hook.requests.map((r) => JSON.parse(r.body)).filter((b) => b.session?.id === id);
const waitEvents = async (id: string, count: number) => {
  for (let i = 0; i < 200 && eventsFor(id).length < count; i++) await sleep(50);
  return eventsFor(id);
};

t.test('an unanswered call sends phone_call.dial_finished only (busy), signed, with the dial-time snapshot', async (t) => {
  const to = '+13125554101';
  const line = await phone(app, { line: to });
  t.teardown(() => line.close());
  await line.event('line.ready');
  const r = await app.req('POST', '/v1/agent/phone-calls', { agent_id: agentId, phone_number_id: numberId, to_number: to, metadata: { lead: 42 } });
  t.equal(r.status, 201);
  await line.event('call.ringing');
  line.send({ type: 'reject' });
  const [ev] = await waitEvents(r.body.session_id, 1);
  t.ok(ev, 'dial_finished arrived');
  t.match(ev, {
    event: 'phone_call.dial_finished', dial_status: 'busy', answered_by: null,
    session: { id: r.body.session_id, agent_id: agentId, source: 'phone', direction: 'outbound', status: 'pending', dial_status: 'busy', answered_by: null, batch_call_id: null, conversation_started_at: null, conversation_ended_at: null, duration_seconds: null, end_user_id: '', metadata: { lead: 42 } },
  });
  const req = hook.requests.find((x) => JSON.parse(x.body).session?.id === r.body.session_id)!;
  t.ok(verifySignature(SECRET, String(req.headers['x-service-webhook-signature']), req.body), 'signed like the post-call events');
  t.equal(req.url, '/calls', 'sent to the version\'s webhooks.post_call endpoint');
  await sleep(1500);
  t.same(eventsFor(r.body.session_id).map((e) => e.event), ['phone_call.dial_finished'], 'nothing else: an unanswered call is not billed or analyzed');
  t.match(await session(r.body.session_id), { status: 'completed', ended_reason: 'dial_busy', dial_status: 'busy' });
  const rows = await app.db.sql<{ event: string; seq: number; status: string }[]>`select event, seq, status from webhook_deliveries where session_id = ${r.body.session_id}`;
  t.same(rows, [{ event: 'phone_call.dial_finished', seq: 0, status: 'delivered' }], 'queued durably, like the post-call events');
});

t.test('a machine answers (the default outbound settings hang up): dial_finished (answered, voicemail) only', async (t) => {
  const to = '+13125554103';
  const line = await phone(app, { line: to });
  t.teardown(() => line.close());
  await line.event('line.ready');
  const r = await app.req('POST', '/v1/agent/phone-calls', { agent_id: agentId, phone_number_id: numberId, to_number: to });
  await line.event('call.ringing');
  line.send({ type: 'answer', as: 'voicemail' });
  await line.event('call.ended');
  const [ev] = await waitEvents(r.body.session_id, 1);
  t.match(ev, { event: 'phone_call.dial_finished', dial_status: 'answered', answered_by: 'voicemail' });
  await sleep(1500);
  t.same(eventsFor(r.body.session_id).map((e) => e.event), ['phone_call.dial_finished'], 'no call.ended: nothing was said, nothing billed');
  t.match(await session(r.body.session_id), { status: 'completed', ended_reason: 'voicemail' });
});

t.test('an answered call: dial_finished (answered, human) first, then call.ended', async (t) => {
  const to = '+13125554102';
  const line = await phone(app, { line: to });
  t.teardown(() => line.close());
  await line.event('line.ready');
  const r = await app.req('POST', '/v1/agent/phone-calls', { agent_id: agentId, phone_number_id: numberId, to_number: to });
  await line.event('call.ringing');
  line.send({ type: 'answer' });
  await line.event('call.started');
  const [first] = await waitEvents(r.body.session_id, 1);
  t.match(first, { event: 'phone_call.dial_finished', dial_status: 'answered', answered_by: 'human', session: { status: 'pending', dial_status: 'answered', conversation_ended_at: null, duration_seconds: null } });
  await line.silence(500);
  t.equal((await app.req('POST', `/v1/agent/sessions/${r.body.session_id}/end`)).status, 204);
  await line.event('call.ended');
  const all = await waitEvents(r.body.session_id, 2);
  t.same(all.map((e) => e.event).slice(0, 2), ['phone_call.dial_finished', 'call.ended'], 'dial_finished → call.ended');
  t.equal(all.filter((e) => e.event === 'phone_call.dial_finished').length, 1, 'once per call');
});
