// POST …/chat/completions (docs/api/compat.md "Chat completions") through the official `openai`
// client, with raw HTTP for the refusals: audio out (whole and streamed), audio in, errors.
import t from 'tap';
import OpenAI from 'openai';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { heard } from '../speech/tts-helpers.ts';

const TEXT = 'hello world from parley';

let app: TestServer;
let oa: OpenAI;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  oa = new OpenAI({ apiKey: app.key, baseURL: `${app.url}/compat/v1`, maxRetries: 0 });
});
t.teardown(() => app.close());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${app.url}${path}`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });

const speak = (content: string, format: 'wav' | 'mp3' | 'opus' | 'pcm16' = 'wav') => ({
  model: 'gpt-4o-audio-preview',
  modalities: ['text', 'audio'] as ('text' | 'audio')[],
  audio: { voice: '', format },
  messages: [
    { role: 'system' as const, content: 'ignored' },
    { role: 'user' as const, content: 'an earlier turn' },
    { role: 'assistant' as const, content: 'ok' },
    { role: 'user' as const, content },
  ],
});

t.test('audio out: the last user text is spoken into choices[0].message.audio', async (t) => {
  for (const base of ['/compat/v1', '/compat/api/v1', '/compat/openai/v1']) {
    const client = new OpenAI({ apiKey: app.key, baseURL: `${app.url}${base}`, maxRetries: 0 });
    const res = await client.chat.completions.create(speak(TEXT)).withResponse();
    t.match(res.response.headers.get('x-generation-id'), /^gen_/, `${base}: X-Generation-Id`);
    const c = res.data;
    t.match(c, { object: 'chat.completion', model: 'gpt-4o-audio-preview', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: null } }] });
    t.match(c.id, /^chatcmpl-/);
    const audio = c.choices[0]!.message.audio!;
    t.match(audio.id, /^audio_/, 'audio id');
    t.equal(audio.transcript, TEXT, 'transcript is the spoken text');
    t.ok(audio.expires_at > Date.now() / 1000, 'expires_at in the future (seconds)');
    t.equal(await heard(Buffer.from(audio.data, 'base64'), 'wav'), TEXT, `${base}: the audio speaks the last user message`);
  }
  const pcm = await oa.chat.completions.create(speak(TEXT, 'pcm16'));
  t.equal(await heard(Buffer.from(pcm.choices[0]!.message.audio!.data, 'base64'), 'pcm', 24000), TEXT, 'pcm16 is 24 kHz PCM');
  const parts = await oa.chat.completions.create({
    ...speak(''),
    messages: [{ role: 'user', content: [{ type: 'text', text: 'hello world ' }, { type: 'text', text: 'from parley' }] }],
  });
  t.equal(parts.choices[0]!.message.audio!.transcript, TEXT, 'text parts are joined');
});

t.test('audio out, stream: SSE chunks whose base64 pieces concatenate to the audio', async (t) => {
  const stream = await oa.chat.completions.create({ ...speak(TEXT, 'wav'), stream: true, stream_options: { include_usage: true } });
  let b64 = '';
  const decoded: Buffer[] = [];
  let transcript = '';
  let finish: string | null = null;
  let usage = false;
  const ids = new Set<string>();
  for await (const chunk of stream) {
    t.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = true;
    const choice = chunk.choices[0];
    if (!choice) continue;
    const audio = (choice.delta as { audio?: { id?: string; data?: string; transcript?: string } }).audio;
    if (audio?.id) ids.add(audio.id);
    if (audio?.data) {
      b64 += audio.data;
      decoded.push(Buffer.from(audio.data, 'base64'));
    }
    if (audio?.transcript) transcript += audio.transcript;
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  t.equal(transcript, TEXT, 'transcript in the stream');
  t.equal(finish, 'stop');
  t.ok(usage, 'usage chunk with include_usage');
  t.equal(ids.size, 1, 'one audio id throughout');
  t.same(Buffer.from(b64, 'base64'), Buffer.concat(decoded), 'concatenated base64 = concatenated bytes');
  t.equal(await heard(Buffer.from(b64, 'base64'), 'wav'), TEXT, 'the streamed audio speaks the text');
});

t.test('audio in: an input_audio part becomes content (the transcript)', async (t) => {
  const wav = Buffer.from((await oa.chat.completions.create(speak(TEXT))).choices[0]!.message.audio!.data, 'base64');
  const c = await oa.chat.completions.create({
    model: 'gpt-4o-audio-preview',
    modalities: ['text'],
    messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: wav.toString('base64'), format: 'wav' } }] }],
  });
  t.equal(c.choices[0]!.message.content, TEXT, 'content holds the transcript');
  t.equal(c.choices[0]!.message.audio, undefined, 'no audio out');
  const whisper = await oa.chat.completions.create({ model: 'whisper-1', messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: wav.toString('base64'), format: 'wav' } }] }] });
  t.equal(whisper.choices[0]!.message.content, TEXT, 'a transcription model id works too');
  const stream = await oa.chat.completions.create({ model: 'gpt-4o-audio-preview', stream: true, messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: wav.toString('base64'), format: 'wav' } }] }] });
  let content = '';
  for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
  t.equal(content, TEXT, 'streamed transcript');
});

t.test('refusals: n≠1, audio in plus out, neither, bad format, preset voice, errors in the family envelope', async (t) => {
  const wav = Buffer.from((await oa.chat.completions.create(speak(TEXT))).choices[0]!.message.audio!.data, 'base64');
  const inputAudio = { type: 'input_audio', input_audio: { data: wav.toString('base64'), format: 'wav' } };
  const cases: [string, Record<string, unknown>, string][] = [
    ['n=2 → 400 (rule: n≠1)', { ...speak(TEXT), n: 2 }, 'n'],
    ['n=0 → 400 (rule: n≠1)', { ...speak(TEXT), n: 0 }, 'n'],
    ['audio in plus audio out → 400', { ...speak(''), messages: [{ role: 'user', content: [inputAudio] }] }, 'modalities'],
    ['text only, no audio either way → 400', { model: 'gpt-4o-audio-preview', messages: [{ role: 'user', content: 'hi' }] }, 'modalities'],
    ['audio out without audio{} → 400', { model: 'gpt-4o-audio-preview', modalities: ['text', 'audio'], messages: [{ role: 'user', content: 'hi' }] }, 'audio'],
    ['aac → 400', speak(TEXT, 'aac' as 'wav'), 'audio.format'],
    ['preset voice → 400', { ...speak(TEXT), audio: { voice: 'alloy', format: 'wav' } }, 'voice'],
    ['unknown model → 400', { ...speak(TEXT), model: 'nope' }, 'model'],
    ['empty user text → 400', speak('  '), 'messages'],
    ['image part → 400', { ...speak(''), messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 'messages'],
    ['unknown X-Service- header → 400', speak(TEXT), 'x-service-temprature'],
  ];
  for (const [name, body, param] of cases) {
    const headers: Record<string, string> = param.startsWith('x-service-') ? { 'X-Service-Temprature': '0.3' } : {};
    for (const base of ['/compat/v1', '/compat/api/v1']) {
      const r = await post(`${base}/chat/completions`, body, headers);
      t.equal(r.status, 400, `${base} ${name}`);
      t.match(await r.json(), { error: { code: 400, type: 'invalid_request_error', param, message: String } }, `${name}: envelope`);
    }
  }
  const viaClient = await oa.chat.completions.create({ ...speak(TEXT), n: 3 }).then(() => null, (e) => e);
  t.ok(viaClient instanceof OpenAI.BadRequestError, 'the client raises BadRequestError');
  const noKey = await fetch(`${app.url}/compat/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(speak(TEXT)) });
  t.equal(noKey.status, 401);
  t.match(await noKey.json(), { error: { code: 401, type: 'authentication_error' } });
  const badKey = await new OpenAI({ apiKey: 'bad', baseURL: `${app.url}/compat/v1`, maxRetries: 0 }).chat.completions.create(speak(TEXT)).then(() => null, (e) => e);
  t.ok(badKey instanceof OpenAI.AuthenticationError, 'invalid key → 401');
  t.match(badKey?.error, { type: 'provider_error', metadata: { provider_name: 'service' } });
  const voice = await post('/compat/v1/chat/completions', { ...speak(TEXT), audio: { voice: 'voice_nope', format: 'wav' } });
  t.equal(voice.status, 400, 'a voice that is not the caller\'s → 400 from the native service');
  t.match(await voice.json(), { error: { type: 'provider_error', message: 'Reference not found' } });
  const text = await fetch(`${app.url}/compat/v1/chat/completions`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'text/plain' }, body: 'hi' });
  t.equal(text.status, 415, 'non-JSON body → 415');
  t.match(await text.json(), { error: { code: 415 } });
  const malformed = await fetch(`${app.url}/compat/v1/chat/completions`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' }, body: '{' });
  t.equal(malformed.status, 400);
  t.match(await malformed.json(), { error: { code: 400, message: 'Malformed JSON' } });
});
