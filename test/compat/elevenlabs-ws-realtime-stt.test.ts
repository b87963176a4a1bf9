// Family C realtime speech to text (wss /compat/elevenlabs/v1/speech-to-text/realtime): raw `ws`
// step by step, the official @elevenlabs/elevenlabs-js realtime client, and a text → speech →
// text round trip through stream-input and this socket.
import t from 'tap';
import { AudioFormat, CommitStrategy, ElevenLabsClient, RealtimeEvents } from '@elevenlabs/elevenlabs-js';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { int16ToPcmBytes } from '../../src/audio/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { audioOf, connect, open } from './elevenlabs-ws-helpers.ts';

let app: TestServer;
let wsBase: string;
/** Transcribe configs the backend received, in order. */
const transcribeConfigs: { language: string }[] = [];
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic', backendOptions: { onCall: (c) => { if (c.rpc === 'transcribe' && c.request) transcribeConfigs.push(c.request as { language: string }); } } });
  wsBase = `${app.url.replace(/^http/, 'ws')}/compat/elevenlabs/v1`;
});
t.teardown(() => app.close());

const url = (query = '') => `${wsBase}/speech-to-text/realtime${query ? `?${query}` : ''}`;
const key = () => ({ 'xi-api-key': app.key });
const pcmOf = (text: string, rate: number) => Buffer.from(int16ToPcmBytes(encodeText(text, { sampleRateHz: rate }).pcm));
const chunk = (audio: Buffer, commit = false) => ({ message_type: 'input_audio_chunk', audio_base_64: audio.toString('base64'), commit, sample_rate: 16000 });

t.test('handshake refusals: commit_strategy=vad, non-pcm audio_format, X-Service- headers → 400; no key → 401', async (t) => {
  for (const [query, what] of [
    ['commit_strategy=vad', 'vad'],
    ['commit_strategy=auto', 'unknown strategy'],
    ['audio_format=ulaw_8000', 'ulaw_8000'],
    ['audio_format=mp3_44100_128', 'mp3'],
    ['audio_format=pcm_abc', 'unparsable pcm'],
    ['audio_format=pcm_1000', 'rate out of range'],
  ]) {
    const h = await connect(url(query), key());
    t.ok('status' in h && h.status === 400, `${what}: 400 before the upgrade`);
    if ('status' in h) t.equal(h.body.detail.status, 'invalid_request', what);
  }
  const native = await connect(url(), { ...key(), 'X-Service-Latency': 'normal' });
  t.ok('status' in native && native.status === 400, 'native parameter headers: 400');
  const none = await connect(url());
  t.ok('status' in none && none.status === 401, 'no key: 401');
  if ('status' in none) t.equal(none.body.detail.status, 'unauthorized');
  const bad = await connect(url(), { 'xi-api-key': 'pk_nope' });
  t.ok('status' in bad && bad.status === 401, 'bad key: 401');
  if ('status' in bad) t.same(bad.body.detail, { status: 'provider_error', message: 'No permission' });
});

t.test('session_started first; per commit committed_transcript then committed_transcript_with_timestamps; other shapes ignored', async (t) => {
  const s = await open(url('model_id=scribe_v2_realtime&commit_strategy=manual&language_code=en'), key());
  const started = await s.until((f) => f.message_type === 'session_started');
  t.equal(s.frames[0], started, 'session_started is the first message');
  t.equal(started.config.audio_format, 'pcm_16000', 'default pcm_16000');
  t.equal(started.config.sample_rate, 16000);
  t.equal(started.config.commit_strategy, 'manual');
  t.type(started.session_id, 'string');
  const one = pcmOf('first commit here', 16000);
  // Ignored shapes: not JSON, no message_type, other types, a chunk without audio.
  s.send('garbage');
  s.send({ hello: 1 });
  s.send({ message_type: 'session.update', audio_base_64: one.toString('base64') });
  s.send({ message_type: 'input_audio_chunk' });
  for (let at = 0; at < one.length; at += 3200) s.send(chunk(one.subarray(at, at + 3200)));
  s.send(chunk(Buffer.alloc(0), true));
  const committed = await s.until((f) => f.message_type === 'committed_transcript_with_timestamps');
  // Partial transcripts may come before the commit (see the partial_transcript test); apart from them:
  const kinds = s.frames.map((f) => f.message_type).filter((k) => k !== 'partial_transcript');
  t.same(kinds, ['session_started', 'committed_transcript', 'committed_transcript_with_timestamps'], 'exactly these messages, in this order');
  t.equal(s.frames.find((f) => f.message_type === 'committed_transcript').text, 'first commit here', 'committed_transcript text');
  t.equal(committed.text, 'first commit here');
  t.equal(committed.language_code, 'en', 'language_code echoed');
  t.same(committed.words.map((w: any) => w.text).join(''), 'first commit here', 'words and spacing spell the text');
  t.ok(committed.words.every((w: any) => typeof w.start === 'number' && typeof w.end === 'number' && w.logprob === 0 && (w.type === 'word' || w.type === 'spacing')), 'word shape');
  // Second commit: times continue on the session's audio timeline.
  const oneS = one.length / 2 / 16000;
  const timed = () => s.frames.filter((f) => f.message_type === 'committed_transcript_with_timestamps');
  s.send(chunk(pcmOf('second', 16000), true));
  await s.until(() => timed().length === 2);
  const second = timed()[1];
  t.equal(second.text, 'second');
  t.ok(second.words[0].start >= oneS, 'second commit\'s words start after the first commit\'s audio');
  // An empty commit answers with empty text.
  s.send(chunk(Buffer.alloc(0), true));
  await s.until(() => timed().length === 3);
  t.equal(timed()[2].text, '');
  t.same(timed()[2].words, []);
  s.ws.close();
  await s.closed;
});

t.test('partial_transcript: while audio arrives, the current segment\'s text so far; a commit starts the next segment', async (t) => {
  const s = await open(url(), key());
  await s.until((f) => f.message_type === 'session_started');
  const partials = () => s.frames.filter((f) => f.message_type === 'partial_transcript').map((f) => f.text as string);
  // Audio in real-time-sized pieces, no commit: partials grow as it is recognized.
  const first = pcmOf('live words here', 16000);
  for (let at = 0; at < first.length; at += 3200) s.send(chunk(first.subarray(at, at + 3200)));
  await s.until(() => partials().includes('live words here'));
  const one = partials();
  t.ok(one.length >= 2, `several partials (${one.length})`);
  t.ok(one.every((p) => 'live words here'.startsWith(p) && p.length > 0), 'each is the segment so far');
  t.ok(one.every((p, i) => i === 0 || p.length > one[i - 1]!.length), 'each one longer than the last (no repeats)');
  t.notOk(s.frames.some((f) => f.message_type === 'committed_transcript'), 'nothing committed without a commit');
  s.send(chunk(Buffer.alloc(0), true));
  t.equal((await s.until((f) => f.message_type === 'committed_transcript')).text, 'live words here');
  // The next segment's partials start from nothing: none carries the committed text.
  const before = partials().length;
  const next = pcmOf('then more', 16000);
  for (let at = 0; at < next.length; at += 3200) s.send(chunk(next.subarray(at, at + 3200)));
  await s.until(() => partials().includes('then more'));
  const two = partials().slice(before);
  t.ok(two.every((p) => 'then more'.startsWith(p)), `the second segment's partials: ${JSON.stringify(two)}`);
  s.ws.close();
  await s.closed;
});

t.test('language_code is forwarded to recognition (and echoed); without it, no language is sent', async (t) => {
  for (const [query, expected] of [['language_code=de', 'de'], ['', '']] as const) {
    const s = await open(url(query), key());
    const before = transcribeConfigs.length;
    s.send(chunk(pcmOf('guten tag', 16000), true));
    const c = await s.until((f) => f.message_type === 'committed_transcript_with_timestamps');
    t.equal(c.language_code, expected || null, `echoed: ${JSON.stringify(expected || null)}`);
    t.equal(transcribeConfigs.length, before + 1, 'one recognition per commit');
    t.equal(transcribeConfigs[before]!.language, expected, `recognition asked for ${JSON.stringify(expected)}`);
    s.ws.close();
    await s.closed;
  }
});

t.test('audio_format sets the rate: pcm_8000 and pcm_44100 transcribe; a mismatched rate is not refused', async (t) => {
  for (const rate of [8000, 44100]) {
    const s = await open(url(`audio_format=pcm_${rate}`), key());
    s.send(chunk(pcmOf('rate check', rate), true));
    const c = await s.until((f) => f.message_type === 'committed_transcript');
    t.equal(c.text, 'rate check', `pcm_${rate}`);
    s.ws.close();
    await s.closed;
  }
  // A mismatch is not detected by this layer: the samples go to recognition as if at the
  // handshake's rate. (The synthetic engine cannot read them; without a speech-to-text provider
  // its recognizer then refuses them, an input error, instead of giving a wrong transcript.)
  const s = await open(url('audio_format=pcm_16000'), key());
  s.send(chunk(pcmOf('mismatched rate', 24000), true));
  const c = await s.until((f) => f.message_type === 'committed_transcript' || /error/.test(f.message_type));
  t.not(c.text, 'mismatched rate', 'not the spoken text');
  s.send(chunk(pcmOf('right rate', 16000), true));
  t.equal((await s.until((f) => f.message_type === 'committed_transcript' && f.text === 'right rate')).text, 'right rate', 'the session goes on');
  s.ws.close();
  await s.closed;
});

t.test('more than 100 MiB of uncommitted audio → input_error; the append is dropped and the socket stays open', async (t) => {
  const s = await open(url(), key());
  await s.until((f) => f.message_type === 'session_started');
  const twenty = Buffer.alloc(20 * 1024 * 1024).toString('base64');
  for (let i = 0; i < 5; i++) s.send({ message_type: 'input_audio_chunk', audio_base_64: twenty, commit: false });
  s.send(chunk(Buffer.alloc(2)));
  const err = await s.until((f) => f.message_type === 'input_error', 60_000);
  t.match(err.error, /100 MiB/);
  // Still open: the 100 MiB commit is refused by recognition (it is one message), then a normal commit works.
  s.send(chunk(Buffer.alloc(0), true));
  await s.until((f, all) => all.filter((x) => /error/.test(x.message_type)).length >= 2, 60_000);
  s.send(chunk(pcmOf('still here', 16000), true));
  const ok = await s.until((f) => f.message_type === 'committed_transcript');
  t.equal(ok.text, 'still here', 'the socket stayed open and the buffer was cleared by the commit');
  s.ws.close();
  await s.closed;
});

t.test('a frame over 32 MiB closes the socket', async (t) => {
  const s = await open(url(), key());
  await s.until((f) => f.message_type === 'session_started');
  s.send({ message_type: 'input_audio_chunk', audio_base_64: 'A'.repeat(32 * 1024 * 1024 + 16) });
  const { code } = await s.closed;
  t.not(code, 1000, `closed by the server (${code})`);
});

t.test('the official elevenlabs-js realtime client', async (t) => {
  const el = new ElevenLabsClient({ apiKey: app.key, baseUrl: `${app.url}/compat/elevenlabs`, maxRetries: 0 });
  const conn = await el.speechToText.realtime.connect({ modelId: 'scribe_v2_realtime', audioFormat: AudioFormat.PCM_16000, sampleRate: 16000, commitStrategy: CommitStrategy.MANUAL, includeTimestamps: true });
  const committed = new Promise<any>((r) => conn.on(RealtimeEvents.COMMITTED_TRANSCRIPT, r));
  const timed = new Promise<any>((r) => conn.on(RealtimeEvents.COMMITTED_TRANSCRIPT_WITH_TIMESTAMPS, r));
  const partials: string[] = [];
  const heardAll = new Promise<void>((r) => conn.on(RealtimeEvents.PARTIAL_TRANSCRIPT, (m: any) => { partials.push(m.text); if (m.text === 'Official client, hello!') r(); }));
  const closed = new Promise<void>((r) => conn.on(RealtimeEvents.CLOSE, () => r()));
  const errors: unknown[] = [];
  conn.on(RealtimeEvents.ERROR, (e) => errors.push(e));
  conn.on(RealtimeEvents.SESSION_STARTED, () => {
    const pcm = pcmOf('Official client, hello!', 16000);
    for (let at = 0; at < pcm.length; at += 1600) conn.send({ audioBase64: pcm.subarray(at, at + 1600).toString('base64') });
    // The commit once the live partials have caught up (a real client commits at a pause).
    void heardAll.then(() => conn.commit());
  });
  await heardAll;
  t.ok(partials.length >= 2 && partials.every((p) => 'Official client, hello!'.startsWith(p)), 'PARTIAL_TRANSCRIPT: the text so far');
  t.equal((await committed).text, 'Official client, hello!', 'COMMITTED_TRANSCRIPT');
  const w = await timed;
  t.equal(w.text, 'Official client, hello!', 'COMMITTED_TRANSCRIPT_WITH_TIMESTAMPS');
  t.ok(w.words.length >= 3, 'with words');
  conn.close();
  await closed;
  t.same(errors, [], 'no errors');
});

t.test('round trip: text → stream-input (pcm_16000) → realtime speech to text returns the input exactly', async (t) => {
  const text = 'The quick brown fox, 12 times! Ünïcödé too. ';
  const tts = await open(`${wsBase}/text-to-speech/default/stream-input?output_format=pcm_16000`, key());
  tts.send({ text: ' ' });
  for (const piece of text.match(/\S+\s*/g)!) tts.send({ text: piece });
  tts.send({ text: '' });
  t.equal((await tts.closed).code, 1000);
  const pcm = audioOf(tts.frames);
  const stt = await open(url('audio_format=pcm_16000'), key());
  for (let at = 0; at < pcm.length; at += 8000) stt.send(chunk(pcm.subarray(at, at + 8000)));
  stt.send(chunk(Buffer.alloc(0), true));
  const c = await stt.until((f) => f.message_type === 'committed_transcript');
  t.equal(c.text, text, 'exactly the input');
  stt.ws.close();
  await stt.closed;
});
