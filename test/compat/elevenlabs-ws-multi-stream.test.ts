// Family C multi-context streaming (wss …/text-to-speech/{voice_id}/multi-stream-input), driven the
// way the LiveKit ElevenLabs plugin 1.x drives it (docs/api/compat.md "Clients"), with a raw `ws` client.
import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { heard } from '../speech/tts-helpers.ts';
import { alignmentOf, audioOf, connect, open } from './elevenlabs-ws-helpers.ts';

let app: TestServer;
let base: string;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  base = `${app.url.replace(/^http/, 'ws')}/compat/elevenlabs/v1/text-to-speech/default/multi-stream-input`;
});
t.teardown(() => app.close());

// The query LiveKit 1.9 sends.
const LIVEKIT_QUERY = 'model_id=eleven_flash_v2_5&output_format=pcm_16000&enable_ssml_parsing=false&enable_logging=true&inactivity_timeout=180&apply_text_normalization=auto&sync_alignment=true&auto_mode=true';
const key = () => ({ 'xi-api-key': app.key });
const of = (frames: any[], id: string) => frames.filter((f) => f.contextId === id);

t.test('LiveKit sequence: init, text with flush, empty flush, close_context → isFinal per context; the socket stays open', async (t) => {
  const s = await open(`${base}?${LIVEKIT_QUERY}`, key());
  const texts = { 'ctx-a': 'Hello world. How are you? ', 'ctx-b': 'Second context here. ' };
  for (const [id, text] of Object.entries(texts)) {
    s.send({ text: ' ', voice_settings: {}, context_id: id });
    s.send({ text, context_id: id, flush: true });
    s.send({ text: '', context_id: id, flush: true });
    s.send({ context_id: id, close_context: true });
    const final = await s.until((f) => f.isFinal && f.contextId === id);
    t.same(final, { isFinal: true, contextId: id }, `${id}: isFinal with its contextId, no audio key`);
    const frames = of(s.frames, id);
    t.equal(frames.at(-1), final, `${id}: isFinal is the context's last frame`);
    for (const f of frames.slice(0, -1)) {
      t.ok(typeof f.audio === 'string' || f.alignment, 'audio or alignment');
      if (f.alignment) t.same(f.normalizedAlignment, f.alignment, 'normalizedAlignment identical');
    }
    t.equal(alignmentOf(frames).chars.join(''), text, `${id}: alignment spells the text`);
    t.equal(await heard(audioOf(frames), 'pcm', 16000), text, `${id}: audio round trip`);
  }
  t.ok(s.frames.every((f) => f.contextId), 'every frame names its context');
  // Each context has its own timeline from 0: both start with the same preamble.
  t.equal(alignmentOf(of(s.frames, 'ctx-a')).starts[0], alignmentOf(of(s.frames, 'ctx-b')).starts[0], 'a new context starts at 0');
  s.send({ close_socket: true });
  t.equal((await s.closed).code, 1000, 'close_socket closes normally');
});

t.test('two contexts at once, keep-alive, close_socket flushes open contexts', async (t) => {
  const s = await open(`${base}?output_format=pcm_24000`, key());
  s.send({ text: ' ', context_id: 'one' });
  s.send({ text: ' ', context_id: 'two' });
  s.send({ text: 'Context one speaks. ', context_id: 'one' });
  s.send({ text: 'Context two ', context_id: 'two' });
  s.send({ text: '', context_id: 'one' }); // keep-alive: nothing happens
  s.send({ text: 'speaks too. ', context_id: 'two', flush: true });
  s.send({ text: 'And more. ', context_id: 'one', flush: true });
  s.send({ close_socket: true });
  t.equal((await s.closed).code, 1000);
  for (const [id, text] of [['one', 'Context one speaks. And more. '], ['two', 'Context two speaks too. ']] as const) {
    const frames = of(s.frames, id);
    t.same(frames.at(-1), { isFinal: true, contextId: id }, `${id}: isFinal last`);
    t.equal(await heard(audioOf(frames), 'pcm', 24000), text, `${id}: its own audio`);
    t.notOk(frames.some((f) => f.alignment), 'no alignment without sync_alignment');
  }
});

t.test('a context id can be reused after close_context; the default context has no contextId', async (t) => {
  const s = await open(`${base}?output_format=pcm_16000&sync_alignment=true`, key());
  s.send({ text: ' ', context_id: 'x' });
  s.send({ text: 'First use. ', context_id: 'x' });
  s.send({ context_id: 'x', close_context: true });
  await s.until((f) => f.isFinal && f.contextId === 'x');
  const firstCount = s.frames.length;
  s.send({ text: ' ', context_id: 'x' });
  s.send({ text: 'Second use. ', context_id: 'x' });
  s.send({ context_id: 'x', close_context: true });
  await s.until((f, all) => f.isFinal && all.indexOf(f) >= firstCount);
  const second = s.frames.slice(firstCount);
  t.equal(alignmentOf(second).chars.join(''), 'Second use. ', 'a fresh context');
  t.equal(alignmentOf(second).starts[0], alignmentOf(s.frames.slice(0, firstCount)).starts[0], 'its timeline starts at 0 again');
  s.send({ text: ' ' });
  s.send({ text: 'Default context. ', flush: true });
  s.send({ close_socket: true });
  t.equal((await s.closed).code, 1000);
  const dflt = s.frames.filter((f) => !('contextId' in f));
  t.same(dflt.at(-1), { isFinal: true }, 'default context: isFinal without contextId');
  t.equal(await heard(audioOf(dflt), 'pcm', 16000), 'Default context. ');
});

t.test('a failing context gets {error, code, contextId}; the socket and other contexts go on', async (t) => {
  const refs = JSON.stringify([{ audio: Buffer.from('RIFF').toString('base64'), text: 'ref' }]);
  const s = await open(`${base}?output_format=pcm_16000`, { ...key(), 'X-Service-References': refs });
  s.send({ text: ' ', context_id: 'bad' });
  s.send({ text: 'Refused. ', context_id: 'bad', flush: true });
  const err = await s.until((f) => f.error);
  t.equal(err.code, 400);
  t.equal(err.contextId, 'bad');
  t.match(err.error, /Reference audio/);
  s.send({ close_socket: true });
  t.equal((await s.closed).code, 1000, 'still open until close_socket');
});

t.test('a context buffer over 1 MiB closes the socket with 1009', async (t) => {
  const s = await open(`${base}?output_format=pcm_16000`, key());
  s.send({ text: ' ', context_id: 'big' });
  s.send({ text: 'x'.repeat(1024 * 1024 + 1), context_id: 'big' });
  t.equal((await s.closed).code, 1009);
  t.equal(s.frames.find((f) => f.error)?.code, 1009);
});

t.test('handshake and in-band format rules are those of stream-input', async (t) => {
  const h = await connect(`${base}?output_format=ulaw_8000`, key());
  t.ok('status' in h && h.status === 400, 'ulaw: HTTP 400');
  const m = await connect(`${base}?model_id=undefined`, key());
  t.ok('status' in m && m.status === 400, 'placeholder model_id: HTTP 400');
  const s = await open(`${base}?output_format=pcm_22050`, key());
  t.equal((await s.closed).code, 1000);
  t.equal(s.frames[0].code, 400, '22.05 kHz: in-band 400');
  const k = await open(`${base}?output_format=pcm_16000`);
  k.send({ text: ' ', context_id: 'c', xi_api_key: app.key });
  k.send({ text: 'Key in the message. ', context_id: 'c' });
  k.send({ context_id: 'c', close_context: true });
  await k.until((f) => f.isFinal);
  t.equal(await heard(audioOf(k.frames), 'pcm', 16000), 'Key in the message. ');
  k.ws.close();
  await k.closed;
});
