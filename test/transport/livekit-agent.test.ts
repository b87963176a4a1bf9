/**
 * The LiveKit agent participant: the pieces that need no LiveKit server (message mapping to
 * room operations, client-event packets, audio conversion, the agent token, the link's
 * ordering and backpressure), and an end-to-end conversation that runs only with LIVEKIT_URL.
 */
import t from 'tap';
import { TokenVerifier } from 'livekit-server-sdk';
import { AGENT_STATE_ATTRIBUTE, agentIdentity, decodeClientPacket, InboundAudio, LivekitLink, mintAgentToken, OutboundAudio, roomActionFor } from '../../src/transport/livekit-agent.ts';
import { roomName } from '../../src/transport/livekit.ts';
import { RecordingRoomPort } from '../fixtures/recording-room-port.ts';

const SID = 'sess_0123456789abcdef01234567';
const text = (a: ReturnType<typeof roomActionFor>) => (a && a.kind === 'data' ? JSON.parse(new TextDecoder().decode(a.payload)) : null);
const silentLog = { warn() {} };

t.test('session messages as room operations', async (t) => {
  t.same(roomActionFor({ topic: 'lk.agent.state', state: 'thinking' }, SID), { kind: 'attributes', attributes: { 'lk.agent.state': 'thinking' } }, 'agent state is a participant attribute');
  t.same(roomActionFor({ topic: 'lk.transcription', role: 'agent', segmentId: 'agent-1', text: 'Hi there', final: false }, SID), {
    kind: 'text', topic: 'lk.transcription', text: 'Hi there', attributes: { 'lk.segment_id': 'agent-1', 'lk.transcription_final': 'false' },
  }, 'agent transcript: a text stream from the agent');
  t.same(roomActionFor({ topic: 'lk.transcription', role: 'user', segmentId: 'user-2', text: 'Hello', final: true }, SID), {
    kind: 'text', topic: 'lk.transcription', text: 'Hello', attributes: { 'lk.segment_id': 'user-2', 'lk.transcription_final': 'true' }, senderIdentity: `caller-${SID}`,
  }, 'user transcript: sent on behalf of the caller (the sender gives the role)');
  const started = roomActionFor({ topic: 'agent-event', type: 'tool.started', callId: 'c1', toolName: 'lookup', toolSource: 'webhook', input: '{}' }, SID);
  t.match(started, { kind: 'data', topic: 'agent-event' });
  t.same(text(started), { type: 'tool.started', callId: 'c1', toolName: 'lookup', toolSource: 'webhook', input: '{}' }, 'one JSON object per packet, camelCase, no topic field');
  t.same(text(roomActionFor({ topic: 'agent-event', type: 'error', code: 'provider_error' }, SID)), { type: 'error', code: 'provider_error' });
  t.same(text(roomActionFor({ topic: 'session', type: 'session.ended', reason: 'agent_hangup' }, SID)), { type: 'session.ended', reason: 'agent_hangup' });
  t.equal(roomActionFor({ topic: 'session', type: 'session.started', sessionId: SID, resume: 'r', resumed: false, sampleRateHz: 16000 }, SID), null, 'websocket-only messages have no LiveKit form');
});

t.test('client-event packets: the websocket rules (malformed and unknown ignored), other topics ignored', async (t) => {
  const enc = (o: unknown) => new TextEncoder().encode(typeof o === 'string' ? o : JSON.stringify(o));
  t.same(decodeClientPacket(enc({ type: 'user.message', text: 'hi', audio: false }), 'client-event'), { type: 'user.message', text: 'hi', audio: false });
  t.same(decodeClientPacket(enc({ type: 'user.hangup' }), 'client-event'), { type: 'user.hangup' });
  t.equal(decodeClientPacket(enc({ type: 'user.hangup' }), 'agent-event'), null);
  t.equal(decodeClientPacket(enc({ type: 'user.hangup' }), undefined), null);
  t.equal(decodeClientPacket(enc('nope'), 'client-event'), null);
  t.equal(decodeClientPacket(enc({ type: 'user.dance' }), 'client-event'), null);
});

const tone = (rate: number, channels: number, ms: number, hz = 440) => {
  const n = Math.round((rate * ms) / 1000);
  const out = new Int16Array(n * channels);
  for (let i = 0; i < n; i++) for (let c = 0; c < channels; c++) out[i * channels + c] = Math.round(8000 * Math.sin((2 * Math.PI * hz * i) / rate));
  return out;
};
const crossings = (pcm: Int16Array) => {
  let k = 0;
  for (let i = 1; i < pcm.length; i++) if ((pcm[i - 1] < 0) !== (pcm[i] < 0)) k++;
  return k;
};

t.test('caller audio at 48 kHz stereo becomes the session 16 kHz mono; 16 kHz mono passes through', async (t) => {
  const inbound = new InboundAudio();
  const chunks: Uint8Array[] = [];
  const src = tone(48_000, 2, 1000);
  for (let i = 0; i < src.length; i += 960) chunks.push(inbound.push({ data: src.subarray(i, i + 960), sampleRate: 48_000, channels: 2 })); // 10 ms frames
  const bytes = Buffer.concat(chunks);
  const out = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 1);
  t.ok(Math.abs(out.length - 16_000) <= 64, `one second of 16 kHz samples (${out.length})`);
  t.ok(Math.abs(crossings(out.subarray(200)) - 880 * (out.length - 200) / 16_000) <= 6, 'the 440 Hz tone keeps its pitch');
  const peak = out.subarray(200).reduce((m, v) => Math.max(m, Math.abs(v)), 0);
  t.ok(peak > 7000 && peak < 9000, `level kept (${peak})`);
  const same = tone(16_000, 1, 20);
  t.same([...new InboundAudio().push({ data: same, sampleRate: 16_000, channels: 1 })], [...new Uint8Array(same.buffer)], '16 kHz mono is unchanged');
});

t.test('agent audio is published at 16 kHz, or resampled to 48 kHz', async (t) => {
  const frame = Buffer.from(tone(16_000, 1, 20).buffer); // the session's 20 ms frames
  t.equal(new OutboundAudio().push(frame).length, 320);
  const up = new OutboundAudio(48_000);
  let n = 0;
  for (let i = 0; i < 50; i++) n += up.push(frame).length;
  t.ok(Math.abs(n - 48_000) <= 64, `one second at 48 kHz (${n})`);
});

t.test('the agent token: its room only, kind agent, may set its own attributes', async (t) => {
  const cfg = { apiKey: 'APIparley', apiSecret: 'a-secret-that-is-long-enough-for-hs256-0123456789' };
  const jwt = await mintAgentToken(cfg, SID, 120);
  const claims = await new TokenVerifier(cfg.apiKey, cfg.apiSecret).verify(jwt);
  t.equal(claims.sub, agentIdentity(SID));
  t.equal(claims.kind, 'agent');
  t.match(claims.video, { room: roomName(SID), roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true, canUpdateOwnMetadata: true, agent: true });
  t.notOk(claims.video?.roomAdmin);
  t.same(claims.attributes, { [AGENT_STATE_ATTRIBUTE]: 'initializing' });
});

t.test('the link: room operations in message order; leaving speaking drops queued audio at once; a full queue drops frames; close leaves last', async (t) => {
  const port = new RecordingRoomPort();
  let closedWith = '';
  const link = new LivekitLink(port, SID, silentLog, 16_000, (code, reason) => (closedWith = `${code} ${reason}`));
  link.message({ topic: 'lk.agent.state', state: 'speaking' });
  link.message({ topic: 'lk.transcription', role: 'agent', segmentId: 'agent-1', text: 'Hi', final: false });
  link.audio(new Uint8Array(640));
  port.capacity = 0;
  link.audio(new Uint8Array(640)); // dropped, not buffered
  link.message({ topic: 'lk.agent.state', state: 'listening' });
  link.message({ topic: 'session', type: 'session.ended', reason: 'user_hangup' });
  link.close(1000, 'user_hangup');
  link.message({ topic: 'lk.agent.state', state: 'idle' }); // after close: nothing
  await link.flushed();
  t.same(port.ops, [
    'clear audio', // urgent: at once, not behind the queued room calls
    'attributes {"lk.agent.state":"speaking"}',
    'text lk.transcription {"lk.segment_id":"agent-1","lk.transcription_final":"false"} agent Hi',
    'attributes {"lk.agent.state":"listening"}',
    'data agent-event {"type":"session.ended","reason":"user_hangup"}',
    'disconnect',
  ]);
  t.equal(port.samples, 320, 'one frame accepted, the other dropped');
  t.equal(closedWith, '1000 user_hangup');
});

t.test('end to end with a LiveKit server', { skip: process.env.LIVEKIT_URL ? false : 'LIVEKIT_URL is not set: no LiveKit server on this machine (set LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET to run it)' }, async (t) => {
  const { livekitConversation } = await import('./livekit-e2e.ts');
  await livekitConversation(t);
});
