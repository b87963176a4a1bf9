import t from 'tap';
import { start, ClientError } from '../../src/client/index.ts';
import { FakeWebSocket } from '../fixtures/fake-websocket.ts';

const session = { session_id: 'sess_1', transport: 'websocket', token: 'tok', websocket_url: 'ws://example.test/v1/agent/sessions/connect', expires_at: '', max_duration_seconds: 60 };
const WS = FakeWebSocket as never;
const tick = () => new Promise((r) => setTimeout(r, 5));

async function connected(options: Parameters<typeof start>[1] = {}) {
  FakeWebSocket.instances = [];
  const p = start(session, { WebSocket: WS, ...options });
  await tick();
  const ws = FakeWebSocket.instances[0];
  ws.serverSend({ topic: 'session', type: 'session.started', sessionId: 'sess_1', resume: 'r1', resumed: false, sampleRateHz: 16000 });
  ws.serverSend({ topic: 'lk.agent.state', state: 'idle' }); // the platform's first state after the start
  return { convo: await p, ws };
}

t.test('unknown transports fail with unsupported_transport, never a fallback', async (t) => {
  FakeWebSocket.instances = [];
  for (const transport of ['sip', 'carrier-pigeon', undefined]) {
    await t.rejects(start({ ...session, transport } as never, { WebSocket: WS }), { name: 'ClientError', code: 'unsupported_transport' });
  }
  t.equal(FakeWebSocket.instances.length, 0, 'nothing was opened');
});

t.test('connects with the token and maps events', async (t) => {
  const { convo, ws } = await connected();
  t.equal(ws.url, 'ws://example.test/v1/agent/sessions/connect?token=tok');
  const seen: string[] = [];
  convo.on('state', (s) => seen.push(`state ${s}`));
  convo.on('transcript', (x) => seen.push(`${x.role} ${x.final ? 'final' : 'interim'} ${x.text}`));
  convo.on('toolCallStarted', (e) => seen.push(`started ${e.toolName} ${e.source} ${e.input}`));
  convo.on('toolCallCompleted', (e) => seen.push(`completed ${e.toolName} ${e.output}`));
  convo.on('toolCallFailed', (e) => seen.push(`failed ${e.toolName} ${e.error}`));
  convo.on('error', (e) => seen.push(`error ${e.code}`));
  const audio: number[] = [];
  convo.on('audio', (pcm) => audio.push(pcm.length));
  ws.serverSend({ topic: 'lk.agent.state', state: 'speaking' });
  ws.serverSend({ topic: 'lk.transcription', role: 'agent', segmentId: 'agent-0', text: 'Hi', final: false });
  ws.serverSend({ topic: 'lk.transcription', role: 'agent', segmentId: 'agent-0', text: 'Hi there', final: true });
  ws.serverSend({ topic: 'agent-event', type: 'tool.started', callId: 'c1', toolName: 'hang_up_call', toolSource: 'builtin', input: '{}' });
  ws.serverSend({ topic: 'agent-event', type: 'tool.completed', callId: 'c1', toolName: 'hang_up_call', toolSource: 'builtin', output: 'ok' });
  ws.serverSend({ topic: 'agent-event', type: 'tool.failed', callId: 'c2', toolName: 'x', toolSource: 'webhook', error: 'boom' });
  ws.serverSend({ topic: 'agent-event', type: 'error', code: 'provider_error' });
  ws.serverSend({ topic: 'something-new', whatever: 1 });
  ws.serverSend('not json');
  ws.serverSend(new Int16Array([1, 2, 3, 4]).buffer);
  t.same(seen, [
    'state speaking',
    'agent interim Hi',
    'agent final Hi there',
    'started hang_up_call builtin {}',
    'completed hang_up_call ok',
    'failed x boom',
    'error provider_error',
  ]);
  t.same(audio, [4]);
  t.equal(convo.state, 'speaking');
  convo.sendUserMessage('typed', { audio: false });
  convo.sendUserMessage('spoken');
  convo.sendActivity();
  convo.interrupt();
  convo.sendAudio(new Int16Array([5, 6]));
  t.same(ws.json(), [
    { topic: 'client-event', type: 'user.message', text: 'typed', audio: false },
    { topic: 'client-event', type: 'user.message', text: 'spoken' },
    { topic: 'client-event', type: 'user.activity' },
    { topic: 'client-event', type: 'user.interrupt' },
  ]);
  t.same([...(ws.sent.at(-1) as Uint8Array)], [5, 0, 6, 0]);
  const ending = convo.hangup();
  t.same(ws.json().at(-1), { topic: 'client-event', type: 'user.hangup' });
  ws.serverSend({ topic: 'session', type: 'session.ended', reason: 'user_hangup' });
  ws.serverClose(1000, 'user_hangup');
  t.same(await ending, { reason: 'user_hangup' });
  t.throws(() => convo.sendUserMessage('late'), { code: 'not_connected' });
});

t.test('a used token is refused as unauthorized', async (t) => {
  FakeWebSocket.instances = [];
  const p = start(session, { WebSocket: WS });
  await tick();
  FakeWebSocket.instances[0].serverClose(4401, 'Invalid or expired token');
  await t.rejects(p, { code: 'unauthorized', message: 'Invalid or expired token' });
  t.ok((await p.catch((e) => e)) instanceof ClientError);
});

t.test('after a drop it reconnects with session_id and resume, no token', async (t) => {
  const { convo, ws } = await connected();
  const events: string[] = [];
  convo.on('reconnecting', (e) => events.push(`reconnecting ${e.attempt}`));
  convo.on('reconnected', () => events.push('reconnected'));
  ws.serverClose(1006);
  for (let i = 0; i < 100 && FakeWebSocket.instances.length < 2; i++) await tick();
  const again = FakeWebSocket.instances[1];
  t.equal(again.url, 'ws://example.test/v1/agent/sessions/connect?session_id=sess_1&resume=r1');
  again.serverSend({ topic: 'session', type: 'session.started', sessionId: 'sess_1', resume: 'r1', resumed: true, sampleRateHz: 16000 });
  await tick();
  t.same(events, ['reconnecting 1', 'reconnected']);
  convo.sendUserMessage('back');
  t.same(again.json(), [{ topic: 'client-event', type: 'user.message', text: 'back' }]);
  again.serverClose(1000, 'ended');
  t.same(await convo.ended, { reason: 'ended' });
});

t.test('a session the server no longer holds ends as connection_lost', async (t) => {
  const { convo, ws } = await connected();
  ws.serverClose(1006);
  for (let i = 0; i < 100 && FakeWebSocket.instances.length < 2; i++) await tick();
  FakeWebSocket.instances[1].serverClose(4404, 'Session is not live');
  t.same(await convo.ended, { reason: 'connection_lost' });
});

t.test('the microphone hook streams frames once connected and stops at the end', async (t) => {
  let stopped = false;
  let push: (pcm: Int16Array) => void = () => {};
  const { convo, ws } = await connected({ microphone: { start: (onFrame) => { push = onFrame; return () => { stopped = true; }; } } });
  push(new Int16Array([7]));
  t.same([...(ws.sent.at(-1) as Uint8Array)], [7, 0]);
  ws.serverSend({ topic: 'session', type: 'session.ended', reason: 'max_duration' });
  t.same(await convo.ended, { reason: 'max_duration' });
  t.ok(stopped);
});

t.test('a resume answered with session.moved (close 4307) follows the owner URL at once, at most 2 hops, and stays there', async (t) => {
  const { convo, ws } = await connected();
  ws.serverClose(1006);
  for (let i = 0; i < 100 && FakeWebSocket.instances.length < 2; i++) await tick();
  const other = FakeWebSocket.instances[1];
  other.serverSend({ topic: 'session', type: 'session.moved', sessionId: 'sess_1', url: 'ws://node-a.test/v1/agent/sessions/connect' });
  other.serverClose(4307, 'Session is live on another node');
  for (let i = 0; i < 100 && FakeWebSocket.instances.length < 3; i++) await tick();
  const owner = FakeWebSocket.instances[2];
  t.equal(owner.url, 'ws://node-a.test/v1/agent/sessions/connect?session_id=sess_1&resume=r1', 'no backoff wait, same session_id and resume');
  owner.serverSend({ topic: 'session', type: 'session.started', sessionId: 'sess_1', resume: 'r1', resumed: true, sampleRateHz: 16000 });
  await tick();
  owner.serverClose(1006);
  for (let i = 0; i < 200 && FakeWebSocket.instances.length < 4; i++) await tick();
  t.equal(FakeWebSocket.instances[3].url, 'ws://node-a.test/v1/agent/sessions/connect?session_id=sess_1&resume=r1', 'later resumes go to the owner directly');
  // A chain of moves is cut after MAX_MOVES (2) hops in one attempt.
  const hops: string[] = [];
  let k = 3;
  for (let hop = 0; hop < 3; hop++) {
    const s = FakeWebSocket.instances[k];
    hops.push(new URL(s.url).host);
    s.serverSend({ topic: 'session', type: 'session.moved', sessionId: 'sess_1', url: `ws://hop-${hop}.test/v1/agent/sessions/connect` });
    s.serverClose(4307, 'Session is live on another node');
    for (let i = 0; i < 100 && FakeWebSocket.instances.length <= k + 1; i++) await tick();
    k++;
  }
  t.same(hops, ['node-a.test', 'hop-0.test', 'hop-1.test'], 'two hops followed, the third move is not');
  FakeWebSocket.instances.at(-1)!.serverClose(4404, 'Session is not live');
  await t.resolves(convo.ended);
});
