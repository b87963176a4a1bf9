// Groq-style family through the official `groq-sdk` (baseURL `/compat`; the client appends /openai/v1).
import t from 'tap';
import Groq, { toFile } from 'groq-sdk';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { heard, MAGIC } from '../speech/tts-helpers.ts';

const TEXT = 'groq style speech';

let app: TestServer;
let groq: Groq;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  groq = new Groq({ apiKey: app.key, baseURL: `${app.url}/compat`, maxRetries: 0 });
});
t.teardown(() => app.close());

t.test('speech: wav and mp3 through /compat/openai/v1, speaking the input exactly', async (t) => {
  const wavRes = await groq.audio.speech.create({ model: 'playai-tts', voice: '', input: TEXT, response_format: 'wav' });
  t.match(wavRes.headers.get('content-type'), /^audio\/wav/);
  t.match(wavRes.headers.get('x-generation-id'), /^gen_/);
  const wav = Buffer.from(await wavRes.arrayBuffer());
  t.equal(wav.subarray(0, 4).toString(), 'RIFF');
  t.equal(await heard(wav, 'wav'), TEXT, 'wav round trip');
  const rated = Buffer.from(await (await groq.audio.speech.create({ model: 'playai-tts', voice: '', input: TEXT, response_format: 'wav', sample_rate: 24000 })).arrayBuffer());
  t.equal(rated.readUInt32LE(24), 24000, 'sample_rate honoured');
  t.equal(await heard(rated, 'wav'), TEXT);
  const mp3 = Buffer.from(await (await groq.audio.speech.create({ model: 'service/s2.1-pro', voice: '', input: TEXT, response_format: 'mp3', speed: 1.5 })).arrayBuffer());
  t.ok(MAGIC.mp3!(mp3));
  t.equal(await heard(mp3, 'mp3'), TEXT, 'mp3 round trip');
});

t.test('speech refusals: Groq formats we do not produce, preset voices', async (t) => {
  for (const response_format of ['flac', 'mulaw', 'ogg'] as const) {
    const e = await groq.audio.speech.create({ model: 'playai-tts', voice: '', input: TEXT, response_format }).then(() => null, (err) => err);
    t.ok(e instanceof Groq.BadRequestError, `${response_format} → BadRequestError`);
    t.equal(e?.status, 400);
    t.match(e?.error, { error: { code: 400, type: 'invalid_request_error', param: 'response_format' } }, 'Groq exposes the whole body');
  }
  const preset = await groq.audio.speech.create({ model: 'playai-tts', voice: 'alloy', input: TEXT }).then(() => null, (err) => err);
  t.ok(preset instanceof Groq.BadRequestError, 'preset voice → 400');
  const wrongRate = await groq.audio.speech.create({ model: 'playai-tts', voice: '', input: TEXT, response_format: 'wav', sample_rate: 22050 }).then(() => null, (err) => err);
  t.ok(wrongRate instanceof Groq.BadRequestError, '22.05 kHz → 400');
});

t.test('transcription: json, text and verbose_json with words round-trip exactly', async (t) => {
  const wav = Buffer.from(await (await groq.audio.speech.create({ model: 'playai-tts', voice: '', input: TEXT, response_format: 'wav' })).arrayBuffer());
  const file = () => toFile(wav, 'a.wav');
  for (const model of ['whisper-large-v3', 'whisper-large-v3-turbo', 'distil-whisper-large-v3-en']) {
    const json = await groq.audio.transcriptions.create({ model, file: await file() });
    t.equal(json.text, TEXT, `${model} json`);
  }
  const text = (await groq.audio.transcriptions.create({ model: 'whisper-large-v3-turbo', file: await file(), response_format: 'text' })) as unknown;
  t.equal(text, `${TEXT}\n`, 'text');
  const v = (await groq.audio.transcriptions.create({ model: 'whisper-large-v3-turbo', file: await file(), response_format: 'verbose_json', timestamp_granularities: ['word'] })) as unknown as { text: string; words: { word: string }[]; duration: number };
  t.equal(v.text, TEXT);
  t.same(v.words.map((w) => w.word), TEXT.split(' '), 'words');
  t.ok(v.duration > 0);
  const url = await groq.audio.transcriptions.create({ model: 'whisper-large-v3', url: 'https://example.com/a.wav' }).then(() => null, (err) => err);
  t.ok(url instanceof Groq.BadRequestError, 'url → 400 (upload the file)');
});

t.test('models and errors', async (t) => {
  const list = await groq.models.list();
  t.ok(list.data.some((m) => m.id === 'service/transcribe-1'), 'catalog at /compat/openai/v1/models');
  const bad = new Groq({ apiKey: 'pk_wrong', baseURL: `${app.url}/compat`, maxRetries: 0 });
  const e = await bad.audio.speech.create({ model: 'playai-tts', voice: '', input: TEXT }).then(() => null, (err) => err);
  t.ok(e instanceof Groq.AuthenticationError);
  t.equal(e?.status, 401);
  t.match(e?.error, { error: { code: 401, type: 'provider_error', message: 'Invalid Token' } });
  const m = await groq.audio.speech.create({ model: 'unknown-model', voice: '', input: TEXT }).then(() => null, (err) => err);
  t.ok(m instanceof Groq.BadRequestError, 'unknown model → 400');
  const tr = await groq.audio.translations.create({ model: 'whisper-large-v3', file: await toFile(Buffer.from('x'), 'a.wav') }).then(() => null, (err) => err);
  t.ok(tr instanceof Groq.NotFoundError, 'translations → 404');
});
