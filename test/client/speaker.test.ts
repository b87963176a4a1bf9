// What the SDK does with a `speaker` and a `microphone` around interruptions, and with typed
// messages sent before the agent is live: against a fake socket for each rule, and against a
// real platform for the order of audio and agent states that the rules rely on.
import t from 'tap';
import { decodeAudio } from '../../native/engines/synthetic/modem.ts';
import { ClientError, start, type Speaker } from '../../src/client/index.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { FakeWebSocket } from '../fixtures/fake-websocket.ts';
import { startTestServer } from '../helpers/server.ts';

const session = { session_id: 'sess_1', transport: 'websocket', token: 'tok', websocket_url: 'ws://example.test/v1/agent/sessions/connect' };
const WS = FakeWebSocket as never;
const tick = () => new Promise((r) => setTimeout(r, 5));

/** A speaker that writes down what it is asked to do. */
function recordingSpeaker() {
  const calls: string[] = [];
  const speaker: Speaker = {
    play: (pcm) => calls.push(`play ${pcm[0]}`),
    stop: () => calls.push('stop'),
    close: () => calls.push('close'),
  };
  return { speaker, calls };
}

async function joined(options: Parameters<typeof start>[1] = {}, firstState = 'idle') {
  FakeWebSocket.instances = [];
  const p = start(session, { WebSocket: WS, ...options });
  await tick();
  const ws = FakeWebSocket.instances[0];
  ws.serverSend({ topic: 'session', type: 'session.started', sessionId: 'sess_1', resume: 'r1', resumed: false, sampleRateHz: 16000 });
  const convo = await p;
  if (firstState) ws.serverSend({ topic: 'lk.agent.state', state: firstState });
  return { convo, ws };
}

const audio = (n: number) => new Int16Array([n, n]).buffer;

t.test('barge-in by speech: speaking → listening stops the speaker; a reply that ends (→ idle) plays out', async (t) => {
  const { speaker, calls } = recordingSpeaker();
  const { ws } = await joined({ speaker });
  ws.serverSend({ topic: 'lk.agent.state', state: 'speaking' });
  ws.serverSend(audio(1));
  ws.serverSend(audio(2));
  ws.serverSend({ topic: 'lk.agent.state', state: 'idle' });
  ws.serverSend({ topic: 'lk.agent.state', state: 'speaking' });
  ws.serverSend(audio(3));
  ws.serverSend({ topic: 'lk.agent.state', state: 'listening' });
  ws.serverSend({ topic: 'lk.agent.state', state: 'thinking' });
  ws.serverSend({ topic: 'lk.agent.state', state: 'speaking' });
  ws.serverSend(audio(4));
  t.same(calls, ['play 1', 'play 2', 'play 3', 'stop', 'play 4']);
  ws.serverSend({ topic: 'session', type: 'session.ended', reason: 'agent_hangup' });
  t.same(calls.at(-1), 'close', 'closed at the end');
  ws.serverSend(audio(5));
  t.same(calls.at(-1), 'close', 'nothing plays after the end');
});

t.test('interrupt() and a typed message during a reply stop the speaker and drop the rest of that reply', async (t) => {
  const { speaker, calls } = recordingSpeaker();
  const { convo, ws } = await joined({ speaker });
  ws.serverSend({ topic: 'lk.agent.state', state: 'speaking' });
  ws.serverSend(audio(1));
  convo.interrupt();
  ws.serverSend(audio(2)); // already on its way when the interrupt was sent
  ws.serverSend({ topic: 'lk.agent.state', state: 'listening' });
  ws.serverSend({ topic: 'lk.agent.state', state: 'speaking' });
  ws.serverSend(audio(3));
  convo.sendUserMessage('never mind');
  ws.serverSend(audio(4));
  ws.serverSend({ topic: 'lk.agent.state', state: 'thinking' });
  ws.serverSend({ topic: 'lk.agent.state', state: 'speaking' });
  ws.serverSend(audio(5));
  t.same(calls, ['play 1', 'stop', 'play 3', 'stop', 'play 5']);
  t.same(ws.json().map((m) => m.type), ['user.interrupt', 'user.message']);
  ws.serverSend({ topic: 'lk.agent.state', state: 'idle' });
  convo.interrupt(); // no reply in progress: nothing to stop or drop
  ws.serverSend({ topic: 'lk.agent.state', state: 'speaking' });
  ws.serverSend(audio(6));
  t.same(calls.slice(5), ['play 6']);
});

t.test('a typed message sent while the agent is initializing waits for the agent to be live', async (t) => {
  const { convo, ws } = await joined({}, '');
  ws.serverSend({ topic: 'lk.agent.state', state: 'initializing' });
  convo.sendUserMessage('early', { audio: false });
  t.same(ws.json(), [], 'held');
  ws.serverSend({ topic: 'lk.agent.state', state: 'idle' });
  t.same(ws.json(), [{ topic: 'client-event', type: 'user.message', text: 'early', audio: false }], 'sent once the agent is live');
  ws.serverClose(1000, 'ended');
  await convo.ended;
});

t.test('a microphone that cannot start hangs up and rejects with audio_unavailable', async (t) => {
  FakeWebSocket.instances = [];
  const denied = Object.assign(new Error('Permission denied'), { name: 'NotAllowedError' });
  const p = start(session, { WebSocket: WS, microphone: { start: () => Promise.reject(denied) } });
  await tick();
  const ws = FakeWebSocket.instances[0];
  ws.serverSend({ topic: 'session', type: 'session.started', sessionId: 'sess_1', resume: 'r1', resumed: false, sampleRateHz: 16000 });
  const err = await p.catch((e) => e);
  t.ok(err instanceof ClientError);
  t.equal(err.code, 'audio_unavailable');
  t.equal(err.cause, denied, 'the browser error is the cause');
  t.same(ws.json(), [{ topic: 'client-event', type: 'user.hangup' }], 'the session is hung up, not left open');
});

t.test('a real platform: a typed message over the opener stops it, and its reply plays whole', async (t) => {
  const app = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => app.close());
  const opener = 'This opener is long enough to be interrupted by a typed message well before it ends.';
  const agentId = await makeAgent(app, { config: { prompt: { first_message_mode: 'fixed', first_message: opener } } });
  const created = await app.req('POST', '/v1/agent/sessions', { agent_id: agentId });
  let chunks: Int16Array[] = [];
  let stops = 0;
  const speaker: Speaker = { play: (pcm) => chunks.push(pcm.slice()), stop: () => { stops++; } };
  const convo = await start(created.body, { speaker });
  const played = () => {
    const all = new Int16Array(chunks.reduce((n, c) => n + c.length, 0));
    let o = 0;
    for (const c of chunks) {
      all.set(c, o);
      o += c.length;
    }
    return decodeAudio(all, 16_000)?.text ?? '';
  };
  const until = async (what: string, ok: () => boolean) => {
    for (let i = 0; i < 750 && !ok(); i++) await new Promise((r) => setTimeout(r, 20));
    if (!ok()) throw new Error(`timed out waiting for ${what}`);
  };
  await until('a second of the opener', () => chunks.reduce((n, c) => n + c.length, 0) >= 16_000);
  const beforeStop = played();
  chunks = [];
  convo.sendUserMessage('Stop talking');
  t.equal(stops, 1, 'the speaker stopped at once');
  const replies: string[] = [];
  convo.on('transcript', (x) => { if (x.role === 'agent' && x.final) replies.push(x.text); });
  await until('the reply', () => replies.includes('You said: Stop talking'));
  await until('idle', () => convo.state === 'idle');
  t.ok(beforeStop.length > 0 && opener.startsWith(beforeStop), `the opener played until then: ${JSON.stringify(beforeStop)}`);
  t.equal(played(), 'You said: Stop talking', 'after the stop the speaker got the reply, whole, and nothing of the opener');
  await convo.hangup();
});
