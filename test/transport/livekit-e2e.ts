/**
 * One conversation over a real LiveKit server (imported by livekit-agent.test.ts only when
 * LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET are set): the platform dispatches its
 * agent into the session's room; the caller joins through the SDK with an rtc-node room,
 * types and speaks, hears and reads the agent, and hangs up.
 */
import type { Test } from 'tap';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { start } from '../../src/client/index.ts';
import { startTestServer } from '../helpers/server.ts';
import { rtcNodeRoomFactory } from '../helpers/livekit-caller.ts';
import { agentWith, createSession, sleep } from '../e2e/session-helpers.ts';

export async function livekitConversation(t: Test): Promise<void> {
  const app = await startTestServer({
    backend: 'synthetic',
    backendOptions: { pacing: 'fast' },
    config: { livekit: { url: process.env.LIVEKIT_URL!, apiKey: process.env.LIVEKIT_API_KEY!, apiSecret: process.env.LIVEKIT_API_SECRET! } },
  });
  t.teardown(() => app.close());
  const agent = await agentWith(app, { prompt: { first_message_mode: 'fixed', first_message: 'Hello from LiveKit.' }, conversation: { eagerness: 'eager' } });
  const session = await createSession(app, agent);
  t.equal(session.transport, 'livekit');
  const transcripts: { role: string; text: string; final: boolean }[] = [];
  const states: string[] = [];
  const convo = await start(session, { livekit: { roomFactory: rtcNodeRoomFactory() }, microphone: { start: () => () => {} } });
  convo.on('transcript', (x) => transcripts.push(x));
  convo.on('state', (s) => states.push(s));
  const waitFor = async (pred: () => boolean, what: string) => {
    for (let i = 0; i < 1000 && !pred(); i++) await sleep(20);
    if (!pred()) throw new Error(`timed out waiting for ${what}; ${JSON.stringify({ states, transcripts })}`);
  };
  await waitFor(() => transcripts.some((x) => x.role === 'agent' && x.final && x.text === 'Hello from LiveKit.'), 'the opener');
  convo.sendUserMessage('typed over data', { audio: false });
  await waitFor(() => transcripts.some((x) => x.role === 'agent' && x.final && x.text === 'You said: typed over data'), 'the typed reply');
  const speech = encodeText('spoken over the track', { sampleRateHz: 16_000 }).pcm;
  const all = new Int16Array(speech.length + 16_000);
  all.set(speech);
  for (let i = 0; i < all.length; i += 1600) {
    convo.sendAudio(all.subarray(i, i + 1600));
    await sleep(100);
  }
  await waitFor(() => transcripts.some((x) => x.role === 'user' && x.final && x.text === 'spoken over the track'), 'the caller transcript');
  t.ok(states.includes('speaking') && states.includes('listening'), 'lk.agent.state attribute changes arrive');
  t.same(await convo.hangup(), { reason: 'user_hangup' });
  for (let i = 0; i < 100; i++) {
    const r = await app.req('GET', `/v1/agent/sessions/${session.session_id}`);
    if (r.body.status === 'completed') break;
    await sleep(50);
  }
  t.match((await app.req('GET', `/v1/agent/sessions/${session.session_id}`)).body, { status: 'completed', ended_reason: 'user_hangup', transport: 'livekit' });
}
