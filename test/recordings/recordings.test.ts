// Recordings (docs/api/recordings.md): with record_audio, each speaker's audio is stored as a WAV track
// and served through a signed URL; a session never recorded answers 404 Recording not found.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { decodeAudio } from '../../native/engines/synthetic/modem.ts';
import { startBackend } from '../../native/server.ts';
import { parseWav } from '../../src/audio/index.ts';
import { randomSchema } from '../../src/platform.ts';
import { openApiValidator } from '../helpers/openapi.ts';
import { startTestServer } from '../helpers/server.ts';
import { agentWith, connect, createSession, RATE } from '../e2e/session-helpers.ts';
import { startS3Server } from '../fixtures/s3-server.ts';
import { publishedAgent, startAnalysisPlatform, testKey, type Req } from '../analysis/helpers.ts';

const OPENER = 'Welcome to the recorded line.';

/** One short conversation: the opener, the caller says `words`, the agent answers; then hang up. */
// The backends pace synthesis fast (the default): the agent's audio then waits in the
// playout's queue and a stall of this loaded process only delays its sending (the recording
// places it by play time). Paced in real time, each chunk came just when it was due to play,
// and a stall of over 60 ms starved the playout: real silence in the agent track, cutting the
// opener the tests decode.
async function converse(app: { url: string; req: Req }, agentId: string, words: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await app.req('POST', '/v1/agent/sessions', { agent_id: agentId, ...extra });
  if (r.status !== 200) throw new Error(`session: ${r.status} ${r.text}`);
  const caller = await connect(r.body);
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  await caller.waitFor(() => caller.convo.state === 'idle', 10_000, 'idle');
  // The caller's words in one burst (100 ms pieces, not paced): the track then holds them
  // contiguously whatever the machine's load. Paced in real time, pieces that a loaded machine
  // delivered over 60 ms late were placed after silence (time alignment), cutting the words
  // the test decodes; the recording's timing is not what these tests are about.
  caller.speakAtOnce(words);
  await caller.waitFor(() => caller.finals('agent').length === 2, 15_000, 'the answer');
  await caller.waitFor(() => caller.convo.state === 'idle' || caller.convo.state === 'listening', 10_000, 'idle again');
  await caller.convo.hangup();
  return r.body.session_id;
}

async function settled(app: { req: Req }, sessionId: string): Promise<any> {
  for (;;) {
    const r = await app.req('GET', `/v1/agent/sessions/${sessionId}/recording`);
    if (r.status !== 200) throw new Error(`recording: ${r.status} ${r.text}`);
    if (r.body.status !== 'processing') return r.body;
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** The text a synthetic-speech WAV track says. */
async function said(url: string): Promise<{ text: string; rate: number; durationMs: number }> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`track: ${res.status}`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  const info = parseWav(bytes)!;
  const pcm = new Int16Array(bytes.slice(info.dataOffset, info.dataOffset + info.dataBytes).buffer);
  return { text: decodeAudio(pcm, info.sampleRateHz)?.text ?? '', rate: info.sampleRateHz, durationMs: (pcm.length / info.sampleRateHz) * 1000 };
}

t.test('local folder: per-speaker tracks behind signed URLs; never recorded → 404', async (t) => {
  const app = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => app.close());
  const agent = await agentWith(app, { prompt: { first_message_mode: 'fixed', first_message: OPENER }, conversation: { eagerness: 'eager' } });
  const sessionId = await converse(app, agent, 'my name is Ada');

  const rec = await settled(app, sessionId);
  t.equal(rec.status, 'complete');
  t.equal(rec.session_id, sessionId);
  t.same(rec.tracks.map((x: any) => [x.role, x.status]), [['agent', 'complete'], ['user', 'complete']], 'one track per speaker');
  const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);
  t.same(oas.check('GET', '/v1/agent/sessions/{session_id}/recording', 200, rec), [], 'matches the OpenAPI document');
  for (const track of rec.tracks) {
    t.match(track, { url: /^http:\/\/127\.0\.0\.1:\d+\/v1\/agent\/sessions\/.+\/recording\/tracks\/(agent|user)\?expires=\d+&signature=[0-9a-f]+$/, expires_at: String, duration_ms: Number, error: null, error_code: null });
    t.ok(Date.parse(track.expires_at) - Date.now() > 59 * 60_000, 'signed for an hour');
  }
  const agentAudio = await said(rec.tracks[0].url);
  t.equal(agentAudio.rate, RATE);
  t.match(agentAudio.text, OPENER, 'the agent track says what the agent said');
  const userAudio = await said(rec.tracks[1].url);
  t.equal(userAudio.text, 'my name is Ada', 'the user track says what the caller said');

  const forged = new URL(rec.tracks[0].url);
  forged.searchParams.set('signature', '0'.repeat(64));
  t.equal((await fetch(forged)).status, 404, 'a forged signature gets nothing');
  const other = new URL(rec.tracks[0].url.replace('/tracks/agent', '/tracks/user'));
  t.equal((await fetch(other)).status, 404, "one track's signature does not open the other");

  // record_audio: false for this session only → never recorded.
  const quiet = await createSession(app, agent, { record_audio: false });
  const caller = await connect(quiet);
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  await caller.convo.hangup();
  const none = await app.req('GET', `/v1/agent/sessions/${quiet.session_id}/recording`);
  t.equal(none.status, 404);
  t.same(none.body, { status: 404, message: 'Recording not found' }, 'a real session never recorded');
  t.equal((await app.req('GET', `/v1/agent/sessions/${quiet.session_id}`)).body.recording, null, 'its record has no recording');

  const team = await app.newTeam();
  const foreign = await fetch(`${app.url}/v1/agent/sessions/${sessionId}/recording`, { headers: team.auth });
  t.equal(foreign.status, 404);
  t.same(await foreign.json(), { status: 404, message: 'Session not found' }, "another team's session is missing");
});

t.test('a stalled event loop mid-opener does not cut the opener in the agent track', async (t) => {
  // The server runs in this process: a busy loop here stalls its event loop as a loaded
  // machine does. Fast backend pacing: the opener waits in the playout's queue, so the stall
  // holds back frames that are due and they leave together after it. Placed by the moment
  // they were sent, they came after 150 ms of silence and the opener no longer decoded; placed
  // by their play time they are contiguous, as the caller's jitter buffer plays them.
  const app = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => app.close());
  const agent = await agentWith(app, { prompt: { first_message_mode: 'fixed', first_message: OPENER } });
  const session = await createSession(app, agent);
  const caller = await connect(session);
  await caller.waitFor(() => caller.audio().length >= RATE / 2, 15_000, 'half a second of the opener');
  const stalledAt = caller.audio().length;
  const until = performance.now() + 150;
  while (performance.now() < until) { /* the stall */ }
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  t.ok(caller.audio().length > stalledAt + RATE / 2, `the stall came in the middle of the opener (${stalledAt} then ${caller.audio().length})`);
  t.equal(caller.heard(), OPENER, 'the caller heard the whole opener');
  await caller.convo.hangup();

  const rec = await settled(app, session.session_id);
  t.equal(rec.status, 'complete');
  t.equal((await said(rec.tracks[0].url)).text, OPENER, 'the agent track holds the whole opener');
});

t.test('S3-compatible storage: tracks uploaded with SigV4, served by presigned URLs', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  const s3 = await startS3Server();
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-rec-'));
  const app = await startAnalysisPlatform({
    dataDir, schema: randomSchema(), key: testKey(), backendAddress: backend.address,
    env: {
      PARLEY_RECORDINGS_S3_ENDPOINT: s3.url, PARLEY_RECORDINGS_S3_BUCKET: s3.bucket, PARLEY_RECORDINGS_S3_REGION: s3.region,
      PARLEY_RECORDINGS_S3_ACCESS_KEY_ID: s3.accessKeyId, PARLEY_RECORDINGS_S3_SECRET_ACCESS_KEY: s3.secretAccessKey, PARLEY_RECORDINGS_S3_PREFIX: 'parley/',
    },
  });
  t.teardown(async () => {
    await app.close();
    await backend.close();
    await s3.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const agent = await publishedAgent(app, { prompt: { first_message_mode: 'fixed', first_message: OPENER }, conversation: { eagerness: 'eager' } });
  const sessionId = await converse(app, agent, 'hello from the bucket');
  const rec = await settled(app, sessionId);
  t.equal(rec.status, 'complete');
  t.same([...s3.objects.keys()].sort(), [`parley/${sessionId}/agent.wav`, `parley/${sessionId}/user.wav`], 'both tracks uploaded under the prefix');
  t.ok(s3.objects.get(`parley/${sessionId}/agent.wav`)!.contentType.startsWith('audio/wav'));
  for (const track of rec.tracks) t.ok(track.url.startsWith(`${s3.url}/${s3.bucket}/parley/${sessionId}/`) && track.url.includes('X-Amz-Signature='), 'a presigned URL of the store');
  t.match((await said(rec.tracks[0].url)).text, OPENER);
  t.equal((await said(rec.tracks[1].url)).text, 'hello from the bucket');
  t.ok(s3.log.every((l) => l.verdict === 'ok'), 'the store verified every signature');

  // The store refuses both uploads: the tracks and the recording are `failed`, with the reason.
  s3.failPuts = 2;
  const lost = await converse(app, agent, 'nobody keeps this');
  const failed = await settled(app, lost);
  t.match(failed, { status: 'failed', error: 'recording_failed', error_code: 'upload_failed', error_message: 'The track could not be uploaded: the store answered 500' });
  t.same(failed.tracks.map((x: any) => [x.role, x.status, x.url, x.error_code, x.error]), [['agent', 'failed', null, 'upload_failed', 'The track could not be uploaded: the store answered 500'], ['user', 'failed', null, 'upload_failed', 'The track could not be uploaded: the store answered 500']], 'each track says why');
  t.match((await app.req('GET', `/v1/agent/sessions/${lost}`)).body.recording, { status: 'failed', error_code: 'upload_failed', error_message: /answered 500/ }, 'so does the session record');
  t.match((await app.req('GET', `/v1/agent/sessions/${sessionId}`)).body.recording, { status: 'complete', error: null, error_code: null, error_message: null });
});
