// Families A and B through the official `openai` client (and raw HTTP where the client cannot
// send a shape): speech in every format, transcription in every response format, models, errors.
import t from 'tap';
import OpenAI, { toFile } from 'openai';
import { decodeAudio as decodeContainer } from '../../src/audio/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { heard, MAGIC } from '../speech/tts-helpers.ts';

const TEXT = 'hello world from parley';

let app: TestServer;
let oa: OpenAI;
let router: OpenAI;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  oa = new OpenAI({ apiKey: app.key, baseURL: `${app.url}/compat/v1`, maxRetries: 0 });
  router = new OpenAI({ apiKey: app.key, baseURL: `${app.url}/compat/api/v1`, maxRetries: 0 });
});
t.teardown(() => app.close());

const bytesOf = async (r: Response) => Buffer.from(await r.arrayBuffer());

/** Raw JSON POST to a compat path. */
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${app.url}${path}`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });

/** Subtitle text lines joined (cue numbers, timings and the WEBVTT line dropped). */
const subtitleText = (s: string) =>
  s.split('\n').filter((l) => l.trim() !== '' && !/^\d+$/.test(l) && !l.includes('-->') && l !== 'WEBVTT').join(' ');

t.test('speech in every format: audio Content-Type, magic bytes, decodes, speaks the input exactly', async (t) => {
  const cases = [
    { format: 'mp3', type: /^audio\/mpeg/, magic: 'mp3', rate: 44100 },
    { format: 'wav', type: /^audio\/wav/, magic: 'wav', rate: 44100 },
    { format: 'opus', type: /^audio\/ogg/, magic: 'opus', rate: 48000 },
    { format: 'pcm', type: /^audio\/pcm;rate=44100$/, magic: 'pcm', rate: 44100 },
    { format: 'pcm16', type: /^audio\/pcm;rate=24000$/, magic: 'pcm', rate: 24000 },
  ] as const;
  for (const c of cases) {
    for (const client of [oa, router]) {
      const res = await client.audio.speech.create({ model: 'tts-1', voice: '', input: TEXT, response_format: c.format as 'pcm' });
      t.match(res.headers.get('content-type'), c.type, `${c.format}: content type`);
      t.match(res.headers.get('x-generation-id'), /^gen_/, `${c.format}: X-Generation-Id`);
      const bytes = await bytesOf(res);
      t.ok(MAGIC[c.magic]!(bytes), `${c.format}: magic bytes`);
      if (c.format !== 'pcm' && c.format !== 'pcm16') t.equal((await decodeContainer(bytes)).sampleRateHz, c.rate, `${c.format}: decodes at ${c.rate} Hz`);
      t.equal(await heard(bytes, c.magic, c.rate), TEXT, `${c.format}: round trip`);
    }
  }
});

t.test('speech defaults: pcm at 44.1 kHz, every model id and alias, voice as {id}, extension sample_rate', async (t) => {
  const res = await oa.audio.speech.create({ model: 'service/s2.1-pro', voice: '', input: TEXT });
  t.equal(res.headers.get('content-type'), 'audio/pcm;rate=44100', 'default response_format is pcm');
  t.equal(await heard(await bytesOf(res), 'pcm', 44100), TEXT);
  for (const model of ['tts-1-hd', 'gpt-4o-mini-tts', 'playai-tts', 'openai/tts-1', 'service/s2.1-pro-free', 'service/s2-pro', 'service/s1']) {
    const r = await oa.audio.speech.create({ model, voice: 'default', input: TEXT, response_format: 'wav' });
    t.equal(await heard(await bytesOf(r), 'wav'), TEXT, `model ${model}`);
  }
  const obj = await post('/compat/v1/audio/speech', { model: 'tts-1', voice: { id: '' }, input: TEXT, response_format: 'wav', sample_rate: 16000, unknown_field: 1 });
  t.equal(obj.status, 200);
  const wav = await bytesOf(obj);
  t.equal((await decodeContainer(wav)).sampleRateHz, 16000, 'sample_rate honoured; unknown fields ignored');
  t.equal(await heard(wav, 'wav'), TEXT);
});

t.test('speed maps onto the native 0.5–2 range (clamped), and native parameters follow their precedence', async (t) => {
  const len = async (body: Record<string, unknown>, headers: Record<string, string> = {}, path = '/compat/v1/audio/speech') => {
    const r = await post(path, { model: 'tts-1', voice: '', input: TEXT, response_format: 'pcm16', ...body }, headers);
    t.equal(r.status, 200, JSON.stringify(body));
    const b = await bytesOf(r);
    t.equal(await heard(b, 'pcm', 24000), TEXT, 'still speaks the input');
    return b.length;
  };
  const normal = await len({});
  const fast = await len({ speed: 2 });
  t.ok(fast < normal, 'speed 2 is shorter');
  t.equal(await len({ speed: 4 }), fast, 'speed 4 is clamped to 2');
  const slow = await len({ speed: 0.5 });
  t.equal(await len({ speed: 0.25 }), slow, 'speed 0.25 is clamped to 0.5');
  // header > provider.options.service > mapped value
  t.equal(await len({ speed: 0.5, provider: { options: { service: { prosody: { speed: 2 } } } } }), fast, 'provider.options over speed');
  t.equal(await len({ provider: { options: { service: { prosody: { speed: 0.5 } } } } }, { 'X-Service-Prosody': '{"speed":2}' }), fast, 'header over provider.options');
  t.equal(await len({}, { 'X-Service-Latency': 'low', 'X-Service-Temperature': '0.2', 'X-Service-Top-P': '0.5', 'X-Service-Chunk-Length': '150', 'X-Service-Normalize': 'false' }), normal, 'native headers accepted');
  t.equal(await len({ temperature: 0.3, top_p: 0.4, repetition_penalty: 1.1 }, {}, '/compat/api/v1/audio/speech'), normal, 'router-only top-level fields');
  const mp3 = async (h: Record<string, string>) => (await bytesOf(await post('/compat/v1/audio/speech', { model: 'tts-1', voice: '', input: TEXT, response_format: 'mp3' }, h))).length;
  t.ok((await mp3({ 'X-Service-Mp3-Bitrate': '64' })) < (await mp3({ 'X-Service-Mp3-Bitrate': '192' })), 'X-Service-Mp3-Bitrate reaches the encoder');
});

t.test('speech refusals surface as BadRequestError with the family envelope', async (t) => {
  const refused: [Record<string, unknown>, string, string?][] = [
    [{ model: 'nope' }, 'model'],
    [{ model: 'whisper-1' }, 'model'],
    [{ voice: 'alloy' }, 'voice'],
    [{ response_format: 'aac' }, 'response_format'],
    [{ response_format: 'flac' }, 'response_format'],
    [{ response_format: 'mulaw' }, 'response_format'],
    [{ response_format: 'ogg' }, 'response_format'],
    [{ speed: 5 }, 'speed'],
    [{ speed: 0.2 }, 'speed'],
    [{ instructions: 'speak softly' }, 'instructions'],
    [{ stream_format: 'sse' }, 'stream_format'],
    [{ sample_rate: 22050, response_format: 'wav' }, 'sample_rate'],
    [{ input: '' }, 'input'],
  ];
  for (const [body, param] of refused) {
    const err = await oa.audio.speech.create({ model: 'tts-1', voice: '', input: TEXT, ...body } as never).then(() => null, (e) => e);
    t.ok(err instanceof OpenAI.BadRequestError, `${JSON.stringify(body)} → BadRequestError`);
    t.equal(err?.status, 400);
    t.match(err?.error, { code: 400, type: 'invalid_request_error', param }, `${JSON.stringify(body)}: envelope`);
  }
  const mp3 = await post('/compat/v1/audio/speech', { model: 'tts-1', voice: '', input: TEXT, response_format: 'mp3' }, { 'X-Service-Mp3-Bitrate': '100' });
  t.equal(mp3.status, 400, 'a non-tier mp3 bitrate → 400');
  t.match(await mp3.json(), { error: { code: 400, type: 'invalid_request_error', param: 'mp3_bitrate' } });
  const unknownVoice = await oa.audio.speech.create({ model: 'tts-1', voice: 'voice_does_not_exist', input: TEXT }).then(() => null, (e) => e);
  t.ok(unknownVoice instanceof OpenAI.BadRequestError);
  t.match(unknownVoice.error, { code: 400, type: 'provider_error', message: 'Reference not found', metadata: { provider_name: 'service' } }, 'native refusals pass through as provider_error');
  const temp = await post('/compat/v1/audio/speech', { model: 'tts-1', voice: '', input: TEXT }, { 'X-Service-Temperature': '5' });
  t.equal(temp.status, 400, 'a native schema violation is a 400');
  t.match(await temp.json(), { error: { code: 400, type: 'provider_error', message: /temperature/ } });
  const malformed = await fetch(`${app.url}/compat/v1/audio/speech`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' }, body: '{nope' });
  t.equal(malformed.status, 400);
  t.match(await malformed.json(), { error: { code: 400, type: 'invalid_request_error', message: 'Malformed JSON' } });
});

t.test('keys: a missing key is authentication_error, a bad key the native 401 as provider_error', async (t) => {
  const bad = new OpenAI({ apiKey: 'pk_wrong', baseURL: `${app.url}/compat/v1`, maxRetries: 0 });
  const e1 = await bad.audio.speech.create({ model: 'tts-1', voice: '', input: 'x' }).then(() => null, (e) => e);
  t.ok(e1 instanceof OpenAI.AuthenticationError);
  t.equal(e1.status, 401);
  t.match(e1.error, { code: 401, type: 'provider_error', message: 'Invalid Token' });
  const e2 = await bad.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(Buffer.from('RIFF'), 'a.wav') }).then(() => null, (e) => e);
  t.ok(e2 instanceof OpenAI.AuthenticationError, 'transcription too');
  for (const headers of [{}, { Authorization: 'Basic abc' }] as Record<string, string>[]) {
    const r = await fetch(`${app.url}/compat/v1/audio/speech`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: '{}' });
    t.equal(r.status, 401);
    const body = await r.json();
    t.match(body, { error: { code: 401, type: 'authentication_error' } });
    t.notOk(body.error.metadata, 'no metadata on authentication_error');
  }
});

/** Synthetic speech for TEXT as WAV, made through the compat speech endpoint itself. */
const speechWav = async (text = TEXT) => bytesOf(await oa.audio.speech.create({ model: 'tts-1', voice: '', input: text, response_format: 'wav' }));

t.test('transcription in every response format round-trips text → speech → text exactly', async (t) => {
  const wav = await speechWav();
  for (const client of [oa, router]) {
    const file = () => toFile(wav, 'a.wav', { type: 'audio/wav' });
    const json = await client.audio.transcriptions.create({ model: 'whisper-1', file: await file() }).withResponse();
    t.equal(json.data.text, TEXT, 'json');
    t.match(json.response.headers.get('content-type'), /^application\/json/);
    t.match(json.response.headers.get('x-generation-id'), /^gen_/, 'X-Generation-Id');

    const text = await client.audio.transcriptions.create({ model: 'gpt-4o-transcribe', file: await file(), response_format: 'text' }).withResponse();
    t.equal(text.data, `${TEXT}\n`, 'text (a string)');
    t.match(text.response.headers.get('content-type'), /^text\/plain/);

    const v = await client.audio.transcriptions.create({ model: 'service/transcribe-1', file: await file(), response_format: 'verbose_json', timestamp_granularities: ['word', 'segment'], language: 'en' });
    t.equal(v.text, TEXT, 'verbose_json text');
    t.equal(v.language, 'en', 'language echoes the request');
    t.ok(v.duration > 0);
    t.same(v.words!.map((w) => w.word.trim()), TEXT.split(' '), 'words');
    t.ok(v.words!.every((w, i, a) => w.end >= w.start && (i === 0 || w.start >= a[i - 1]!.start)), 'word times are ordered');
    t.same(v.segments!.map((s) => s.text.trim()), TEXT.split(' '), 'segments are per word');
    t.match(v.segments![0], { id: 0, seek: 0, tokens: [], temperature: 0, avg_logprob: 0, compression_ratio: 1, no_speech_prob: 0 }, 'neutral constants');

    const noWords = await client.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'verbose_json' });
    t.equal(noWords.words, undefined, 'words only with the word granularity');
    t.equal(noWords.language, '', 'no language sent → ""');

    const srt = (await client.audio.transcriptions.create({ model: 'gpt-4o-mini-transcribe', file: await file(), response_format: 'srt' })) as unknown as string;
    t.match(srt, /^1\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\n/, 'srt cue');
    t.equal(subtitleText(srt), TEXT, 'srt round trip');
    const vtt = (await client.audio.transcriptions.create({ model: 'whisper-1', file: await file(), response_format: 'vtt' })) as unknown as string;
    t.match(vtt, /^WEBVTT\n\n\d\d:\d\d:\d\d\.\d{3} --> /, 'vtt cue');
    t.equal(subtitleText(vtt), TEXT, 'vtt round trip');
  }
});

t.test('multipart arrays in both encodings, and the router JSON body with input_audio', async (t) => {
  const wav = await speechWav();
  const form = (granularities: string[]) => {
    const f = new FormData();
    f.append('model', 'whisper-1');
    f.append('file', new Blob([wav]), 'blob');
    f.append('response_format', 'verbose_json');
    for (const g of granularities) f.append('timestamp_granularities[]', g);
    return f;
  };
  for (const g of [['word,segment'], ['segment', 'word'], ['word']]) {
    const r = await fetch(`${app.url}/compat/v1/audio/transcriptions`, { method: 'POST', headers: app.auth, body: form(g) });
    t.equal(r.status, 200);
    const body = await r.json();
    t.same(body.words.map((w: { word: string }) => w.word), TEXT.split(' '), `granularities ${JSON.stringify(g)}`);
  }
  const r = await post('/compat/api/v1/audio/transcriptions', { model: 'openai/whisper-1', input_audio: { data: wav.toString('base64'), format: 'wav' }, response_format: 'verbose_json', timestamp_granularities: ['word'] });
  t.equal(r.status, 200);
  const body = await r.json();
  t.equal(body.text, TEXT, 'JSON input_audio');
  t.equal(body.words.length, TEXT.split(' ').length);
});

t.test('transcription refusals', async (t) => {
  const wav = await speechWav();
  const file = () => toFile(wav, 'a.wav', { type: 'audio/wav' });
  const cases: [Record<string, unknown>, string][] = [
    [{ include: ['logprobs'] }, 'include'],
    [{ known_speaker_names: ['ann'] }, 'known_speaker_names'],
    [{ model: 'tts-1' }, 'model'],
    [{ model: 'nope' }, 'model'],
    [{ response_format: 'diarized_json' }, 'response_format'],
    [{ timestamp_granularities: ['char'] }, 'timestamp_granularities.0'],
  ];
  for (const [extra, param] of cases) {
    const e = await oa.audio.transcriptions.create({ model: 'whisper-1', file: await file(), ...extra } as never).then(() => null, (err) => err);
    t.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)} → 400`);
    t.match(e?.error, { code: 400, type: 'invalid_request_error', param }, JSON.stringify(extra));
  }
  const native = await oa.audio.transcriptions.create({ model: 'whisper-1', file: await file() }, { headers: { 'X-Service-Temperature': '0.5' } }).then(() => null, (err) => err);
  t.ok(native instanceof OpenAI.BadRequestError, 'native parameters on transcription → 400');
  const opts = await post('/compat/api/v1/audio/transcriptions', { model: 'whisper-1', input_audio: { data: wav.toString('base64') }, provider: { options: { service: { temperature: 0.5 } } } });
  t.equal(opts.status, 400, 'provider.options.service on transcription → 400');
  const ignored = await oa.audio.transcriptions.create({ model: 'whisper-1', file: await file(), prompt: 'names', temperature: 0.3 });
  t.equal(ignored.text, TEXT, 'prompt and temperature are ignored');
  const short = await oa.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(Buffer.from('not audio'), 'a.wav') }).then(() => null, (err) => err);
  t.ok(short instanceof OpenAI.BadRequestError, 'undecodable audio → 400 from the native service');
  t.match(short?.error, { type: 'provider_error' });
  const translation = await oa.audio.translations.create({ model: 'whisper-1', file: await file() }).then(() => null, (err) => err);
  t.ok(translation instanceof OpenAI.NotFoundError, 'translations → 404');
});

t.test('models: listed without a key, lookups 404', async (t) => {
  const anonymous = new OpenAI({ apiKey: 'unused', baseURL: `${app.url}/compat/v1`, maxRetries: 0 });
  const ids: string[] = [];
  for await (const m of anonymous.models.list()) ids.push(m.id);
  t.same(ids.sort(), ['service/s1', 'service/s2-pro', 'service/s2.1-pro', 'service/s2.1-pro-free', 'service/transcribe-1']);
  const raw = await (await fetch(`${app.url}/compat/api/v1/models?output_modalities=text`)).json();
  t.same(raw.data.map((m: { id: string }) => m.id), ['service/transcribe-1'], 'output_modalities filter');
  t.match(raw.data[0], { context_length: null, default_parameters: null, per_request_limits: null, supported_voices: null, pricing: { prompt: String, completion: String }, architecture: { output_modalities: ['text'] } });
  t.notOk('alias_target' in raw.data[0] || 'reasoning' in raw.data[0] || 'knowledge_cutoff' in raw.data[0], 'absent fields');
  const e = await oa.models.retrieve('service/s1').then(() => null, (err) => err);
  t.ok(e instanceof OpenAI.NotFoundError);
  t.match(e?.error, { code: 404 });
  const e2 = await oa.models.retrieve('tts-1').then(() => null, (err) => err);
  t.ok(e2 instanceof OpenAI.NotFoundError);
});
