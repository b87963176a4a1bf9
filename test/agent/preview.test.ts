// Builder preview calls (docs/api/preview.md; D-PREV-1):
// a session of the draft frozen at creation, capped at min(600 s, max_duration_seconds), never
// listed, no webhooks, no stored transcript, analysis readable only through the preview read.
import t from 'tap';
import { openApiValidator } from '../helpers/openapi.ts';
import { startTestServer } from '../helpers/server.ts';
import { connect, sleep, useTestClock } from '../e2e/session-helpers.ts';
import { allowWrites, startReceiver } from '../webhooks/helpers.ts';
import { credit, makeAgent, PRICE } from './sessions-helpers.ts';

const receiver = await startReceiver();
const allow = `127.0.0.1:${receiver.port}`;
allowWrites(t, allow);
const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' }, config: { outboundAllow: [allow] } });
t.teardown(async () => {
  await app.close();
  await receiver.close();
});
const [team] = await app.db.sql<{ id: string }[]>`select id from teams limit 1`;
const teamId = team!.id;

const fixed = (text: string) => ({ prompt: { first_message_mode: 'fixed', first_message: text } });

async function preview(agentId: string, body?: unknown) {
  return app.req('POST', `/v1/agent/agents/${agentId}/preview`, body);
}

/** Polls the preview read until `pred` holds. */
async function previewUntil(agentId: string, sessionId: string, pred: (b: any) => boolean, what: string) {
  const until = Date.now() + 20_000;
  for (;;) {
    const r = await app.req('GET', `/v1/agent/agents/${agentId}/preview/${sessionId}`);
    if (r.status !== 200) throw new Error(`preview read: ${r.status} ${r.text}`);
    if (pred(r.body)) return r.body;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}: ${r.text}`);
    await sleep(50);
  }
}

t.test('a preview runs the draft as it was at creation: not the published version, not a later edit', async (t) => {
  const agentId = await makeAgent(app, { config: fixed('Published hello.') });
  t.equal((await app.req('PATCH', `/v1/agent/agents/${agentId}/config`, fixed('Draft hello.'))).status, 200);
  const created = await preview(agentId);
  t.equal(created.status, 200);
  t.match(created.body, { session_id: /^sess_/, transport: 'websocket', websocket_url: /\/v1\/agent\/sessions\/connect$/, token: String, expires_at: String }, 'the shape of POST /v1/agent/sessions');
  const draftHash = (await app.req('GET', `/v1/agent/agents/${agentId}/config`)).body.config_hash;

  // Edited after creation: the preview must not pick this up.
  t.equal((await app.req('PATCH', `/v1/agent/agents/${agentId}/config`, fixed('Later edit.'))).status, 200);

  const caller = await connect(created.body);
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  await caller.waitFor(() => caller.convo.state === 'idle', 5000, 'idle');
  t.equal(caller.heard(), 'Draft hello.', 'the draft at creation speaks');
  await caller.convo.hangup();
  const st = await previewUntil(agentId, created.body.session_id, (b) => b.status === 'completed', 'the end');
  t.equal(st.config_hash, draftHash, 'the hash of the draft it ran');
  t.equal(st.ended_reason, 'user_hangup');
});

t.test('a never-published agent can be previewed; system.channel is web_voice', async (t) => {
  const agentId = await makeAgent(app, { config: fixed('Unpublished on {{system.channel}}.'), publish: false });
  t.equal((await app.req('POST', '/v1/agent/sessions', { agent_id: agentId })).status, 409, 'no session without a version');
  const created = await preview(agentId);
  t.equal(created.status, 200);
  const caller = await connect(created.body);
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  t.same(caller.finals('agent'), ['Unpublished on web_voice.'], 'previews count as web_voice');
  await caller.convo.hangup();
});

t.test('preview length: capped at 600 s or the configured duration, whichever is lower', async (t) => {
  const long = await makeAgent(app, { config: { conversation: { max_duration_seconds: 1200 } }, publish: false });
  const short = await makeAgent(app, { config: { conversation: { max_duration_seconds: 300 } }, publish: false });
  const a = await preview(long);
  const b = await preview(short);
  t.equal(a.body.max_duration_seconds, 600, 'max_duration_seconds 1200 → 600');
  t.equal(b.body.max_duration_seconds, 300, 'max_duration_seconds 300 → 300');
  t.equal((await app.req('GET', `/v1/agent/agents/${long}/preview/${a.body.session_id}`)).body.max_duration_seconds, 600);
  for (const [agent, s] of [[long, a], [short, b]] as const) t.equal((await app.req('POST', `/v1/agent/agents/${agent}/preview/${s.body.session_id}/end`)).status, 204);
});

t.test('a preview of a 1200 s draft ends at 600 s in the runtime (test clock)', async (t) => {
  const runtime = app.runtime;
  const clock = useTestClock(t, app);
  const agentId = await makeAgent(app, { config: { ...fixed('Hi.'), conversation: { max_duration_seconds: 1200 } }, publish: false });
  const created = await preview(agentId);
  const caller = await connect(created.body);
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  clock.advance(599_000);
  await sleep(100);
  t.ok(runtime.supervisor.get(created.body.session_id), 'still live at 599 s');
  clock.advance(1_000);
  t.equal((await caller.convo.ended).reason, 'max_duration', 'ended by the 600 s cap');
  t.match(await previewUntil(agentId, created.body.session_id, (b) => b.status === 'completed', 'the end'), { ended_reason: 'max_duration' });
});

t.test('the preview end endpoint ends a live preview', async (t) => {
  const agentId = await makeAgent(app, { config: fixed('Bye soon.'), publish: false });
  const created = await preview(agentId);
  const caller = await connect(created.body);
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  t.equal((await app.req('POST', `/v1/agent/agents/${agentId}/preview/${created.body.session_id}/end`)).status, 204);
  t.equal((await caller.convo.ended).reason, 'ended_by_api');
  t.match(await previewUntil(agentId, created.body.session_id, (b) => b.status === 'completed', 'the end'), { ended_reason: 'ended_by_api' });
  t.equal((await app.req('POST', `/v1/agent/agents/${agentId}/preview/${created.body.session_id}/end`)).status, 204, 'again: 204');
});

t.test('the preview talks over the websocket; its analysis is readable through the preview read only; no transcript is kept; billed like a session', async (t) => {
  const agentId = await makeAgent(app, {
    config: { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager' }, analysis: { summary: { enabled: true, language: 'en' }, data_fields: [], criteria: [] } },
    publish: false,
  });
  const before = await credit(app, teamId);
  const created = await preview(agentId, { dynamic_variables: { name: 'Ada' } });
  t.equal(created.status, 200);
  t.equal(await credit(app, teamId), before - PRICE, 'the up-front hold of a session');
  const caller = await connect(created.body);
  await caller.speak('What is the weather?');
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the answer');
  await caller.waitFor(() => caller.convo.state === 'idle', 5000, 'idle');
  t.equal(caller.heard(), 'You said: What is the weather?', 'a spoken answer (scripted model)');
  await caller.convo.hangup();

  const st = await previewUntil(agentId, created.body.session_id, (b) => b.analysis !== null, 'the analysis');
  t.equal(st.status, 'completed');
  t.equal(st.analysis_status, 'completed');
  t.equal(st.analysis.status, 'completed');
  t.match(st.analysis.summary, /What is the weather\?/, 'the summary of what was said');
  t.type(st.analysis.finished_at, 'string');
  t.equal(await credit(app, teamId), before - PRICE, 'settled: one started minute');
  const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);
  t.same(oas.check('GET', '/v1/agent/agents/{agent_id}/preview/{session_id}', 200, st), [], 'the read matches the OpenAPI document');
  t.same(oas.check('POST', '/v1/agent/agents/{agent_id}/preview', 200, created.body), [], 'the creation matches the OpenAPI document');

  t.equal((await app.req('GET', `/v1/agent/sessions/${created.body.session_id}`)).status, 404, 'not readable as a session');
  const [{ n }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from session_items where session_id = ${created.body.session_id}`;
  t.equal(n, 0, 'no stored transcript once analysed');
});

t.test('previews never appear in GET /v1/agent/sessions, whatever the filter', async (t) => {
  const agentId = await makeAgent(app, { config: fixed('Listed?') });
  const normal = await app.req('POST', '/v1/agent/sessions', { agent_id: agentId });
  const pv = await preview(agentId);
  t.equal(pv.status, 200);
  const live = await connect(pv.body);
  await live.waitFor(() => live.finals('agent').length === 1, 15_000, 'the opener');
  const ids = async (q: string) => (await app.req('GET', `/v1/agent/sessions?${q}`)).body.sessions.map((s: any) => s.session_id);
  const all = 'status=pending,active,completed,failed';
  t.ok((await ids(`agent_id=${agentId}&${all}`)).includes(normal.body.session_id), 'the normal session is listed');
  t.notOk((await ids(`agent_id=${agentId}&${all}`)).includes(pv.body.session_id), 'not while active');
  await live.convo.hangup();
  await previewUntil(agentId, pv.body.session_id, (b) => b.status === 'completed', 'the end');
  t.notOk((await ids(`agent_id=${agentId}&${all}`)).includes(pv.body.session_id), 'not once ended');
  t.notOk((await ids(all)).includes(pv.body.session_id), 'not without a filter');
  t.equal((await app.req('POST', `/v1/agent/sessions/${pv.body.session_id}/end`)).status, 404, 'not a session for the session API');
  t.equal((await app.req('GET', `/v1/agent/agents/${agentId}/preview/${normal.body.session_id}`)).status, 404, 'the preview read shows previews only');
});

t.test('preview calls send no webhooks (call.ended, call.analyzed); a real session of the same agent does', async (t) => {
  const config = { ...fixed('Hooked.'), webhooks: { post_call: [{ url: `${receiver.url}/hook` }] } };
  const agentId = await makeAgent(app, { config });
  const pv = await preview(agentId);
  const caller = await connect(pv.body);
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  caller.convo.sendUserMessage('hello preview', { audio: false });
  await caller.waitFor(() => caller.finals('agent').length === 2, 15_000, 'the reply');
  await caller.convo.hangup();
  await previewUntil(agentId, pv.body.session_id, (b) => b.analysis !== null, 'the analysis');

  // The control: a real session of the same agent, joined and ended.
  const real = await app.req('POST', '/v1/agent/sessions', { agent_id: agentId });
  const c2 = await connect(real.body);
  await c2.waitFor(() => c2.finals('agent').length === 1, 15_000, 'the opener');
  c2.convo.sendUserMessage('hello real', { audio: false });
  await c2.waitFor(() => c2.finals('agent').length === 2, 15_000, 'the reply');
  await c2.convo.hangup();
  const got = await receiver.waitFor(2);
  t.same(got.map((r) => [JSON.parse(r.body).event, JSON.parse(r.body).session.id]), [['call.ended', real.body.session_id], ['call.analyzed', real.body.session_id]]);
  t.notOk(receiver.requests.some((r) => r.body.includes(pv.body.session_id)), 'nothing about the preview reached the endpoint');
  const [{ n }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where session_id = ${pv.body.session_id}`;
  t.equal(n, 0, 'no delivery was queued');
});

t.test('preview errors: another team\'s agent 404, archived 409, out of credit 402 with nothing charged', async (t) => {
  const other = await app.newTeam();
  const agentId = await makeAgent(app, { publish: false });
  t.equal((await app.req('POST', `/v1/agent/agents/${agentId}/preview`, undefined, other.auth)).status, 404);
  t.equal((await app.req('POST', `/v1/agent/agents/nope/preview`)).status, 404);
  t.equal((await app.req('POST', `/v1/agent/agents/${agentId}/preview`, { overrides: { voice_id: 'x' } })).status, 422, 'no overrides: edit the draft');

  const poor = await app.newTeam({ creditMicros: 0n });
  const poorAgent = await makeAgent(app, { publish: false, auth: poor.auth });
  const r = await app.req('POST', `/v1/agent/agents/${poorAgent}/preview`, undefined, poor.auth);
  t.equal(r.status, 402);
  t.equal(r.body.message, 'Out of API credit');
  t.equal(await credit(app, poor.teamId), 0n);

  t.equal((await app.req('PATCH', `/v1/agent/agents/${agentId}`, { status: 'archived' })).status, 200);
  t.equal((await app.req('POST', `/v1/agent/agents/${agentId}/preview`)).status, 409);
});
