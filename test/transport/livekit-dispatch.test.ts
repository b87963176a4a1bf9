/**
 * The LiveKit agent's wiring with a real platform (runtime, store, synthetic backend) and a
 * stand-in for rtc-node (no LiveKit server here): the agent joins, waits for the caller, runs
 * the session, maps audio, data, transcripts and state, and ends with the caller.
 */
import t from 'tap';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { AGENT_STATE_ATTRIBUTE, agentIdentity, LivekitAgents } from '../../src/transport/livekit-agent.ts';
import { callerIdentity } from '../../src/transport/livekit.ts';
import * as fakeRtc from '../fixtures/fake-rtc.ts';
import { startTestServer } from '../helpers/server.ts';
import { agentWith, createSession, sleep } from '../e2e/session-helpers.ts';

const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'fast' } });
t.teardown(() => app.close());
const cfg = { url: 'wss://lk.example.test', apiKey: 'APIparley', apiSecret: 'a-secret-that-is-long-enough-for-hs256-0123456789' };

const waitFor = async (pred: () => boolean, what: string, ms = 15_000) => {
  const until = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
};
const status = async (id: string) => (await app.req('GET', `/v1/agent/sessions/${id}`)).body;

t.test('the agent joins, waits for the caller, talks over audio, data and text streams, and ends with the caller', async (t) => {
  const agents = new LivekitAgents({ config: cfg, runtime: app.runtime, log: app.log, publishRateHz: 48_000, loadRtc: async () => fakeRtc as never });
  t.teardown(() => agents.close());
  const agent = await agentWith(app, { prompt: { first_message_mode: 'fixed', first_message: 'Hello over LiveKit.' }, conversation: { eagerness: 'eager' } });
  const session = await createSession(app, agent);
  fakeRtc.Room.instances = [];
  agents.dispatch({ id: session.session_id, expires_at: new Date(session.expires_at), max_duration_seconds: session.max_duration_seconds }, session.token);
  await waitFor(() => fakeRtc.Room.instances[0]?.ops.some((o) => o.kind === 'attributes'), 'the agent in the room');
  const room = fakeRtc.Room.instances[0];
  t.equal(room.joined!.url, cfg.url);
  t.same(room.ops.slice(0, 2), [{ kind: 'publishTrack', value: 'agent' }, { kind: 'attributes', value: { [AGENT_STATE_ATTRIBUTE]: 'initializing' } }]);
  t.equal((await status(session.session_id)).status, 'pending', 'pending until the caller joins');

  const caller = room.join(callerIdentity(session.session_id));
  room.join(agentIdentity('someone-else')); // other participants are not the caller
  const texts = () => room.ops.filter((o) => o.kind === 'text');
  await waitFor(() => texts().some((o) => o.attributes?.['lk.transcription_final'] === 'true'), 'the opener');
  t.equal((await status(session.session_id)).status, 'active');
  t.match(texts().find((o) => o.attributes?.['lk.transcription_final'] === 'true'), { topic: 'lk.transcription', value: 'Hello over LiveKit.', attributes: { 'lk.segment_id': 'agent-0' }, sender: undefined });
  const states = () => room.ops.filter((o) => o.kind === 'attributes').map((o) => (o.value as Record<string, string>)[AGENT_STATE_ATTRIBUTE]);
  t.ok(states().includes('speaking'), 'lk.agent.state follows the agent');
  const source = fakeRtc.AudioSource.instances.at(-1)!;
  t.equal(source.sampleRate, 48_000, 'the track is published at the configured rate');
  t.ok(source.samples > 48_000 * 0.5, `the opener's audio went to the track, resampled (${source.samples} samples)`);

  // The caller speaks on its track (48 kHz stereo; the agent converts to 16 kHz mono).
  const track = room.callerAudio(caller);
  const mono = encodeText('Can you hear me', { sampleRateHz: 48_000 }).pcm;
  const all = new Int16Array((mono.length + 48_000) * 2);
  for (let i = 0; i < mono.length; i++) all[2 * i] = all[2 * i + 1] = mono[i];
  for (let i = 0; i < all.length; i += 9600) {
    const chunk = all.subarray(i, i + 9600);
    track.push(new fakeRtc.AudioFrame(chunk, 48_000, 2, chunk.length / 2));
    await sleep(100);
  }
  await waitFor(() => texts().some((o) => o.sender === callerIdentity(session.session_id) && o.attributes?.['lk.transcription_final'] === 'true'), 'the caller transcript');
  t.match(texts().find((o) => o.sender === callerIdentity(session.session_id) && o.attributes?.['lk.transcription_final'] === 'true'), { value: 'Can you hear me' }, 'user transcripts are sent for the caller');
  await waitFor(() => texts().some((o) => o.value === 'You said: Can you hear me' && o.attributes?.['lk.transcription_final'] === 'true'), 'the spoken reply');

  // A typed turn over client-event data; other topics are ignored.
  room.callerData(caller, { type: 'user.message', text: 'typed hello', audio: false }, 'other-topic');
  room.callerData(caller, { type: 'user.message', text: 'typed hello', audio: false });
  await waitFor(() => texts().some((o) => o.value === 'You said: typed hello'), 'the typed reply');
  t.equal(texts().filter((o) => o.value === 'You said: typed hello').length, 1);

  // The caller leaving on purpose ends the session.
  room.callerLeaves(caller, fakeRtc.DisconnectReason.CLIENT_INITIATED);
  await waitFor(() => room.left, 'the agent leaving');
  t.same(room.ops.filter((o) => o.kind === 'data').at(-1), { kind: 'data', topic: 'agent-event', value: { type: 'session.ended', reason: 'user_hangup' } });
  let rec = await status(session.session_id);
  for (let i = 0; i < 100 && rec.status === 'active'; i++) rec = (await sleep(50), await status(session.session_id));
  t.match(rec, { status: 'completed', ended_reason: 'user_hangup', transport: 'websocket' });
  t.same(rec.items.filter((i: any) => i.type === 'message').map((i: any) => i.content), ['Hello over LiveKit.', 'Can you hear me', 'You said: Can you hear me', 'typed hello', 'You said: typed hello']);
});

t.test('a caller who drops (not on purpose) can rejoin within the grace period', async (t) => {
  const agents = new LivekitAgents({ config: cfg, runtime: app.runtime, log: app.log, loadRtc: async () => fakeRtc as never });
  t.teardown(() => agents.close());
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  fakeRtc.Room.instances = [];
  agents.dispatch({ id: session.session_id, expires_at: new Date(session.expires_at), max_duration_seconds: session.max_duration_seconds }, session.token);
  await waitFor(() => fakeRtc.Room.instances[0]?.ops.length >= 2, 'the agent in the room');
  const room = fakeRtc.Room.instances[0];
  const first = room.join(callerIdentity(session.session_id));
  await waitFor(() => room.ops.filter((o) => o.kind === 'attributes').length >= 2, 'the session started');
  room.callerLeaves(first, fakeRtc.DisconnectReason.UNKNOWN_REASON);
  await sleep(200);
  t.equal((await status(session.session_id)).status, 'active', 'a drop keeps the session');
  const again = room.join(callerIdentity(session.session_id));
  room.callerData(again, { type: 'user.message', text: 'back again', audio: false });
  await waitFor(() => room.ops.some((o) => o.kind === 'text' && o.value === 'You said: back again'), 'the reply after rejoining');
  room.callerData(again, { type: 'user.hangup' });
  await waitFor(() => room.left, 'the agent leaving');
  // The agent leaves the room before the session's record is written: read until it is.
  let rec = await status(session.session_id);
  for (let i = 0; i < 100 && rec.status === 'active'; i++) rec = (await sleep(50), await status(session.session_id));
  t.match(rec, { ended_reason: 'user_hangup' });
});

t.test('a caller who never joins: the agent leaves at expires_at and the session stays pending', async (t) => {
  const agents = new LivekitAgents({ config: cfg, runtime: app.runtime, log: app.log, loadRtc: async () => fakeRtc as never });
  t.teardown(() => agents.close());
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  fakeRtc.Room.instances = [];
  agents.dispatch({ id: session.session_id, expires_at: new Date(Date.now() + 300), max_duration_seconds: 60 }, session.token);
  await waitFor(() => fakeRtc.Room.instances[0]?.left === true, 'the agent leaving', 5_000);
  t.equal((await status(session.session_id)).status, 'pending');
});
