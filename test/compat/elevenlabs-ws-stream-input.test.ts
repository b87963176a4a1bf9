// Family C realtime input streaming (wss /compat/elevenlabs/v1/text-to-speech/{voice_id}/stream-input),
// driven step by step with a raw `ws` client against a real server and the synthetic engine.
import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { heard, MAGIC, until } from '../speech/tts-helpers.ts';
import { alignmentOf, audioOf, connect, open } from './elevenlabs-ws-helpers.ts';

let app: TestServer;
let wsBase: string;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  wsBase = `${app.url.replace(/^http/, 'ws')}/compat/elevenlabs/v1/text-to-speech`;
});
t.teardown(() => app.close());

const url = (query = '', voice = 'default') => `${wsBase}/${voice}/stream-input${query ? `?${query}` : ''}`;
const key = () => ({ 'xi-api-key': app.key });

t.test('frames: audio with alignment, a trailing alignment-only frame, isFinal without audio, then close 1000', async (t) => {
  const s = await open(url('output_format=pcm_16000&sync_alignment=true&model_id=eleven_flash_v2_5'), key());
  const text = 'Hello there, friend. How are you? ';
  s.send({ text: ' ', voice_settings: { stability: 0.5, similarity_boost: 0.8, speed: 1 }, generation_config: { chunk_length_schedule: [120, 160] } });
  s.send({ text: 'Hello there, friend. ' });
  s.send({ text: 'How are you? ' });
  s.send({ text: '' });
  const { code } = await s.closed;
  t.equal(code, 1000, 'normal close');
  const last = s.frames.at(-1);
  t.same(last, { isFinal: true }, 'the final frame is exactly {isFinal: true}');
  t.notOk('audio' in last, 'no audio key on the final frame');
  const body = s.frames.slice(0, -1);
  t.ok(body.some((f) => typeof f.audio === 'string' && f.alignment), 'audio frames carry alignment');
  for (const f of body) {
    t.ok(typeof f.audio === 'string' || f.alignment, 'every frame has audio or alignment');
    if (f.alignment) {
      t.same(f.normalizedAlignment, f.alignment, 'normalizedAlignment identical to alignment');
      t.same(Object.keys(f.alignment).filter((k) => k !== 'charsDurationsMs').sort(), ['charDurationsMs', 'charStartTimesMs', 'chars'], 'camelCase keys');
      t.same(f.alignment.charsDurationsMs, f.alignment.charDurationsMs, 'older duration spelling carries the same array');
      t.equal(f.alignment.chars.length, f.alignment.charStartTimesMs.length);
    } else t.notOk('normalizedAlignment' in f, 'both alignment keys omitted when empty');
  }
  const trailing = body.filter((f) => !('audio' in f));
  t.ok(trailing.length >= 1, 'a trailing alignment-only frame');
  t.same(trailing.at(-1).alignment.chars, [' '], 'the trailing whitespace');
  const a = alignmentOf(body);
  t.equal(a.chars.join(''), text, 'characters spell the text exactly');
  for (let i = 1; i < a.starts.length; i++) t.ok(a.starts[i]! >= a.starts[i - 1]! + a.durations[i - 1]! - 1, 'in order, milliseconds');
  const audio = audioOf(body);
  t.equal(await heard(audio, 'pcm', 16000), text, 'audio round trip');
  t.ok(a.starts.at(-1)! <= (audio.length / 2 / 16000) * 1000 + 1, 'times within the audio');
});

t.test('the messages LiveKit plugin 0.6.3 sends (top-level chunk_length_schedule, try_trigger_generation false)', async (t) => {
  const s = await open(url('model_id=eleven_turbo_v2&output_format=pcm_16000&optimize_streaming_latency=3&enable_ssml_parsing=false'), key());
  s.send({ text: ' ', voice_settings: { stability: 0.71, similarity_boost: 0.5, style: 0, use_speaker_boost: true }, try_trigger_generation: true, chunk_length_schedule: [] });
  for (const w of ['Hello ', 'from ', 'the ', 'old ', 'plugin. ']) s.send({ text: w, try_trigger_generation: false });
  s.send({ text: '' });
  t.equal((await s.closed).code, 1000);
  t.same(s.frames.at(-1), { isFinal: true }, '"audio" in json is false on the final frame');
  t.equal(await heard(audioOf(s.frames), 'pcm', 16000), 'Hello from the old plugin. ');
});

t.test('without sync_alignment: frames carry audio only', async (t) => {
  const s = await open(url('output_format=pcm_24000'), key());
  s.send({ text: ' ' });
  s.send({ text: 'No timings here. ', flush: true });
  s.send({ text: '' });
  t.equal((await s.closed).code, 1000);
  for (const f of s.frames.slice(0, -1)) t.same(Object.keys(f), ['audio'], 'audio only');
  t.same(s.frames.at(-1), { isFinal: true });
  t.equal(await heard(audioOf(s.frames), 'pcm', 24000), 'No timings here. ');
});

t.test('try_trigger_generation and flush force synthesis before the end; the schedule cuts long text', async (t) => {
  const s = await open(url('output_format=pcm_16000&sync_alignment=true'), key());
  s.send({ text: ' ', try_trigger_generation: true });
  s.send({ text: 'Right now. ', try_trigger_generation: true });
  await s.until((f) => typeof f.audio === 'string');
  t.pass('audio before any end message (try_trigger_generation)');
  s.send({ text: 'Flushed too. ', flush: true });
  await s.until((_f, all) => alignmentOf(all).chars.join('') === 'Right now. Flushed too. ');
  t.pass('flush speaks the buffer');
  // Default schedule [120, 160, 250, 290]: two generations so far, so the next starts at 250
  // buffered characters, cut after the last whitespace.
  const long = 'word '.repeat(52);
  s.send({ text: long + 'tail' });
  await s.until((_f, all) => alignmentOf(all).chars.join('').length >= 'Right now. Flushed too. '.length + long.length);
  t.equal(alignmentOf(s.frames).chars.join(''), 'Right now. Flushed too. ' + long, 'the schedule spoke up to the last whitespace; "tail" waits');
  s.send({ text: '' });
  t.equal((await s.closed).code, 1000);
  t.equal(alignmentOf(s.frames).chars.join(''), 'Right now. Flushed too. ' + long + 'tail');
  t.equal(await heard(audioOf(s.frames), 'pcm', 16000), 'Right now. Flushed too. ' + long + 'tail');
});

t.test('milliseconds are absolute on the session timeline: turn two starts where turn one\'s audio ended', async (t) => {
  const s = await open(url('output_format=pcm_16000&sync_alignment=true'), key());
  const one = 'First turn. ';
  const two = 'Second turn. ';
  s.send({ text: ' ' });
  s.send({ text: one, flush: true });
  await s.until((_f, all) => alignmentOf(all).chars.join('') === one);
  const turnOne = s.frames.length;
  const oneMs = (audioOf(s.frames).length / 2 / 16000) * 1000;
  const first = alignmentOf(s.frames);
  s.send({ text: two, flush: true });
  s.send({ text: '' });
  t.equal((await s.closed).code, 1000);
  const second = alignmentOf(s.frames.slice(turnOne));
  t.equal(second.chars.join(''), two);
  t.ok(second.starts[0]! >= Math.floor(oneMs), 'turn two starts after turn one\'s audio');
  t.ok(Math.abs(second.starts[0]! - oneMs - first.starts[0]!) <= 1, 'turn two is offset by exactly turn one\'s audio duration');
  t.ok(second.starts.at(-1)! <= (audioOf(s.frames).length / 2 / 16000) * 1000 + 1, 'within the whole audio');
  t.equal(await heard(audioOf(s.frames), 'pcm', 16000), one + two, 'both turns decode');
});

t.test('a text buffer over 1 MiB closes the socket with 1009', async (t) => {
  const s = await open(url('output_format=pcm_16000'), key());
  s.send({ text: ' ' });
  s.send({ text: 'x'.repeat(600 * 1024) }); // no whitespace: the schedule cannot cut it
  s.send({ text: 'y'.repeat(500 * 1024) });
  const { code } = await s.closed;
  t.equal(code, 1009, 'close 1009');
  const err = s.frames.find((f) => f.error);
  t.equal(err?.code, 1009, 'error frame names the close code');
  t.notOk(s.frames.some((f) => f.isFinal), 'no isFinal');
  // Exactly 1 MiB is accepted.
  const ok = await open(url('output_format=pcm_16000'), key());
  ok.send({ text: ' ' });
  ok.send({ text: 'z'.repeat(1024 * 1024 - 1) });
  ok.send({ text: 'z' });
  ok.ws.close(1000);
  t.equal((await ok.closed).code, 1000, 'at the limit: still open until the client closes');
  t.notOk(ok.frames.some((f) => f.error), 'no error at exactly 1 MiB');
});

t.test('handshake refusals: invalid output_format and placeholder model_id → HTTP 400 before the upgrade; bad key → 401', async (t) => {
  for (const fmt of ['ulaw_8000', 'alaw_8000', 'nope', 'mp3_44100_320']) {
    const h = await connect(url(`output_format=${fmt}`), key());
    t.ok('status' in h && h.status === 400, `${fmt}: 400`);
    if ('status' in h) t.equal(h.body.detail.status, 'invalid_request', fmt);
  }
  for (const model of ['undefined', 'null', '', 'None', 'tts-1']) {
    const h = await connect(url(`model_id=${model}`), key());
    t.ok('status' in h && h.status === 400, `model_id=${JSON.stringify(model)}: 400`);
    if ('status' in h) t.equal(h.body.detail.status, 'model_not_found');
  }
  const bad = await connect(url(), { 'xi-api-key': 'pk_nope' });
  t.ok('status' in bad && bad.status === 401, 'invalid key header: 401');
  if ('status' in bad) t.same(bad.body, { detail: { status: 'provider_error', message: 'No permission' } });
  const typo = await connect(url(), { ...key(), 'X-Service-Latencyy': 'normal' });
  t.ok('status' in typo && typo.status === 400, 'unknown X-Service- header: 400');
});

t.test('the 22.05 kHz family: a {code: 400} frame after the upgrade, then a normal close', async (t) => {
  for (const fmt of ['pcm_22050', 'mp3_22050_32']) {
    const s = await open(url(`output_format=${fmt}`), key());
    const { code } = await s.closed;
    t.equal(code, 1000, `${fmt}: normal close`);
    t.equal(s.frames.length, 1, 'one frame');
    t.equal(s.frames[0].code, 400, 'code 400');
    t.match(s.frames[0].error, /^Invalid sample rate/, 'the native message');
  }
});

t.test('the key in the first message (xi_api_key, xi-api-key, authorization); none or wrong → 401 frame and close 1008', async (t) => {
  for (const field of [{ xi_api_key: app.key }, { 'xi-api-key': app.key }, { authorization: `Bearer ${app.key}` }]) {
    const s = await open(url('output_format=pcm_16000'));
    s.send({ text: ' ', ...field });
    s.send({ text: 'Keyed. ' });
    s.send({ text: '' });
    t.equal((await s.closed).code, 1000, `${Object.keys(field)[0]}: served`);
    t.equal(await heard(audioOf(s.frames), 'pcm', 16000), 'Keyed. ');
  }
  for (const field of [{}, { xi_api_key: 'pk_wrong' }]) {
    const s = await open(url('output_format=pcm_16000'));
    s.send({ text: ' ', ...field });
    const { code } = await s.closed;
    t.equal(code, 1008, 'policy close');
    t.equal(s.frames[0].code, 401, 'code 401');
  }
});

t.test('a voice that is not the caller\'s: {error: "Reference not found", code: 400} at init, then a normal close', async (t) => {
  const s = await open(url('output_format=pcm_16000', 'voice_nobody_has'), key());
  s.send({ text: ' ' });
  t.equal((await s.closed).code, 1000);
  t.same(s.frames, [{ error: 'Reference not found', code: 400 }]);
});

t.test('reference audio is refused in-band at flush', async (t) => {
  const refs = JSON.stringify([{ audio: Buffer.from('RIFF').toString('base64'), text: 'ref' }]);
  const s = await open(url('output_format=pcm_16000'), { ...key(), 'X-Service-References': refs });
  s.send({ text: ' ' });
  s.send({ text: 'Clone me. ' });
  await new Promise((r) => setTimeout(r, 100));
  t.equal(s.frames.length, 0, 'nothing before the flush');
  s.send({ text: '', flush: true });
  s.send({ text: '' });
  const { code } = await s.closed;
  t.equal(code, 1000);
  t.equal(s.frames[0].code, 400);
  t.match(s.frames[0].error, /Reference audio/);
});

t.test('malformed messages → {code: 400 | 422} and close', async (t) => {
  const s = await open(url(), key());
  s.send('not json');
  t.equal((await s.closed).code, 1000);
  t.equal(s.frames[0].code, 400);
  const v = await open(url(), key());
  v.send({ text: ' ', voice_settings: { stability: 'high' } });
  t.equal((await v.closed).code, 1000);
  t.equal(v.frames[0].code, 422);
});

t.test('round trip: text → stream-input (mp3) → speech-to-text returns the input exactly', async (t) => {
  const text = 'Round trip, through the socket! Numbers 42 and café. ';
  const s = await open(url('output_format=mp3_44100_128&sync_alignment=true'), key());
  s.send({ text: ' ' });
  for (const piece of text.match(/\S+\s*/g)!) s.send({ text: piece });
  s.send({ text: '' });
  t.equal((await s.closed).code, 1000);
  const mp3 = audioOf(s.frames);
  t.ok(MAGIC.mp3!(mp3), 'one mp3 stream');
  t.equal(await heard(mp3, 'mp3'), text, 'synthetic decode');
  const f = new FormData();
  f.append('file', new Blob([new Uint8Array(mp3)], { type: 'audio/mpeg' }), 'a.mp3');
  f.append('model_id', 'scribe_v1');
  const res = await fetch(`${app.url}/compat/elevenlabs/v1/speech-to-text`, { method: 'POST', headers: key(), body: f });
  t.equal(res.status, 200);
  t.equal(((await res.json()) as any).text, text, 'speech to text gives the input back');
  t.equal(alignmentOf(s.frames).chars.join(''), text, 'alignment spells it');
});

t.test('client leaving mid-synthesis cancels the backend call', async (t) => {
  const s = await open(url('output_format=pcm_16000'), key());
  s.send({ text: ' ' });
  s.send({ text: 'A longer sentence that takes a while to speak. '.repeat(20), flush: true });
  await s.until((f) => typeof f.audio === 'string');
  s.ws.terminate();
  await s.closed;
  t.ok(await until(() => app.backend!.stats().activeCalls === 0), 'no backend call left running');
});
