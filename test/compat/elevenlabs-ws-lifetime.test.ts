// Family C socket clocks: the connection lifetime (docs/api/compat.md: 3600 s) on stream-input,
// multi-stream-input and realtime STT, and the vendor's `inactivity_timeout` (seconds,
// default 20, at most 180) on the two synthesis sockets. The family C routes are mounted
// here on a second server with shortened clocks (lifetime 3 s; one second of
// inactivity_timeout lasts 40 ms), over the test platform's store, state and native backend.
import t from 'tap';
import { KeyVerifier } from '../../src/auth/keys.ts';
import { mountElevenLabsRoutes } from '../../src/compat/elevenlabs/routes.ts';
import { INACTIVITY_CLOSE, LIFETIME_CLOSE, WS_LIFETIME_MS } from '../../src/compat/elevenlabs/ws-socket.ts';
import { INACTIVITY_TIMEOUT_S } from '../../src/compat/elevenlabs/ws-stream-input.ts';
import { HttpApp } from '../../src/http/app.ts';
import { createLogger } from '../../src/log.ts';
import { AsrService } from '../../src/speech/asr.ts';
import { TtsService } from '../../src/speech/tts.ts';
import { resolveVoice } from '../../src/voices/service.ts';
import { Metrics } from '../../src/telemetry/metrics.ts';
import { startTracing } from '../../src/telemetry/tracing.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { heard } from '../speech/tts-helpers.ts';
import { audioOf, connect, open } from './elevenlabs-ws-helpers.ts';

const LIFETIME_MS = 3000;
const SECOND_MS = 40;

let app: TestServer;
let http: HttpApp;
let wsBase: string;
let authGate: Promise<void> | undefined;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  const log = createLogger({ level: 'silent' });
  const tracing = startTracing({ env: {} });
  const verifier = new KeyVerifier(app.db.sql);
  // A key sent in a socket's first message is checked when that message is handled; a test
  // holds that check with `authGate` to make the first message slow.
  const authenticate = async (token: string, messages: { invalid: string; expired: string }) => {
    await authGate;
    return verifier.verify(token, messages);
  };
  http = new HttpApp({ log, metrics: new Metrics(), authenticate });
  const tts = new TtsService({ inference: app.inference, sql: app.db.sql, log, tracing, resolveVoice: (teamId, id) => resolveVoice(app.db.sql, teamId, id), authenticate });
  const asr = new AsrService(app.inference, { log });
  mountElevenLabsRoutes(http, { tts, asr, sql: app.db.sql, log, state: app.state, authenticate, timers: { lifetimeMs: LIFETIME_MS, secondMs: SECOND_MS } });
  const port = await http.listen('127.0.0.1', 0);
  wsBase = `ws://127.0.0.1:${port}/compat/elevenlabs/v1`;
  t.teardown(async () => {
    await http.close();
    await tracing.shutdown();
    await app.close();
  });
});

const key = () => ({ 'xi-api-key': app.key });
const tts = (kind: 'stream-input' | 'multi-stream-input', query = '') => `${wsBase}/text-to-speech/default/${kind}?output_format=pcm_16000${query ? `&${query}` : ''}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('the limits: lifetime 3600 s; inactivity_timeout default 20 s, at most 180 s', async (t) => {
  t.equal(WS_LIFETIME_MS, 3600 * 1000);
  t.same(INACTIVITY_TIMEOUT_S, { default: 20, min: 1, max: 180 });
  t.same(LIFETIME_CLOSE, { code: 1000, reason: 'connection lifetime reached' });
  t.same(INACTIVITY_CLOSE, { code: 1000, reason: 'inactivity timeout' });
});

t.test('connection lifetime reached: every socket says so in-band, then closes 1000 "connection lifetime reached"', async (t) => {
  // inactivity_timeout=180 (7.2 s here) outlasts the lifetime (3 s here).
  const [single, multi, stt] = await Promise.all([
    open(tts('stream-input', 'inactivity_timeout=180'), key()),
    open(tts('multi-stream-input', 'inactivity_timeout=180'), key()),
    open(`${wsBase}/speech-to-text/realtime?model_id=scribe_v2_realtime`, key()),
  ]);
  single.send({ text: ' ' });
  multi.send({ text: ' ', context_id: 'a' });
  const [a, b, c] = await Promise.all([single.closed, multi.closed, stt.closed]);
  for (const [end, what] of [[a, 'stream-input'], [b, 'multi-stream-input'], [c, 'realtime STT']] as const) {
    t.same(end, { code: 1000, reason: 'connection lifetime reached' }, `${what}: normal close, clear reason`);
  }
  t.match(single.frames, [{ error: /lifetime/, code: 1000 }], 'stream-input: one error frame');
  t.equal(single.frames.length, 1);
  t.match(multi.frames, [{ error: /lifetime/, code: 1000 }], 'multi-stream-input: one error frame');
  t.equal(multi.frames.length, 1);
  t.same(stt.frames.map((f) => f.message_type), ['session_started', 'session_time_limit_exceeded'], 'realtime STT: the vendor kind');
  t.match(stt.frames[1], { error: /lifetime/ });
});

t.test('inactivity_timeout out of range or not an integer → 400 invalid_request before the upgrade', async (t) => {
  for (const kind of ['stream-input', 'multi-stream-input'] as const) {
    for (const v of ['0', '181', '-5', '1.5', 'abc', '20s']) {
      const h = await connect(tts(kind, `inactivity_timeout=${v}`), key());
      t.ok('status' in h && h.status === 400, `${kind} inactivity_timeout=${v}: 400`);
      if ('status' in h) t.equal(h.body.detail.status, 'invalid_request');
    }
  }
});

t.test('stream-input: no message for the default 20 s → close 1000 "inactivity timeout", no frame', async (t) => {
  const s = await open(tts('stream-input'), key());
  s.send({ text: ' ' });
  t.same(await s.closed, { code: 1000, reason: 'inactivity timeout' });
  t.same(s.frames, [], 'nothing sent');
  const bare = await open(tts('stream-input', 'inactivity_timeout=1'), key());
  t.same(await bare.closed, { code: 1000, reason: 'inactivity timeout' }, 'also before the first message');
});

t.test('stream-input: after the finishing empty text the socket waits for the audio, whatever the timeout', async (t) => {
  const s = await open(tts('stream-input', 'inactivity_timeout=1'), key());
  s.send({ text: ' ' });
  s.send({ text: 'Wait for me. ' });
  s.send({ text: '' });
  t.same(await s.closed, { code: 1000, reason: 'done' });
  t.same(s.frames.at(-1), { isFinal: true });
  t.equal(await heard(audioOf(s.frames), 'pcm', 16000), 'Wait for me. ');
});

t.test('stream-input: messages that came in time count, even while the first is slow to handle', async (t) => {
  // The key comes in the first message and its check is held here: the text and the finishing
  // empty text wait behind it while the inactivity time (40 ms) passes many times over.
  let release!: () => void;
  authGate = new Promise((r) => (release = r));
  t.teardown(() => release());
  const s = await open(tts('stream-input', 'inactivity_timeout=1'));
  s.send({ text: ' ', xi_api_key: app.key });
  s.send({ text: 'Wait for me. ' });
  s.send({ text: '' });
  await sleep(10 * SECOND_MS); // not a measurement: only lets the inactivity clock run out meanwhile
  release();
  t.same(await s.closed, { code: 1000, reason: 'done' }, 'the finishing empty text was honoured');
  t.same(s.frames.at(-1), { isFinal: true });
  t.equal(await heard(audioOf(s.frames), 'pcm', 16000), 'Wait for me. ');
});

t.test('stream-input: a message that came while the process stalled counts', async (t) => {
  // inactivity_timeout=5: 200 ms here. The process stalls for three of them right after the
  // client sent: the inactivity timer is then due before the server has read the messages.
  const s = await open(tts('stream-input', 'inactivity_timeout=5'), key());
  s.send({ text: ' ' });
  s.send({ text: 'Still here. ' });
  s.send({ text: '' });
  const until = Date.now() + 15 * SECOND_MS;
  while (Date.now() < until); // blocks this process's event loop on purpose (not a measurement)
  t.same(await s.closed, { code: 1000, reason: 'done' }, 'not closed for inactivity');
  t.same(s.frames.at(-1), { isFinal: true });
  t.equal(await heard(audioOf(s.frames), 'pcm', 16000), 'Still here. ');
});

t.test('multi-stream-input: {text: "", context_id} keeps the socket alive; then idle → close 1000 "inactivity timeout"', async (t) => {
  // inactivity_timeout=5: 200 ms here. Keep-alives every 40 ms for 800 ms (four timeouts).
  const m = await open(tts('multi-stream-input', 'inactivity_timeout=5'), key());
  let closedEarly = false;
  void m.closed.then(() => (closedEarly = true));
  m.send({ text: ' ', context_id: 'c1' });
  for (let i = 0; i < 20; i++) {
    await sleep(SECOND_MS);
    m.send({ text: '', context_id: 'c1' });
  }
  t.notOk(closedEarly, 'still open after four timeouts of keep-alives');
  m.send({ text: 'Still here. ', context_id: 'c1', flush: true });
  m.send({ context_id: 'c1', close_context: true });
  await m.until((f) => f.isFinal === true && f.contextId === 'c1');
  t.equal(await heard(audioOf(m.frames), 'pcm', 16000), 'Still here. ', 'the kept context still speaks');
  t.same(await m.closed, { code: 1000, reason: 'inactivity timeout' }, 'then idle: normal close');
  t.notOk(m.frames.some((f) => 'error' in f), 'no error frame');
});
