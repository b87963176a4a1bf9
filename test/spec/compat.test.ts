// Spec coverage (docs/spec-coverage.md, "Compatibility layer"): rules of the speech specification's
// compatibility layer that no other test named.
import t from 'tap';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { int16ToPcmBytes, wavHeader } from '../../src/audio/index.ts';
import { translateTts } from '../../src/compat/elevenlabs/tts.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let app: TestServer;
let base: string;
/** Transcribe configs the backend received, in order. */
const transcribeConfigs: { language: string }[] = [];
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic', backendOptions: { onCall: (c) => { if (c.rpc === 'transcribe' && c.request) transcribeConfigs.push(c.request as { language: string }); } } });
  base = `${app.url}/compat/elevenlabs`;
});
t.teardown(() => app.close());

t.test('voice ids: "Vendor preset names do not exist" (family C): synthesis 400 provider_error Reference not found, lookup 404 voice_not_found', async (t) => {
  // Well-known preset voice ids and a preset display name of the vendor.
  for (const preset of ['21m00Tcm4TlvDq8ikWAM', 'EXAVITQu4vr4xnSDxMaL', 'Rachel']) {
    const synth = await fetch(`${base}/v1/text-to-speech/${preset}?output_format=pcm_16000`, {
      method: 'POST',
      headers: { 'xi-api-key': app.key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ text: 'Preset check.' }),
    });
    t.equal(synth.status, 400, `${preset}: synthesis refused`);
    t.same(await synth.json(), { detail: { status: 'provider_error', message: 'Reference not found' } }, `${preset}: the native message passed through`);
    const lookup = await fetch(`${base}/v1/voices/${preset}`, { headers: { 'xi-api-key': app.key } });
    t.equal(lookup.status, 404, `${preset}: lookup`);
    t.equal(((await lookup.json()) as { detail: { status: string } }).detail.status, 'voice_not_found', `${preset}: voice_not_found`);
  }
  const list = (await (await fetch(`${base}/v1/voices`, { headers: { 'xi-api-key': app.key } })).json()) as { voices: { voice_id: string; name: string }[] };
  t.same(list.voices.filter((v) => v.voice_id === '21m00Tcm4TlvDq8ikWAM' || v.name === 'Rachel'), [], 'no preset in the caller\'s library');
});

// Service level: the synthetic engine ignores temperature, so the mapping is asserted on the
// native request the route builds (translateTts is what POST /v1/text-to-speech/{voice_id} calls).
t.test('voice_settings.stability "becomes temperature = 1 − stability" in the native request; X-Service-Temperature wins', async (t) => {
  for (const [stability, temperature] of [[0, 1], [0.3, 0.7], [0.5, 0.5], [1, 0]] as const) {
    t.equal(translateTts({ text: 'x', voice_settings: { stability } }, 'default', undefined, {}).body.temperature, temperature, `stability ${stability}`);
  }
  t.notOk('temperature' in translateTts({ text: 'x' }, 'default', undefined, {}).body, 'no stability: the native default applies');
  t.equal(translateTts({ text: 'x', voice_settings: { stability: 0.3 } }, 'default', undefined, { 'x-service-temperature': '0.2' }).body.temperature, 0.2, 'header > mapped');
});

t.test('speech to text: "`language_code` forwarded to recognition" (family C, POST /v1/speech-to-text)', async (t) => {
  const pcm = int16ToPcmBytes(encodeText('hallo welt, wie geht es dir heute', { sampleRateHz: 16000 }).pcm);
  const wav = Buffer.concat([wavHeader(16000, pcm.length), pcm]);
  for (const [code, expected] of [['de', 'de'], [undefined, '']] as const) {
    const f = new FormData();
    f.set('model_id', 'scribe_v1');
    if (code) f.set('language_code', code);
    f.set('file', new Blob([new Uint8Array(wav)], { type: 'audio/wav' }), 'a.wav');
    const before = transcribeConfigs.length;
    const res = await fetch(`${base}/v1/speech-to-text`, { method: 'POST', headers: { 'xi-api-key': app.key }, body: f });
    t.equal(res.status, 200);
    const body = (await res.json()) as { text: string; language_code: string };
    t.equal(body.text, 'hallo welt, wie geht es dir heute');
    t.equal(body.language_code, expected, 'echoed');
    t.equal(transcribeConfigs.length, before + 1, 'one recognition');
    t.equal(transcribeConfigs[before]!.language, expected, `recognition asked for ${JSON.stringify(expected)}`);
  }
});
