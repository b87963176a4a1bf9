/**
 * Calls through the livekit-sip carrier with their media in LiveKit rooms: inbound calls
 * arrive as LiveKit webhooks (signed, verified with the SDK's WebhookReceiver), outbound calls
 * dial a SIP participant into the session's room, and in both the LiveKit agent participant
 * joins the call's room and runs the session (transport `livekit`). No LiveKit server here:
 * its Twirp API is `fake-livekit-api.ts` and rtc-node is `fake-rtc.ts`.
 */
import { createHash } from 'node:crypto';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import t from 'tap';
import { AccessToken } from 'livekit-server-sdk';
import { LIVEKIT_WEBHOOK_PATH } from '../../src/telephony/livekit-webhook.ts';
import { agentIdentity } from '../../src/transport/livekit-agent.ts';
import * as fakeRtc from '../fixtures/fake-rtc.ts';
import { startFakeLivekitApi } from '../fixtures/fake-livekit-api.ts';
import { startTestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { sleep } from './calls-helpers.ts';

const api = await startFakeLivekitApi();
api.replies.CreateSIPInboundTrunk = { sip_trunk_id: 'ST_in1' };
api.replies.CreateSIPDispatchRule = { sip_dispatch_rule_id: 'SDR_1' };
const lk = { url: api.url, apiKey: 'APIparley', apiSecret: 'a-secret-that-is-long-enough-for-hs256-0123456789' };
const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'fast' }, config: { livekit: lk } });
t.teardown(async () => {
  await app.close();
  await api.close();
});
const tel = app.telephony;
tel.livekitAgents!.loadRtc = async () => fakeRtc as never;

const waitFor = async (pred: () => boolean | Promise<boolean>, what: string, ms = 15_000) => {
  const until = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(30);
  }
};
const session = async (id: string) => (await app.req('GET', `/v1/agent/sessions/${id}`)).body;
/** A LiveKit webhook as the server sends it: the body's sha256 in a JWT signed with the API secret. */
async function webhook(event: Record<string, unknown>, secret = lk.apiSecret) {
  const body = JSON.stringify(event);
  const at = new AccessToken(lk.apiKey, secret);
  at.sha256 = createHash('sha256').update(body).digest('base64');
  return app.req('POST', LIVEKIT_WEBHOOK_PATH, body, { Authorization: await at.toJwt(), 'Content-Type': 'application/webhook+json' });
}
const texts = (room: fakeRtc.Room) => room.ops.filter((o) => o.kind === 'text' && o.attributes?.['lk.transcription_final'] === 'true').map((o) => o.value);

const agentId = await makeAgent(app, { config: { prompt: { first_message_mode: 'fixed', first_message: 'Hello from the phone agent.' } } });
const NUMBER = '+14155550777';

t.test('a managed number registers an inbound trunk and a dispatch rule with LiveKit', async (t) => {
  const r = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'managed', phone_number: NUMBER, agent_id: agentId });
  t.equal(r.status, 201, r.text);
  t.same(api.calls.map((c) => c.method), ['CreateSIPInboundTrunk', 'CreateSIPDispatchRule']);
  t.ok(api.calls.every((c) => c.authorized), 'the SDK signed its requests');
});

t.test('inbound: a SIP participant joining a dispatch-rule room becomes a phone session the agent joins', async (t) => {
  fakeRtc.Room.instances = [];
  const roomName = 'parley-call-_abc123';
  const joined = {
    event: 'participant_joined', id: 'EV_1', room: { name: roomName, sid: 'RM_1' },
    participant: { identity: 'sip_16505550301', kind: 'SIP', attributes: { 'sip.phoneNumber': '+16505550301', 'sip.trunkPhoneNumber': NUMBER } },
  };
  const bad = await webhook(joined, 'another-secret-that-is-long-enough-for-hs256-0000');
  t.equal(bad.status, 401, 'a webhook not signed with our API secret is refused');
  t.equal((await app.req('POST', LIVEKIT_WEBHOOK_PATH, JSON.stringify(joined), { 'Content-Type': 'application/webhook+json' })).status, 401, 'an unsigned one too');
  t.equal(fakeRtc.Room.instances.length, 0, 'nothing happened');

  t.equal((await webhook(joined)).status, 200);
  t.equal((await webhook(joined)).status, 200, 'LiveKit retries a webhook: still one call');
  await waitFor(() => fakeRtc.Room.instances.length > 0 && !!fakeRtc.Room.instances[0]!.joined, 'the agent joining the room');
  const room = fakeRtc.Room.instances[0]!;
  const grant = JSON.parse(Buffer.from(room.joined!.token.split('.')[1]!, 'base64url').toString('utf8'));
  t.equal(grant.video.room, roomName, "the agent's token is for the call's room");
  const list = await app.req('GET', `/v1/agent/sessions?caller_number=${encodeURIComponent('+16505550301')}&status=pending,active,completed,failed`);
  t.equal(list.body.sessions.length, 1, 'one session for the call');
  const id = list.body.sessions[0].session_id;
  t.match(await session(id), { status: 'pending', source: 'phone', direction: 'inbound', transport: 'livekit', caller_number: '+16505550301', dialed_number: NUMBER });

  // The phone's participant appears in the room: the agent sees it and the session starts.
  const phone = room.join('sip_16505550301');
  await waitFor(() => texts(room).includes('Hello from the phone agent.'), 'the opener in the room');
  t.equal((await session(id)).status, 'active');
  t.ok(fakeRtc.AudioSource.instances.at(-1)!.samples > 8000, 'the agent spoke on its track');
  t.equal(room.joined!.token.length > 0 && grant.sub, agentIdentity(id));

  // The phone hangs up: the session ends as the caller's hang-up.
  api.calls.length = 0;
  room.callerLeaves(phone, fakeRtc.DisconnectReason.UNKNOWN_REASON);
  t.equal((await webhook({ ...joined, event: 'participant_left' })).status, 200);
  await waitFor(async () => (await session(id)).status === 'completed', 'the end');
  t.match(await session(id), { status: 'completed', ended_reason: 'user_hangup' });
  await waitFor(() => room.left, 'the agent leaving');
});

t.test('inbound to an unbound number: the call is refused (the SIP participant removed)', async (t) => {
  await app.db.sql`update phone_numbers set agent_id = null where phone_number = ${NUMBER}`;
  t.teardown(async () => void (await app.db.sql`update phone_numbers set agent_id = ${agentId} where phone_number = ${NUMBER}`));
  api.calls.length = 0;
  const r = await webhook({ event: 'participant_joined', room: { name: 'parley-call-_def' }, participant: { identity: 'sip_2', kind: 'SIP', attributes: { 'sip.phoneNumber': '+16505550302', 'sip.trunkPhoneNumber': NUMBER } } });
  t.equal(r.status, 200);
  await waitFor(() => api.calls.some((c) => c.method === 'RemoveParticipant'), 'the refusal');
  t.match(api.calls.find((c) => c.method === 'RemoveParticipant')!.body, { room: 'parley-call-_def', identity: 'sip_2' });
});

t.test('outbound through the outbound trunk: the SIP participant dials into the session room, the agent joins it', async (t) => {
  tel.livekitSip!.cfg.outboundTrunkId = 'ST_out'; // LIVEKIT_SIP_OUTBOUND_TRUNK_ID
  fakeRtc.Room.instances = [];
  api.calls.length = 0;
  const [n] = await app.db.sql<{ id: string }[]>`select id from phone_numbers where phone_number = ${NUMBER}`;
  const r = await app.req('POST', '/v1/agent/phone-calls', { agent_id: agentId, phone_number_id: n!.id, to_number: '+13125554201' });
  t.equal(r.status, 201);
  const id = r.body.session_id;
  await waitFor(() => fakeRtc.Room.instances.length > 0 && !!fakeRtc.Room.instances[0]!.joined, 'the agent joining');
  const dial = api.calls.find((c) => c.method === 'CreateSIPParticipant')!;
  t.match(dial.body, { sipTrunkId: 'ST_out', sipCallTo: '+13125554201', roomName: `parley-${id}`, participantIdentity: `caller-${id}`, waitUntilAnswered: true });
  t.match(await session(id), { status: 'pending', transport: 'livekit', dial_status: 'answered', direction: 'outbound' });
  const room = fakeRtc.Room.instances[0]!;
  room.join(`caller-${id}`);
  await waitFor(() => texts(room).includes('Hello from the phone agent.'), 'the opener');
  t.equal((await session(id)).status, 'active');
  // Ending the session hangs the phone up (the SIP participant is removed).
  t.equal((await app.req('POST', `/v1/agent/sessions/${id}/end`)).status, 204);
  await waitFor(() => api.calls.some((c) => c.method === 'RemoveParticipant'), 'the hang-up');
  t.match(api.calls.find((c) => c.method === 'RemoveParticipant')!.body, { room: `parley-${id}`, identity: `caller-${id}` });
  await waitFor(async () => (await session(id)).status === 'completed', 'the end');
  t.equal((await session(id)).ended_reason, 'ended_by_api');
});

/** An outbound livekit-sip call to an agent with a cold transfer destination, asked to transfer; resolves once the REFER reached LiveKit. */
async function coldTransferCall(t: { teardown(fn: () => unknown): void }, before?: (room: fakeRtc.Room, phone: ReturnType<fakeRtc.Room['join']>) => unknown) {
  const HUMAN = '+13125550199';
  const transferAgent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager', transfer_destinations: [{ phone_number: HUMAN, label: 'Sales', mode: 'cold' }] } } });
  fakeRtc.Room.instances = [];
  api.calls.length = 0;
  t.teardown(() => { delete api.before.TransferSIPParticipant; delete api.replies.TransferSIPParticipant; });
  const [n] = await app.db.sql<{ id: string }[]>`select id from phone_numbers where phone_number = ${NUMBER}`;
  const r = await app.req('POST', '/v1/agent/phone-calls', { agent_id: transferAgent, phone_number_id: n!.id, to_number: '+13125554202' });
  if (r.status !== 201) throw new Error(`phone call: ${r.status} ${r.text}`);
  const id = r.body.session_id;
  await waitFor(() => fakeRtc.Room.instances.length > 0 && !!fakeRtc.Room.instances[0]!.joined, 'the agent joining');
  const room = fakeRtc.Room.instances[0]!;
  const phone = room.join(`caller-${id}`);
  if (before) api.before.TransferSIPParticipant = () => before(room, phone);
  await waitFor(async () => (await session(id)).status === 'active', 'the session');
  const track = room.callerAudio(phone);
  const speech = encodeText('Please transfer call to sales.', { sampleRateHz: 48_000 }).pcm;
  const all = new Int16Array(speech.length + 48_000);
  all.set(speech);
  for (let i = 0; i < all.length; i += 4800) {
    const chunk = all.subarray(i, i + 4800);
    track.push(new fakeRtc.AudioFrame(chunk, 48_000, 1, chunk.length));
    await sleep(100);
  }
  await waitFor(() => api.calls.some((c) => c.method === 'TransferSIPParticipant'), 'the SIP REFER', 20_000);
  return { id, room, phone, HUMAN };
}

t.test('cold transfer on a livekit-sip call: SIP REFER of the phone participant, the session ends call_transferred', async (t) => {
  const { id, room, phone, HUMAN } = await coldTransferCall(t);
  t.match(api.calls.find((c) => c.method === 'TransferSIPParticipant')!.body, { roomName: `parley-${id}`, participantIdentity: `caller-${id}`, transferTo: `tel:${HUMAN}` });
  room.callerLeaves(phone, fakeRtc.DisconnectReason.UNKNOWN_REASON); // the phone leaves the room with the REFER
  await waitFor(async () => (await session(id)).status === 'completed', 'the end');
  const s = await session(id);
  t.equal(s.ended_reason, 'call_transferred', 'the phone leaving after the handoff is not a hang-up');
  t.match(s.items.filter((i: any) => i.type === 'tool_result'), [{ tool_name: 'transfer_call', status: 'completed' }]);
  t.notOk(api.calls.some((c) => c.method === 'RemoveParticipant'), 'the transferred phone is not hung up');
});

/** The phone leaves the room while LiveKit holds its answer to the REFER. */
const leaveBeforeTheAnswer = async (room: fakeRtc.Room, phone: ReturnType<fakeRtc.Room['join']>) => {
  room.callerLeaves(phone, fakeRtc.DisconnectReason.UNKNOWN_REASON);
  await sleep(300);
};
const ended = async (id: string) => {
  await waitFor(async () => (await session(id)).status === 'completed', 'the end');
  return session(id);
};

t.test('cold transfer: the phone leaving the room before LiveKit answers the REFER is still a transfer', async (t) => {
  // LiveKit removes the SIP participant as the REFER is accepted; its API answer may come after.
  const { id } = await coldTransferCall(t, leaveBeforeTheAnswer);
  const s = await ended(id);
  t.equal(s.ended_reason, 'call_transferred');
  t.match(s.items.filter((i: any) => i.type === 'tool_result'), [{ tool_name: 'transfer_call', status: 'completed' }]);
  t.notOk(api.calls.some((c) => c.method === 'RemoveParticipant'), 'the transferred phone is not hung up');
});

t.test('cold transfer: the phone leaving while LiveKit refuses the REFER is the caller hanging up', async (t) => {
  api.replies.TransferSIPParticipant = { status: 500, body: { code: 'internal', msg: 'REFER failed' } };
  const { id } = await coldTransferCall(t, leaveBeforeTheAnswer);
  const s = await ended(id);
  t.equal(s.ended_reason, 'user_hangup');
  const result = s.items.find((i: any) => i.type === 'tool_result' && i.tool_name === 'transfer_call');
  t.ok(['failed', 'cancelled'].includes(result?.status), `the transfer did not complete (${result?.status}): the call ended while it failed`);
});
