import { createHmac } from 'node:crypto';
import t from 'tap';
import { WebhookWorker } from '../../src/webhooks/index.ts';
import { openApiValidator } from '../helpers/openapi.ts';
import { startTestServer } from '../helpers/server.ts';
import { allowWrites, endedSession, startReceiver, waitForLog, type Received } from './helpers.ts';

/** The receiver's own check, independent of the platform's signing code. */
function checkSignature(r: Received, secret: string): { ok: boolean; t: number } {
  const header = String(r.headers['x-service-webhook-signature'] ?? '');
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!m) return { ok: false, t: 0 };
  const expected = createHmac('sha256', secret).update(`${m[1]}.${r.body}`).digest('hex');
  return { ok: expected === m[2] && Math.abs(Date.now() / 1000 - Number(m[1])) < 300, t: Number(m[1]) };
}

const a = await startReceiver();
const b = await startReceiver();
allowWrites(t, `127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`);
const app = await startTestServer({ config: { outboundAllow: [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`] } });
t.teardown(async () => {
  await app.close();
  await a.close();
  await b.close();
});

t.test('every endpoint gets call.ended then call.analyzed, signed when it has a secret, metadata verbatim', async (t) => {
  const metadata = { zeta: 1, alpha: { nested: [1, 'two', null, { deep: true }], 'key with spaces': 'ünïcødé' }, beta: 2.5 };
  const { agentId, sessionId } = await endedSession(app, [{ url: `${a.url}/hook`, secret: 's3cr3t-a' }, { url: `${b.url}/other` }], {
    metadata,
    end_user_id: 'user-üñ-42',
  });
  const [ea, aa] = await a.waitFor(2);
  const [eb, ab] = await b.waitFor(2);

  for (const [r, event] of [[ea, 'call.ended'], [aa, 'call.analyzed'], [eb, 'call.ended'], [ab, 'call.analyzed']] as const) {
    t.equal(r.method, 'POST');
    t.match(r.headers['content-type'], /^application\/json/);
    t.equal(JSON.parse(r.body).event, event, `${event} in order`);
  }
  t.equal(ea.url, '/hook');
  t.ok(checkSignature(ea, 's3cr3t-a').ok, 'call.ended signature verifies');
  t.ok(checkSignature(aa, 's3cr3t-a').ok, 'call.analyzed signature verifies');
  t.notOk(checkSignature(ea, 'another secret').ok, 'a different secret does not verify');
  t.equal(eb.headers['x-service-webhook-signature'], undefined, 'no secret, no signature');

  const ended = JSON.parse(ea.body);
  t.equal(ended.ended_reason, 'hangup');
  const s = ended.session;
  t.match(s, { id: sessionId, agent_id: agentId, agent_name: 'Webhook agent', status: 'completed', source: 'api_key', direction: 'inbound', end_user_id: 'user-üñ-42', branch_id: null, batch_call_id: null, dial_status: null, answered_by: null });
  t.match(s.config_hash, /\S+/);
  t.match(s.conversation_started_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.match(s.conversation_ended_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  t.type(s.duration_seconds, 'number');
  t.same(s.metadata, metadata);
  t.same(Object.keys(s.metadata), ['zeta', 'alpha', 'beta'], 'metadata key order kept');
  t.ok(ea.body.includes(JSON.stringify(metadata)), 'metadata text embedded as stored');
  t.notOk('transcript' in ended || 'items' in s, 'no transcript');
  const analyzed = JSON.parse(aa.body);
  t.same(analyzed.analysis, { status: 'skipped', summary: null, data: [], criteria_results: [] });
  t.equal(analyzed.error, null);
  t.equal(analyzed.finished_at, s.conversation_ended_at);
  t.same(analyzed.session, s);
  t.equal(eb.body, ea.body, 'every endpoint gets the same bytes');

  const log = await waitForLog(app, sessionId, (d) => d.length === 4 && d.every((x) => x.status === 'delivered'));
  t.same(log.map((d) => [d.endpoint_index, d.event, d.status, d.attempts, d.last_status_code]), [
    [0, 'call.ended', 'delivered', 1, 200],
    [0, 'call.analyzed', 'delivered', 1, 200],
    [1, 'call.ended', 'delivered', 1, 200],
    [1, 'call.analyzed', 'delivered', 1, 200],
  ]);
  const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);
  t.same(oas.check('GET', '/v1/agent/sessions/{session_id}/webhook-deliveries', 200, { deliveries: log }), [], 'log matches /openapi.json');
  t.equal(log[0].url, `${a.url}/hook`);
  t.equal(log[0].next_attempt_at, null);
  t.match(log[0].delivered_at, String);
});

t.test('retries after the receiver fails twice; every attempt has the same body and its own signature', async (t) => {
  a.requests.length = 0;
  a.script.push(500, 503);
  const { sessionId } = await endedSession(app, [{ url: `${a.url}/flaky`, secret: 'k' }]);
  const mid = await waitForLog(app, sessionId, (d) => d[0]?.attempts === 1 && d[0].status === 'pending');
  t.match(mid[0], { status: 'pending', last_status_code: 500, last_error: 'Endpoint answered 500', next_attempt_at: String, max_attempts: 3 });
  const got = await a.waitFor(4);
  t.same(got.map((r) => JSON.parse(r.body).event), ['call.ended', 'call.ended', 'call.ended', 'call.analyzed']);
  t.equal(new Set(got.slice(0, 3).map((r) => r.body)).size, 1, 'retries are byte-identical');
  const stamps = got.slice(0, 3).map((r) => checkSignature(r, 'k'));
  t.ok(stamps.every((s) => s.ok), 'each attempt verifies');
  t.ok(stamps[2]!.t > stamps[0]!.t, 'a retry is signed again with a newer t');
  const log = await waitForLog(app, sessionId, (d) => d.length === 2 && d.every((x) => x.status === 'delivered'));
  t.match(log[0], { event: 'call.ended', attempts: 3, status: 'delivered', last_status_code: 200, last_error: null });
  t.match(log[1], { event: 'call.analyzed', attempts: 1, status: 'delivered' });
});

t.test('three failures drop the delivery; redeliver sends it again', async (t) => {
  b.requests.length = 0;
  b.script.push(500, 500, 500);
  const { sessionId } = await endedSession(app, [{ url: `${b.url}/down` }]);
  const log = await waitForLog(app, sessionId, (d) => d[0]?.status === 'failed' && d[1]?.status === 'delivered');
  t.match(log[0], { event: 'call.ended', status: 'failed', attempts: 3, last_status_code: 500, last_error: 'Endpoint answered 500', next_attempt_at: null });
  t.same(b.requests.map((r) => JSON.parse(r.body).event), ['call.ended', 'call.ended', 'call.ended', 'call.analyzed'], 'analyzed goes once ended is settled');

  const re = await app.req('POST', `/v1/agent/sessions/${sessionId}/webhook-deliveries/${log[0].delivery_id}/redeliver`);
  t.equal(re.status, 202);
  t.match(re.body, { delivery_id: log[0].delivery_id, status: 'pending', attempts: 0 });
  const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);
  t.same(oas.check('POST', '/v1/agent/sessions/{session_id}/webhook-deliveries/{delivery_id}/redeliver', 202, re.body), [], 'matches /openapi.json');
  const again = await b.waitFor(5);
  t.equal(again[4]!.body, again[0]!.body, 'the same body');
  const after = await waitForLog(app, sessionId, (d) => d[0]?.status === 'delivered');
  t.match(after[0], { status: 'delivered', attempts: 1, last_status_code: 200, last_error: null });

  t.equal((await app.req('POST', `/v1/agent/sessions/${sessionId}/webhook-deliveries/whd_missing/redeliver`)).status, 404);
  const other = await app.newTeam();
  t.equal((await app.req('GET', `/v1/agent/sessions/${sessionId}/webhook-deliveries`, undefined, other.auth)).status, 404, 'another team sees 404');
  t.equal((await app.req('POST', `/v1/agent/sessions/${sessionId}/webhook-deliveries/${log[0].delivery_id}/redeliver`, undefined, other.auth)).status, 404);
});

t.test('a session nobody joined sends nothing; an endpointless version queues nothing', async (t) => {
  const created = await app.req('POST', '/v1/agent/agents', { name: 'Quiet', config: { webhooks: { post_call: [{ url: `${a.url}/never` }] } } });
  await app.req('POST', `/v1/agent/agents/${created.body.agent_id}/publish`);
  const s = await app.req('POST', '/v1/agent/sessions', { agent_id: created.body.agent_id });
  t.equal((await app.req('POST', `/v1/agent/sessions/${s.body.session_id}/end`)).status, 204);
  const log = await app.req('GET', `/v1/agent/sessions/${s.body.session_id}/webhook-deliveries`);
  t.same(log.body, { deliveries: [] });
  const { sessionId } = await endedSession(app, []);
  t.same((await app.req('GET', `/v1/agent/sessions/${sessionId}/webhook-deliveries`)).body, { deliveries: [] });
});

t.test('a claim whose node died (lease expired) is taken over and delivered', async (t) => {
  a.requests.length = 0;
  const { sessionId } = await endedSession(app, [{ url: `${a.url}/lease` }]);
  const done = await waitForLog(app, sessionId, (d) => d.length === 2 && d.every((x) => x.status === 'delivered'));
  // What a node leaves behind when it dies mid-attempt: a claim nobody will finish.
  await app.db.sql`update webhook_deliveries set status = 'delivering', claim_id = 'wk_dead', attempts = 1,
    lease_until = clock_timestamp() - interval '1 second' where id = ${done[0].delivery_id}`;
  const log = await waitForLog(app, sessionId, (d) => d[0].status === 'delivered' && d[0].attempts === 2);
  t.match(log[0], { event: 'call.ended', status: 'delivered', attempts: 2 });
  t.equal((await a.waitFor(3))[2]!.headers['x-service-webhook-id'], done[0].delivery_id, 'sent again: at least once');
});

// Nodes share a real Postgres. The embedded store is one node by construction: PGlite serves
// every pooled connection from one backend, so row locks cannot separate two workers there.
const multiNode = process.env.DATABASE_URL ? {} : { skip: 'needs DATABASE_URL (several nodes need a real Postgres)' };
t.test('two workers on one queue (two nodes) send each delivery once', multiNode, async (t) => {
  const other = new WebhookWorker({ sql: app.db.sql, box: app.box, log: app.log, allow: [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`], pollMs: 10 });
  other.start();
  t.teardown(() => other.close());
  a.requests.length = 0;
  b.requests.length = 0;
  const sessions = [];
  for (let i = 0; i < 6; i++) sessions.push((await endedSession(app, [{ url: `${a.url}/n` }, { url: `${b.url}/n` }])).sessionId);
  for (const id of sessions) await waitForLog(app, id, (d) => d.length === 4 && d.every((x) => x.status === 'delivered'));
  for (const rec of [a, b]) {
    t.equal(rec.requests.length, 12, 'one request per session and event');
    t.equal(new Set(rec.requests.map((r) => r.headers['x-service-webhook-id'])).size, 12, 'no delivery sent twice');
    for (const id of sessions) {
      const events = rec.requests.map((r) => JSON.parse(r.body)).filter((p) => p.session.id === id).map((p) => p.event);
      t.same(events, ['call.ended', 'call.analyzed'], 'in order per endpoint and session');
    }
  }
});
