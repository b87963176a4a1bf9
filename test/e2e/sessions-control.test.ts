import t from 'tap';
import WebSocket from 'ws';
import { start, ClientError } from '../../src/client/index.ts';
import { startTestServer } from '../helpers/server.ts';
import { agentWith, connect, createSession, rawSocket, sessionRecord, sleep, useTestClock } from './session-helpers.ts';

const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'fast' } });
t.teardown(() => app.close());

const record = (id: string) => sessionRecord(app, id);
const raw = rawSocket;

t.test('an unknown transport fails with unsupported_transport and never falls back', async (t) => {
  await t.rejects(start({ session_id: 's', transport: 'carrier-pigeon', token: 'x', websocket_url: 'ws://127.0.0.1:1/' }), { code: 'unsupported_transport' });
});

t.test('the token is single use: a second connect is refused with 4401', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  t.equal(session.transport, 'websocket');
  t.match(session.websocket_url, /^ws:\/\/.+\/v1\/agent\/sessions\/connect$/);
  const caller = await connect(session);
  const second = start(session);
  await t.rejects(second, { code: 'unauthorized' });
  await t.rejects(start({ ...session, token: 'made-up' }), ClientError);
  const r = raw(`${session.websocket_url}?token=${session.token}`);
  t.same(await r.closed, { code: 4401, reason: 'Invalid or expired token' });
  await caller.convo.hangup();
});

t.test('hang_up_call ends the session', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' }, tools: { system_tools: { hang_up_call: true } }, conversation: { eagerness: 'eager' } });
  const session = await createSession(app, agent);
  const caller = await connect(session);
  const started: string[] = [];
  caller.convo.on('toolCallStarted', (e) => started.push(e.toolName));
  caller.convo.on('toolCallCompleted', (e) => started.push(`${e.toolName} done`));
  await caller.speak('Thanks, please hang up call now.');
  const end = await caller.convo.ended;
  t.equal(end.reason, 'agent_hangup');
  t.same(started, ['hang_up_call', 'hang_up_call done']);
  const rec = await record(session.session_id);
  t.equal(rec.status, 'completed');
  t.equal(rec.ended_reason, 'agent_hangup');
  t.same(rec.items.map((i: any) => i.type), ['message', 'tool_call', 'tool_result']);
  t.match(rec.items[1], { tool_name: 'hang_up_call', tool_source: 'builtin' });
});

t.test('max_duration_seconds ends the session (test clock)', async (t) => {
  const runtime = app.runtime;
  const clock = useTestClock(t, app);
  const agent = await agentWith(app, { prompt: { first_message_mode: 'fixed', first_message: 'Hi.' }, conversation: { max_duration_seconds: 60 } });
  const session = await createSession(app, agent);
  t.equal(session.max_duration_seconds, 60);
  const caller = await connect(session);
  await caller.waitFor(() => caller.finals('agent').length === 1, 10_000, 'the opener');
  clock.advance(59_000);
  await sleep(100);
  t.equal(runtime.supervisor.get(session.session_id) !== undefined, true, 'still live at 59 s');
  clock.advance(1_000);
  t.equal((await caller.convo.ended).reason, 'max_duration');
  t.match(await record(session.session_id), { status: 'completed', ended_reason: 'max_duration' });
});

t.test('the end endpoint ends a live session', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  const caller = await connect(session);
  const r = await app.req('POST', `/v1/agent/sessions/${session.session_id}/end`);
  t.equal(r.status, 204);
  t.equal((await caller.convo.ended).reason, 'ended_by_api');
  t.match(await record(session.session_id), { status: 'completed', ended_reason: 'ended_by_api' });
});

t.test('a dropped socket keeps the session; the client reconnects with session_id and resume, no new token', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  const first = raw(`${session.websocket_url}?token=${session.token}`);
  const hello = await first.started();
  t.match(hello, { sessionId: session.session_id, resumed: false, resume: String, sampleRateHz: 16000 });
  first.ws.terminate();
  await first.closed;
  await sleep(200);
  const bad = raw(`${session.websocket_url}?session_id=${session.session_id}&resume=wrong`);
  t.equal((await bad.closed).code, 4401);
  const second = raw(`${session.websocket_url}?session_id=${session.session_id}&resume=${hello.resume}`);
  t.match(await second.started(), { sessionId: session.session_id, resumed: true });
  second.ws.send(JSON.stringify({ topic: 'client-event', type: 'user.message', text: 'still here', audio: false }));
  for (let i = 0; i < 200 && !second.messages.some((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final); i++) await sleep(20);
  t.match(second.messages.find((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final), { text: 'You said: still here' });
  second.ws.send(JSON.stringify({ type: 'user.hangup' }));
  t.match(await second.closed, { code: 1000, reason: 'user_hangup' });
  t.match(await record(session.session_id), { status: 'completed', ended_reason: 'user_hangup' });
});

t.test('the SDK reconnects by itself after a drop', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  const sockets: WebSocket[] = [];
  class Tracked extends WebSocket {
    constructor(url: string) {
      super(url);
      sockets.push(this);
    }
  }
  const caller = await connect(session, { WebSocket: Tracked as never });
  let reconnected = false;
  caller.convo.on('reconnected', () => (reconnected = true));
  sockets[0].terminate();
  await caller.waitFor(() => reconnected, 10_000, 'reconnect');
  caller.convo.sendUserMessage('after the drop', { audio: false });
  await caller.waitFor(() => caller.finals('agent').length === 1, 10_000, 'the reply');
  t.same(caller.finals('agent'), ['You said: after the drop']);
  t.equal(sockets.length, 2);
  await caller.convo.hangup();
});

t.test('the record shows the transcript, the overrides in effect and the metadata verbatim', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off', system_prompt: 'You help {{name}}.' } }, { overrides_allowed: ['first_message', 'language'] });
  const metadata = { z: 1, a: { nested: [true, null, 'x'] }, 'key with space': '✓' };
  const session = await createSession(app, agent, { overrides: { first_message: 'Hi {{name}}, this is {{system.channel}}.' }, dynamic_variables: { name: 'Ada' }, metadata, end_user_id: 'user-7' });
  const caller = await connect(session);
  await caller.waitFor(() => caller.finals('agent').length === 1, 10_000, 'the opener');
  await caller.waitFor(() => caller.convo.state === 'idle', 5000, 'idle');
  t.equal(caller.heard(), 'Hi Ada, this is web_voice.', 'the first_message override, rendered, spoken in off mode');
  caller.convo.sendUserMessage('My question', { audio: false });
  await caller.waitFor(() => caller.finals('agent').length === 2, 10_000, 'the reply');
  await caller.convo.hangup();
  const rec = await record(session.session_id);
  t.same(rec.overrides, { first_message: 'Hi {{name}}, this is {{system.channel}}.' });
  t.same(rec.metadata, metadata);
  t.equal(JSON.stringify(rec.metadata), JSON.stringify(metadata), 'key order kept');
  t.equal(rec.end_user_id, 'user-7');
  t.same(rec.items.map((i: any) => [i.type, i.role, i.content]), [
    ['message', 'assistant', 'Hi Ada, this is web_voice.'],
    ['message', 'user', 'My question'],
    ['message', 'assistant', 'You said: My question'],
  ]);
});
