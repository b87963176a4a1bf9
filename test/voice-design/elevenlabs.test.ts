// Voice design mapped to an ElevenLabs speech provider (the native backend's provider engine),
// end to end through the platform: POST /v1/voice-design asks the provider's text-to-voice
// design, saving a candidate keeps it in the provider's voice library, and /v1/tts then names
// that library voice. The provider is a local stand-in (test/fixtures/elevenlabs-voice-library.ts).
import t from 'tap';
import { decodeAudio } from '../../src/audio/index.ts';
import { AUTO_TEXT, DEFAULT_VOICE_HZ, previewHz, startVoiceLibrary } from '../fixtures/elevenlabs-voice-library.ts';
import { medianF0 } from '../helpers/pitch.ts';
import { startTestServer } from '../helpers/server.ts';
import { flushUsage } from '../../src/speech/usage.ts';

const KEY = 'xi-voice-library-secret';
const library = await startVoiceLibrary();
const app = await startTestServer({
  backend: 'synthetic',
  backendOptions: { providers: { tts: { kind: 'elevenlabs', baseUrl: library.base, apiKey: KEY, model: 'eleven_flash_v2_5', voice: 'fixture-default' }, firstByteTimeoutMs: 5000 } },
});
t.teardown(async () => {
  await app.close();
  await library.close();
});

t.test('design on the provider, keep the chosen preview in its library, speak with the kept voice', async (t) => {
  const r = await app.req('POST', '/v1/voice-design', { instruction: 'A sassy squeaky mouse', reference_text: 'Hi there.', n: 2, seed: 7 }, { model: 'voice-design-1' });
  t.equal(r.status, 200, r.status === 200 ? 'designed' : r.text);
  const design = library.requests.find((q) => q.path === '/v1/text-to-voice/design')!;
  t.equal(design.headers['xi-api-key'], KEY);
  t.equal(design.query.output_format, 'pcm_24000');
  t.same(design.body, { voice_description: 'A sassy squeaky mouse', model_id: 'eleven_multilingual_ttv_v2', auto_generate_text: true, seed: 7 }, 'a text under 100 characters is not sent');
  t.equal(r.body.candidates.length, 2, 'n of the provider\'s three previews');
  for (const [i, c] of r.body.candidates.entries()) {
    const wav = await decodeAudio(Buffer.from(c.audio_base64, 'base64'));
    t.equal(wav.sampleRateHz, 24000);
    t.ok(Math.abs(medianF0(wav.pcm, 24000) - previewHz(i)) < 5, `preview ${i} is the provider's (${previewHz(i)} Hz)`);
    t.equal(c.text, AUTO_TEXT, 'what the preview really says');
    t.match(c.summary, /^ElevenLabs voice design \(eleven_multilingual_ttv_v2\), preview \d of 3: .*The text was not used/);
    t.notMatch(c.summary, /127\.0\.0\.1/, 'never the provider\'s address');
  }

  const chosen = r.body.candidates[1];
  const saved = await app.req('POST', '/model', { type: 'tts', title: 'Mouse', train_mode: 'fast', voices: [chosen.audio_base64], texts: [chosen.text], voice_design_id: chosen.id });
  t.equal(saved.status, 201, saved.status === 201 ? 'saved' : saved.text);
  const keep = library.requests.find((q) => q.path === '/v1/text-to-voice')!;
  t.match(keep.body, { voice_name: 'Mouse', generated_voice_id: 'gen_1_1' });
  t.ok(keep.body.voice_description.length >= 20, 'a description the provider accepts');

  const res = await fetch(`${app.url}/v1/tts`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', model: 's1' }, body: JSON.stringify({ text: 'Squeak squeak, hello there.', format: 'wav', reference_id: saved.body._id }) });
  t.equal(res.status, 200);
  const audio = await decodeAudio(new Uint8Array(await res.arrayBuffer()));
  const tts = library.requests.filter((q) => q.path.startsWith('/v1/text-to-speech/'));
  t.same(tts.map((q) => q.path), ['/v1/text-to-speech/lib_gen_1_1/stream/with-timestamps'], '/v1/tts names the kept library voice');
  t.ok(Math.abs(medianF0(audio.pcm, audio.sampleRateHz) - previewHz(1)) < 5, 'and sounds like the chosen preview');
  t.not(previewHz(1), DEFAULT_VOICE_HZ);
});

t.test('SaveVoice of a preview the provider does not have: Reference not found', async (t) => {
  const err = await app.inference.saveVoice({ voiceId: 'gen_unknown', name: 'x' }).then(() => null, (e: { status: number; message: string }) => e);
  t.same([err?.status, err?.message], [400, 'Reference not found']);
});

t.test('a server of the kind without voice design: UNIMPLEMENTED, a clear 400, nothing billed', async (t) => {
  library.noDesign = true;
  t.teardown(() => { library.noDesign = false; });
  const credit = async () => (await app.db.sql<{ c: string }[]>`select credit_micros::text as c from teams where id = ${app.teamId}`)[0]!.c;
  await flushUsage(app.db.sql); // the earlier tests' synthesis usage, written in batches, is billed first
  const before = await credit();
  const r = await app.req('POST', '/v1/voice-design', { instruction: 'A sassy squeaky mouse' }, { model: 'voice-design-1' });
  t.same([r.status, r.body?.message], [400, 'Voice design is not supported by the inference backend: the ElevenLabs-style speech provider does not offer it (HTTP 404 on /v1/text-to-voice/design)']);
  t.equal(await credit(), before);
});
