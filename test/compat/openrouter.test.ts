// Family B (router style, /compat/api/v1) through the official `@openrouter/sdk`, retries off.
import t from 'tap';
import { OpenRouter } from '@openrouter/sdk';
import * as errors from '@openrouter/sdk/models/errors';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { collect, heard, MAGIC } from '../speech/tts-helpers.ts';

const TEXT = 'router style speech';

let app: TestServer;
let or: OpenRouter;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  or = new OpenRouter({ apiKey: app.key, serverURL: `${app.url}/compat/api/v1`, retryConfig: { strategy: 'none' } });
});
t.teardown(() => app.close());

t.test('speech: the default pcm and mp3, accepted as audio/* and speaking the input exactly', async (t) => {
  const pcm = await collect(await or.tts.createSpeech({ speechRequest: { model: 'openai/gpt-4o-mini-tts', input: TEXT, voice: '' } }));
  t.ok(MAGIC.pcm!(pcm));
  t.equal(await heard(pcm, 'pcm', 44100), TEXT, 'default response_format pcm at 44.1 kHz');
  const mp3 = await collect(await or.tts.createSpeech({ speechRequest: { model: 'service/s2.1-pro', input: TEXT, voice: '', responseFormat: 'mp3', speed: 1 } }));
  t.ok(MAGIC.mp3!(mp3));
  t.equal(await heard(mp3, 'mp3'), TEXT, 'mp3 round trip');
});

t.test('transcription: JSON input_audio and multipart (comma-joined granularities)', async (t) => {
  const wav = await collect(await fetch(`${app.url}/compat/api/v1/audio/speech`, {
    method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'tts-1', input: TEXT, voice: '', response_format: 'wav' }),
  }).then((r) => r.body!));
  const v = await or.stt.createTranscription({ sttRequest: { model: 'openai/whisper-1', inputAudio: { data: wav.toString('base64'), format: 'wav' }, responseFormat: 'verbose_json', timestampGranularities: ['word'], language: 'en' } });
  t.equal(v.text, TEXT, 'JSON body round trip');
  t.same(v.words!.map((w) => w.word), TEXT.split(' '), 'words');
  t.equal(v.language, 'en');
  t.ok(v.duration! > 0);
  const j = await or.stt.createTranscription({ sttRequest: { model: 'service/transcribe-1', inputAudio: { data: wav.toString('base64'), format: 'wav' } } });
  t.equal(j.text, TEXT, 'json');
  t.ok(j.usage!.seconds! > 0, 'usage seconds');
  const m = await or.stt.createTranscriptionMultipart({ requestBody: { file: new Blob([new Uint8Array(wav)], { type: 'audio/wav' }), model: 'whisper-1', responseFormat: 'verbose_json', timestampGranularities: ['word', 'segment'] } as never });
  t.equal(m.text, TEXT, 'multipart round trip');
  t.same(m.words!.map((w) => w.word), TEXT.split(' '), 'comma-joined granularities read');
});

t.test('models: the router Model schema validates in the client', async (t) => {
  const res = await or.models.list();
  const ids = res.result.data.map((m) => m.id).sort();
  t.same(ids, ['service/s1', 'service/s2-pro', 'service/s2.1-pro', 'service/s2.1-pro-free', 'service/transcribe-1']);
  t.equal(res.result.totalCount, 5);
});

t.test('errors: numeric codes, the client\'s status classes', async (t) => {
  const bad = new OpenRouter({ apiKey: 'pk_wrong', serverURL: `${app.url}/compat/api/v1`, retryConfig: { strategy: 'none' } });
  const e1 = await bad.tts.createSpeech({ speechRequest: { model: 'tts-1', input: TEXT, voice: '' } }).then(() => null, (err) => err);
  t.ok(e1 instanceof errors.UnauthorizedResponseError, 'bad key → UnauthorizedResponseError');
  t.equal(e1?.statusCode, 401);
  t.match(e1?.error, { code: 401, message: 'Invalid Token', metadata: { provider_name: 'service' } });
  const e2 = await or.tts.createSpeech({ speechRequest: { model: 'no-such-model', input: TEXT, voice: '' } }).then(() => null, (err) => err);
  t.ok(e2 instanceof errors.BadRequestResponseError, 'bad model → BadRequestResponseError');
  t.equal(e2?.statusCode, 400);
  t.match(e2?.error, { code: 400, message: /Unknown model/ });
  const e3 = await or.tts.createSpeech({ speechRequest: { model: 'tts-1', input: TEXT, voice: 'alloy' } }).then(() => null, (err) => err);
  t.ok(e3 instanceof errors.BadRequestResponseError, 'preset voice → 400');
  const e4 = await or.stt.createTranscription({ sttRequest: { model: 'whisper-1', inputAudio: { data: Buffer.from('not audio').toString('base64'), format: 'wav' } } }).then(() => null, (err) => err);
  t.ok(e4 instanceof errors.BadRequestResponseError, 'undecodable audio → 400');
  const e5 = await bad.stt.createTranscription({ sttRequest: { model: 'whisper-1', inputAudio: { data: '', format: 'wav' } } }).then(() => null, (err) => err);
  t.ok(e5 instanceof errors.UnauthorizedResponseError, 'bad key on transcription');
  const temp = await fetch(`${app.url}/compat/api/v1/audio/speech`, {
    method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'tts-1', input: TEXT, voice: '', temperature: 5 }),
  });
  t.equal(temp.status, 400, 'router-only temperature is validated natively');
  t.match(await temp.json(), { error: { code: 400, type: 'provider_error' } });
});

t.test('a team out of credit gets the native 402 as PaymentRequiredResponseError', async (t) => {
  const poor = await app.newTeam({ creditMicros: 0n });
  const client = new OpenRouter({ apiKey: poor.key, serverURL: `${app.url}/compat/api/v1`, retryConfig: { strategy: 'none' } });
  const e = await client.tts.createSpeech({ speechRequest: { model: 'tts-1', input: TEXT, voice: '' } }).then(() => null, (err) => err);
  t.ok(e instanceof errors.PaymentRequiredResponseError);
  t.equal(e?.statusCode, 402);
  t.match(e?.error, { code: 402, metadata: { provider_name: 'service' } });
});

t.test('router-only input_references clone a voice per request', async (t) => {
  const sample = await collect(await fetch(`${app.url}/compat/api/v1/audio/speech`, {
    method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'tts-1', input: 'a reference sample of about this length', voice: '', response_format: 'wav' }),
  }).then((r) => r.body!));
  const res = await fetch(`${app.url}/compat/api/v1/audio/speech`, {
    method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' },
    body: JSON.stringify({
      model: 'tts-1', input: TEXT, voice: '', response_format: 'wav',
      input_references: [{ type: 'input_audio', input_audio: { data: sample.toString('base64'), format: 'wav' } }, { type: 'text', text: 'a reference sample of about this length' }],
    }),
  });
  t.equal(res.status, 200);
  t.equal(await heard(Buffer.from(await res.arrayBuffer()), 'wav'), TEXT);
});
