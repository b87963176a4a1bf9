// Family C single-use tokens (POST /compat/elevenlabs/v1/single-use-token/{token_type}): the
// official @elevenlabs/elevenlabs-js client creates them and connects the realtime
// transcription socket with `token` (no key header); raw `ws` for stream-input and refusals.
// Rules: a token is single-use, valid 15 minutes, accepted only where its type applies.
import t from 'tap';
import { AudioFormat, CommitStrategy, ElevenLabsClient, ElevenLabsError, RealtimeEvents } from '@elevenlabs/elevenlabs-js';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { int16ToPcmBytes, wavHeader } from '../../src/audio/index.ts';
import { redeemSingleUseToken, issueSingleUseToken, SINGLE_USE_TOKEN_TTL_MS } from '../../src/compat/elevenlabs/tokens.ts';
import { createKey } from '../../src/auth/keys.ts';
import { createSharedState } from '../../src/state/index.ts';
import { revokeKey } from '../../src/auth/store-keys.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { heard } from '../speech/tts-helpers.ts';
import { audioOf, connect, open } from './elevenlabs-ws-helpers.ts';

let app: TestServer;
let base: string;
let wsBase: string;
let el: ElevenLabsClient;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  base = `${app.url}/compat/elevenlabs`;
  wsBase = `${base.replace(/^http/, 'ws')}/v1`;
  el = new ElevenLabsClient({ apiKey: app.key, baseUrl: base, maxRetries: 0 });
});
t.teardown(() => app.close());

const pcmOf = (text: string, rate: number) => Buffer.from(int16ToPcmBytes(encodeText(text, { sampleRateHz: rate }).pcm));
const sttUrl = (token: string) => `${wsBase}/speech-to-text/realtime?model_id=scribe_v2_realtime&token=${encodeURIComponent(token)}`;
const ttsUrl = (token: string, kind = 'stream-input') => `${wsBase}/text-to-speech/default/${kind}?output_format=pcm_16000&token=${encodeURIComponent(token)}`;

t.test('the official client: tokens.singleUse.create, then realtime connect with token and no key header', async (t) => {
  const { token } = await el.tokens.singleUse.create('realtime_scribe');
  t.match(token, /^sutkn_[A-Za-z0-9_-]{20,}$/, 'an opaque token');
  // A client whose key is wrong: with a token the SDK sends no key, so only the token counts.
  const browser = new ElevenLabsClient({ apiKey: 'pk_not_a_key', baseUrl: base, maxRetries: 0 });
  const conn = await browser.speechToText.realtime.connect({
    modelId: 'scribe_v2_realtime', audioFormat: AudioFormat.PCM_16000, sampleRate: 16000, commitStrategy: CommitStrategy.MANUAL, token,
  });
  const started = new Promise<any>((resolve) => conn.on(RealtimeEvents.SESSION_STARTED, resolve));
  const committed = new Promise<any>((resolve) => conn.on(RealtimeEvents.COMMITTED_TRANSCRIPT, resolve));
  const closed = new Promise<void>((resolve) => conn.on(RealtimeEvents.CLOSE, () => resolve()));
  t.equal((await started).message_type, 'session_started');
  conn.send({ audioBase64: pcmOf('token ok', 16000).toString('base64') });
  conn.commit();
  t.equal((await committed).text, 'token ok', 'transcribed under the token');
  conn.close();
  await closed;

  const again = await connect(sttUrl(token));
  t.ok('status' in again && again.status === 401, 'single-use: the second use → 401 before the upgrade');
  if ('status' in again) t.equal(again.body.detail.status, 'unauthorized');
});

t.test('tts_websocket tokens open stream-input and multi-stream-input without a key; types do not cross', async (t) => {
  const tts = await el.tokens.singleUse.create('tts_websocket');
  const s = await open(ttsUrl(tts.token));
  s.send({ text: ' ' });
  s.send({ text: 'Hi there. ', flush: true });
  s.send({ text: '' });
  t.equal((await s.closed).code, 1000);
  t.same(s.frames.at(-1), { isFinal: true });
  t.equal(await heard(audioOf(s.frames), 'pcm', 16000), 'Hi there. ', 'synthesized under the token');

  const multi = await el.tokens.singleUse.create('tts_websocket');
  const m = await open(ttsUrl(multi.token, 'multi-stream-input'));
  m.send({ text: ' ', context_id: 'a' });
  m.send({ text: 'Hello. ', context_id: 'a', flush: true });
  m.send({ context_id: 'a', close_context: true });
  await m.until((f) => f.isFinal === true && f.contextId === 'a');
  m.send({ close_socket: true });
  t.equal((await m.closed).code, 1000, 'multi-stream-input under the token');

  const reused = await connect(ttsUrl(tts.token));
  t.ok('status' in reused && reused.status === 401, 'a used tts_websocket token → 401');

  const scribe = await el.tokens.singleUse.create('realtime_scribe');
  const crossed = await connect(ttsUrl(scribe.token));
  t.ok('status' in crossed && crossed.status === 401, 'a realtime_scribe token on stream-input → 401');
  if ('status' in crossed) t.equal(crossed.body.detail.status, 'unauthorized');
  const ttsToken = await el.tokens.singleUse.create('tts_websocket');
  const crossed2 = await connect(sttUrl(ttsToken.token));
  t.ok('status' in crossed2 && crossed2.status === 401, 'a tts_websocket token on realtime STT → 401');
  // The refused use above consumed nothing of the right type: the STT token still works once.
  const ok = await open(sttUrl(scribe.token));
  await ok.until((f) => f.message_type === 'session_started');
  ok.ws.close();
  await ok.closed;

  const bogus = await connect(sttUrl('sutkn_made_up'));
  t.ok('status' in bogus && bogus.status === 401, 'an unknown token → 401');
  const handshake = await el.tokens.singleUse.create('tts_websocket');
  const refused = await connect(`${ttsUrl(handshake.token)}&inactivity_timeout=999`);
  t.ok('status' in refused && refused.status === 400, 'a refused handshake answers 400 …');
  const after = await open(ttsUrl(handshake.token));
  t.pass('… and leaves the token unused');
  after.ws.close();
  await after.closed;
});

t.test('batch_scribe tokens authenticate POST /v1/speech-to-text (the client sends ?token=)', async (t) => {
  const { token } = await el.tokens.singleUse.create('batch_scribe');
  const pcm = Buffer.concat([pcmOf('batch token', 16000), Buffer.alloc(32_000)]); // padded past the native 1 s minimum
  const wav = Buffer.concat([Buffer.from(wavHeader(16000, pcm.byteLength)), pcm]);
  const browser = new ElevenLabsClient({ apiKey: 'pk_not_a_key', baseUrl: base, maxRetries: 0 });
  // The SDK sends its (wrong) key header too; the token wins, as with the vendor.
  const out = (await browser.speechToText.convert({ file: new Blob([wav], { type: 'audio/wav' }), modelId: 'scribe_v1', token })) as any;
  t.equal(out.text, 'batch token');
  const err = await browser.speechToText.convert({ file: new Blob([wav], { type: 'audio/wav' }), modelId: 'scribe_v1', token }).then(() => null, (e: any) => e);
  t.ok(err instanceof ElevenLabsError, 'second use refused');
  t.equal(err?.statusCode, 401);
  t.equal(err?.body?.detail?.status, 'unauthorized');
  const keyed = (await el.speechToText.convert({ file: new Blob([wav], { type: 'audio/wav' }), modelId: 'scribe_v1' })) as any;
  t.equal(keyed.text, 'batch token', 'without a token the key still authenticates');
});

t.test('a token dies with its key: revoked or expired after issuing, the token is refused (REST and sockets)', async (t) => {
  const pcm = Buffer.concat([pcmOf('dead key', 16000), Buffer.alloc(32_000)]);
  const wav = Buffer.concat([Buffer.from(wavHeader(16000, pcm.byteLength)), pcm]);
  const stt = (token: string) => {
    const f = new FormData();
    f.set('model_id', 'scribe_v1');
    f.set('file', new Blob([wav], { type: 'audio/wav' }), 'a.wav');
    return fetch(`${base}/v1/speech-to-text?token=${encodeURIComponent(token)}`, { method: 'POST', body: f });
  };
  const issue = async (key: string, type: string) => {
    const r = await fetch(`${base}/v1/single-use-token/${type}`, { method: 'POST', headers: { 'xi-api-key': key } });
    t.equal(r.status, 200, `issued (${type})`);
    return ((await r.json()) as { token: string }).token;
  };
  // Revoked: a key made for the test issues tokens, then is revoked.
  const doomed = await createKey(app.db.sql, app.teamId, { name: 'revoked after issuing' });
  const batch = await issue(doomed.key, 'batch_scribe');
  const live = await issue(doomed.key, 'realtime_scribe');
  const spare = await issue(app.key, 'batch_scribe');
  t.equal(await revokeKey(app.db.sql, doomed.row.id), 1);
  const refused = await stt(batch);
  t.equal(refused.status, 401, 'REST: refused');
  t.same(await refused.json(), { detail: { status: 'unauthorized', message: 'Invalid single-use token: the API key that issued it was revoked or has expired' } });
  const sock = await connect(sttUrl(live));
  t.ok('status' in sock && sock.status === 401, 'socket: refused at the handshake');
  t.equal((await stt(spare)).status, 200, 'a token of a live key still works');
  // Expired: a key that expires a moment after issuing.
  const brief = await createKey(app.db.sql, app.teamId, { name: 'expires', expiresAt: new Date(Date.now() + 1500) });
  const late = await issue(brief.key, 'batch_scribe');
  await new Promise((r) => setTimeout(r, 1600));
  t.equal((await stt(late)).status, 401, 'an expired key\'s token is refused');
});

t.test('issuing: the key is required; an unknown token type → 422 in the vendor field list', async (t) => {
  const noKey = await fetch(`${base}/v1/single-use-token/realtime_scribe`, { method: 'POST' });
  t.equal(noKey.status, 401);
  t.equal(((await noKey.json()) as any).detail.status, 'unauthorized');
  const badKey = await fetch(`${base}/v1/single-use-token/realtime_scribe`, { method: 'POST', headers: { 'xi-api-key': 'pk_nope' } });
  t.equal(badKey.status, 401);
  t.same(((await badKey.json()) as any).detail, { status: 'provider_error', message: 'No permission' });
  const unknown = await fetch(`${base}/v1/single-use-token/conversation`, { method: 'POST', headers: { 'xi-api-key': app.key } });
  t.equal(unknown.status, 422);
  const body = (await unknown.json()) as any;
  t.ok(Array.isArray(body.detail) && body.detail[0].loc.includes('token_type'), 'names token_type');
});

t.test('a token is valid 15 minutes (shared state expiry, clock injected)', async (t) => {
  t.equal(SINGLE_USE_TOKEN_TTL_MS, 15 * 60 * 1000, 'the vendor\'s 15 minutes');
  let now = 1_000_000;
  const state = await createSharedState({ now: () => now });
  t.teardown(() => state.close());
  const principal = { teamId: 'team_x', keyId: 'key_x', betaAccess: true };
  const fresh = await issueSingleUseToken(state, { token_type: 'realtime_scribe' }, principal);
  const stale = await issueSingleUseToken(state, { token_type: 'realtime_scribe' }, principal);
  now += 15 * 60 * 1000 - 1;
  t.same(await redeemSingleUseToken(state, 'realtime_scribe', fresh.token), principal, 'usable just before 15 minutes');
  now += 1;
  const expired = await redeemSingleUseToken(state, 'realtime_scribe', stale.token).then(() => null, (e: unknown) => e as { status?: string; httpStatus?: number });
  t.same({ status: expired?.status, httpStatus: expired?.httpStatus }, { status: 'unauthorized', httpStatus: 401 }, 'expired at 15 minutes');
});
