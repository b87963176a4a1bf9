// docs/api/sessions.md, "States": the rows and conditions the other end-to-end
// files do not already show (docs/spec-coverage.md, "Session state table", maps every row).
import t from 'tap';
import { RECONNECT_GRACE_MS } from '../../src/sessions/runtime.ts';
import { startTestServer } from '../helpers/server.ts';
import { agentWith, connect, createSession, rawSocket, sessionRecord, sleep, useTestClock } from './session-helpers.ts';

const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'fast' } });
t.teardown(() => app.close());

const record = (id: string, until: (b: any) => boolean) => sessionRecord(app, id, until);
const raw = rawSocket;
const ended = (b: any) => b.status === 'completed' || b.status === 'failed';

t.test('token issued → connected only before expires_at: a token presented after it is refused (4401) and the session never starts', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  const wait = Date.parse(session.expires_at) - Date.now() + 500;
  t.ok(wait > 55_000 && wait < 61_000, 'expires_at is a minute away');
  await sleep(wait);
  const late = raw(`${session.websocket_url}?token=${session.token}`);
  t.same(await late.closed, { code: 4401, reason: 'Invalid or expired token' });
  t.notOk(late.messages.some((m) => m.type === 'session.started'));
  const rec = (await app.req('GET', `/v1/agent/sessions/${session.session_id}`)).body;
  t.notOk(['active', 'completed', 'failed'].includes(rec.status), `never connected (status ${rec.status})`);
});

t.test('connected → user disconnects: closing the socket normally ends the session (user_hangup)', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  const c = raw(`${session.websocket_url}?token=${session.token}`);
  t.ok(await c.started());
  c.ws.close(1000);
  await c.closed;
  t.match(await record(session.session_id, ended), { status: 'completed', ended_reason: 'user_hangup' });
});

t.test('connected → network drop: the session waits for the client; if it never comes back the session ends after the grace period (connection_lost)', async (t) => {
  const clock = useTestClock(t, app);
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  const c = raw(`${session.websocket_url}?token=${session.token}`);
  t.ok(await c.started());
  c.ws.terminate();
  await c.closed;
  await sleep(200);
  clock.advance(RECONNECT_GRACE_MS - 1_000);
  await sleep(200);
  t.equal((await app.req('GET', `/v1/agent/sessions/${session.session_id}`)).body.status, 'active', 'still live within the grace period');
  clock.advance(1_000);
  t.match(await record(session.session_id, ended), { status: 'completed', ended_reason: 'connection_lost' });
});

t.test('connected → agent hangs up only with hang_up_call enabled: without it the same request gets an answer and the call goes on', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager' } });
  const session = await createSession(app, agent);
  const caller = await connect(session);
  const tools: string[] = [];
  caller.convo.on('toolCallStarted', (e) => tools.push(e.toolName));
  await caller.speak('Thanks, please hang up call now.');
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the answer');
  t.same(caller.finals('agent'), ['You said: Thanks, please hang up call now.']);
  t.same(tools, [], 'no tool was offered to the model');
  t.equal((await app.req('GET', `/v1/agent/sessions/${session.session_id}`)).body.status, 'active');
  await caller.convo.hangup();
});

t.test('ended: the token is spent and a new conversation needs a new session', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  // Ended before anyone joined (the end endpoint): its unused token is refused.
  const unused = await createSession(app, agent);
  t.equal((await app.req('POST', `/v1/agent/sessions/${unused.session_id}/end`)).status, 204);
  t.same(await raw(`${unused.websocket_url}?token=${unused.token}`).closed, { code: 4401, reason: 'Invalid or expired token' });
  // Ended after a conversation: neither its token nor its resume secret opens it again.
  const session = await createSession(app, agent);
  const c = raw(`${session.websocket_url}?token=${session.token}`);
  const hello = await c.started();
  c.ws.send(JSON.stringify({ type: 'user.hangup' }));
  await c.closed;
  await record(session.session_id, ended);
  t.same(await raw(`${session.websocket_url}?token=${session.token}`).closed, { code: 4401, reason: 'Invalid or expired token' });
  t.equal((await raw(`${session.websocket_url}?session_id=${session.session_id}&resume=${hello.resume}`).closed).code, 4404, 'nothing to resume');
  // A new session for the same agent works.
  const next = await createSession(app, agent);
  const d = raw(`${next.websocket_url}?token=${next.token}`);
  t.match(await d.started(), { sessionId: next.session_id, resumed: false });
  d.ws.send(JSON.stringify({ type: 'user.hangup' }));
  await d.closed;
});
