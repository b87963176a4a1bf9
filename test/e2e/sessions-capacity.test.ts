import t from 'tap';
import WebSocket from 'ws';
import { startTestServer } from '../helpers/server.ts';
import { agentWith, connect, createSession, sleep } from './session-helpers.ts';

const app = await startTestServer({ backend: 'synthetic', config: { maxSessions: 1 } });
t.teardown(() => app.close());

t.test('past PARLEY_MAX_SESSIONS live sessions, creation answers 503; an ended session frees its place', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const first = await connect(await createSession(app, agent));
  const refused = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
  t.equal(refused.status, 503);
  t.same(refused.body, { status: 503, message: 'Session capacity reached on this node' });
  await first.convo.hangup();
  // The place frees once the node has ended the session, shortly after the hang-up: ask until
  // it has (bounded by tries), and only 503 meanwhile.
  let again = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
  const meanwhile = new Set<number>();
  for (let i = 0; i < 100 && again.status !== 200; i++) {
    meanwhile.add(again.status);
    await sleep(50);
    again = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
  }
  t.equal(again.status, 200);
  t.ok([...meanwhile].every((s) => s === 503), `refused only for capacity meanwhile (${[...meanwhile]})`);
});

t.test('malformed frames and unknown client events are ignored', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  await sleep(300);
  const session = await createSession(app, agent);
  const ws = new WebSocket(`${session.websocket_url}?token=${session.token}`);
  const messages: any[] = [];
  ws.on('message', (d, bin) => { if (!bin) messages.push(JSON.parse(d.toString())); });
  await new Promise((r) => ws.once('open', r));
  for (let i = 0; i < 200 && !messages.some((m) => m.type === 'session.started'); i++) await sleep(20);
  ws.send('{not json');
  ws.send(JSON.stringify({ type: 'user.dance' }));
  ws.send(JSON.stringify({ type: 'client_tool.result', callId: 'unknown', result: 1 }));
  ws.send(JSON.stringify({ type: 'user.message', text: 'still fine', audio: false }));
  for (let i = 0; i < 200 && !messages.some((m) => m.role === 'agent' && m.final); i++) await sleep(20);
  t.match(messages.find((m) => m.role === 'agent' && m.final), { text: 'You said: still fine' });
  t.notOk(messages.some((m) => m.topic === 'agent-event' && m.type === 'error'));
  const closed = new Promise<number>((r) => ws.on('close', (c) => r(c)));
  ws.close(1000);
  t.equal(await closed, 1000);
});
