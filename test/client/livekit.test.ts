/**
 * The SDK's `livekit` transport against an injected room (docs/api/sessions.md mapping): data topics,
 * transcription text streams with their attributes, the agent-state attribute, hang-up.
 */
import t from 'tap';
import { start } from '../../src/client/index.ts';
import { FakeLivekitRoom } from '../fixtures/fake-livekit-room.ts';

const session = { session_id: 'sess_1', transport: 'livekit', token: 'lk-jwt', livekit_url: 'wss://lk.example.test', expires_at: '', max_duration_seconds: 60 };
const roomFactory = () => new FakeLivekitRoom();
const joined = async (options: Parameters<typeof start>[1] = {}) => {
  FakeLivekitRoom.instances = [];
  const convo = await start(session, { livekit: { roomFactory }, ...options });
  return { convo, room: FakeLivekitRoom.instances[0] };
};

t.test('without a room factory the SDK joins through the livekit-client package; outside a browser the join fails as connection_failed, never as unsupported_transport', async (t) => {
  const local = { ...session, livekit_url: 'ws://127.0.0.1:9' };
  await t.rejects(start(local), { name: 'ClientError', code: 'connection_failed', message: /Could not join the room/ });
});

t.test('joins livekit_url with the token, publishes the microphone, maps the protocol', async (t) => {
  const { convo, room } = await joined();
  t.same(room.joined, { url: 'wss://lk.example.test', token: 'lk-jwt' });
  t.ok(room.microphoneEnabled, 'the device microphone is published when no microphone hook is given');
  const seen: string[] = [];
  convo.on('state', (s) => seen.push(`state ${s}`));
  convo.on('transcript', (x) => seen.push(`${x.role} ${x.segmentId} ${x.final ? 'final' : 'interim'} ${x.text}`));
  convo.on('toolCallStarted', (e) => seen.push(`started ${e.callId} ${e.toolName} ${e.source} ${e.input}`));
  convo.on('toolCallCompleted', (e) => seen.push(`completed ${e.callId} ${e.output}`));
  convo.on('error', (e) => seen.push(`error ${e.code}`));
  room.agentState('listening');
  room.handlers!.attributes({ 'lk.agent.state': 'speaking' }, 'caller-sess_1'); // not the agent: ignored
  room.agentText('Hel', 'user-1', false, 'caller-sess_1');
  room.agentText('Hello', 'user-1', true, 'caller-sess_1');
  room.agentText('Hi there', 'agent-1', true);
  room.agentData({ type: 'tool.started', callId: 'c1', toolName: 'lookup', toolSource: 'webhook', input: '{}' });
  room.agentData({ type: 'tool.completed', callId: 'c1', toolName: 'lookup', toolSource: 'webhook', output: 'ok' });
  room.agentData({ type: 'error', code: 'provider_error' });
  room.agentData({ type: 'something.new' });
  room.agentData('not json');
  room.agentData({ type: 'error', code: 'x' }, 'other-topic');
  t.same(seen, [
    'state listening',
    'user user-1 interim Hel',
    'user user-1 final Hello',
    'agent agent-1 final Hi there',
    'started c1 lookup webhook {}',
    'completed c1 ok',
    'error provider_error',
  ], 'the sender identity gives the role; unknown types and topics are ignored');
  t.equal(convo.state, 'listening');
  convo.sendUserMessage('typed', { audio: false });
  convo.sendActivity();
  convo.interrupt();
  t.same(room.published, [
    { topic: 'client-event', json: { type: 'user.message', text: 'typed', audio: false } },
    { topic: 'client-event', json: { type: 'user.activity' } },
    { topic: 'client-event', json: { type: 'user.interrupt' } },
  ]);
  const ending = convo.hangup();
  t.same(room.published.at(-1), { topic: 'client-event', json: { type: 'user.hangup' } });
  room.agentData({ type: 'session.ended', reason: 'user_hangup' });
  t.same(await ending, { reason: 'user_hangup' });
  t.ok(room.disconnected, 'the client leaves the room at the end');
  t.throws(() => convo.sendUserMessage('late'), { code: 'not_connected' });
});

t.test('a microphone hook feeds the room; the platform ending the session ends the conversation', async (t) => {
  let push: (pcm: Int16Array) => void = () => {};
  let stopped = false;
  const { convo, room } = await joined({ microphone: { start: (f) => { push = f; return () => { stopped = true; }; } } });
  t.notOk(room.microphoneEnabled);
  push(new Int16Array([1, 2, 3]));
  t.same(room.audio.map((a) => [...a]), [[1, 2, 3]]);
  room.agentData({ type: 'session.ended', reason: 'max_duration' });
  t.same(await convo.ended, { reason: 'max_duration' });
  t.ok(stopped);
});

t.test('a lost connection ends as connection_lost; a refused token is unauthorized', async (t) => {
  const { convo, room } = await joined();
  room.lost();
  t.same(await convo.ended, { reason: 'connection_lost' });
  const refused = () => Object.assign(new FakeLivekitRoom(), { refuse: 'unauthorized' as const });
  await t.rejects(start(session, { livekit: { roomFactory: refused } }), { code: 'unauthorized' });
  const broken = () => Object.assign(new FakeLivekitRoom(), { refuse: 'error' as const });
  await t.rejects(start(session, { livekit: { roomFactory: broken } }), { code: 'connection_failed' });
  await t.rejects(start({ ...session, livekit_url: undefined }, { livekit: { roomFactory } }), { code: 'connection_failed' });
});

t.test('a room that takes no PCM (livekit-client) publishes the device microphone instead of the hook', async (t) => {
  FakeLivekitRoom.instances = [];
  let hookStarted = false;
  const factory = () => Object.assign(new FakeLivekitRoom(), { sendAudio: undefined });
  const convo = await start(session, { livekit: { roomFactory: factory }, microphone: { start: () => { hookStarted = true; return () => {}; } } });
  const room = FakeLivekitRoom.instances[0]!;
  t.ok(room.microphoneEnabled, 'the room publishes the microphone over WebRTC');
  t.notOk(hookStarted, 'the hook, with nowhere to send, is not opened');
  await convo.hangup();
});
