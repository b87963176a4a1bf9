// Family C REST (/compat/elevenlabs): the official @elevenlabs/elevenlabs-js client against a
// real server with the synthetic engine, plus raw HTTP for every refusal and output_format rule.
import t from 'tap';
import { ElevenLabs, ElevenLabsClient, ElevenLabsError } from '@elevenlabs/elevenlabs-js';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { int16ToPcmBytes, wavHeader } from '../../src/audio/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { collect, heard, MAGIC } from '../speech/tts-helpers.ts';

let app: TestServer;
let el: ElevenLabsClient;
let base: string;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  base = `${app.url}/compat/elevenlabs`;
  el = new ElevenLabsClient({ apiKey: app.key, baseUrl: base, maxRetries: 0 });
});
t.teardown(() => app.close());

const TEXT = 'Hello from the compat layer, friend.';

function wav(pcm: Int16Array, rate: number): Uint8Array<ArrayBuffer> {
  const data = int16ToPcmBytes(pcm);
  const out = new Uint8Array(44 + data.byteLength);
  out.set(wavHeader(rate, data.byteLength));
  out.set(data, 44);
  return out;
}
const speech = (text: string, rate = 24000) => wav(encodeText(text, { sampleRateHz: rate }).pcm, rate);

const tts = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${base}${path}`, { method: 'POST', headers: { 'xi-api-key': app.key, 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });

async function stt(fields: Record<string, string | string[]>, audio: Uint8Array | null = speech('a clip that is long enough'), query = '', headers: Record<string, string> = {}) {
  const f = new FormData();
  if (audio) f.append('file', new Blob([audio as Uint8Array<ArrayBuffer>], { type: 'audio/wav' }), 'clip.wav');
  for (const [k, v] of Object.entries(fields)) for (const x of Array.isArray(v) ? v : [v]) f.append(k, x);
  const res = await fetch(`${base}/v1/speech-to-text${query}`, { method: 'POST', headers: { 'xi-api-key': app.key, ...headers }, body: f });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

async function statusOf(p: Promise<unknown>): Promise<{ statusCode?: number; body?: any }> {
  try {
    await p;
    return {};
  } catch (err) {
    if (err instanceof ElevenLabsError) return { statusCode: err.statusCode, body: err.body };
    throw err;
  }
}

t.test('convert and stream: the official client gets audio that decodes back to the text', async (t) => {
  const mp3 = await collect(await el.textToSpeech.convert('default', { text: TEXT, modelId: 'eleven_multilingual_v2', outputFormat: 'mp3_44100_128' }));
  t.ok(MAGIC.mp3!(mp3), 'mp3 bytes');
  t.equal(await heard(mp3, 'mp3'), TEXT);
  const pcm = await collect(await el.textToSpeech.stream('-', { text: TEXT, outputFormat: 'pcm_16000', voiceSettings: { stability: 0.5, similarityBoost: 0.75, style: 0.2, useSpeakerBoost: true, speed: 1 }, languageCode: 'en', seed: 1 }));
  t.equal(await heard(pcm, 'pcm', 16000), TEXT);
  const opus = await collect(await el.textToSpeech.stream('default', { text: TEXT, modelId: 'service/s1', outputFormat: 'opus_48000_64' }));
  t.ok(MAGIC.opus!(opus), 'Ogg Opus');
  t.equal(await heard(opus, 'opus'), TEXT);
});

t.test('output_format: every accepted family round-trips, rate honored, content type', async (t) => {
  const cases: [string, string, number][] = [
    ['mp3_44100_32', 'mp3', 44100], ['mp3_44100_96', 'mp3', 44100], ['mp3_44100_192', 'mp3', 44100], ['mp3_32000_64', 'mp3', 32000],
    ['pcm_8000', 'pcm', 8000], ['pcm_24000', 'pcm', 24000], ['pcm_44100', 'pcm', 44100], ['pcm_48000', 'pcm', 48000],
    ['opus_48000_32', 'opus', 48000], ['opus_48000_192', 'opus', 48000],
    ['wav_16000', 'wav', 16000], ['wav_44100', 'wav', 44100],
  ];
  for (const [fmt, kind, rate] of cases) {
    const res = await tts(`/v1/text-to-speech/default?output_format=${fmt}`, { text: 'Format check.' });
    t.equal(res.status, 200, fmt);
    const bytes = Buffer.from(await res.arrayBuffer());
    t.ok(MAGIC[kind]!(bytes), `${fmt} magic`);
    t.match(res.headers.get('content-type'), /^audio\//, `${fmt} audio content type`);
    if (kind === 'wav') t.equal(bytes.readUInt32LE(24), rate, `${fmt} rate in the header`);
    t.equal(await heard(bytes, kind, rate), 'Format check.', `${fmt} round trip`);
  }
  const dflt = await tts('/v1/text-to-speech/default', { text: 'Default.' });
  t.equal(dflt.headers.get('content-type'), 'audio/mpeg', 'default mp3_44100_128');
  t.match(dflt.headers.get('x-generation-id'), /^gen/, 'X-Generation-Id');
});

t.test('output_format: mp3 bitrate snaps up to a tier', async (t) => {
  // A constant-bitrate LAME frame header carries its bitrate index: read it from the first frame.
  const kbps = async (fmt: string) => {
    const b = Buffer.from(await (await tts(`/v1/text-to-speech/default?output_format=${fmt}`, { text: 'Bitrate tier check, long enough.' })).arrayBuffer());
    let i = 0;
    if (b.subarray(0, 3).toString('latin1') === 'ID3') i = 10 + ((b[6]! << 21) | (b[7]! << 14) | (b[8]! << 7) | b[9]!);
    while (!(b[i] === 0xff && (b[i + 1]! & 0xe0) === 0xe0)) i++;
    const mpeg1 = (b[i + 1]! & 0x18) === 0x18;
    const idx = b[i + 2]! >> 4;
    return (mpeg1 ? [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320] : [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160])[idx];
  };
  t.equal(await kbps('mp3_44100_32'), 64, '32 → 64');
  t.equal(await kbps('mp3_44100_96'), 128, '96 → 128');
  t.equal(await kbps('mp3_44100_128'), 128, '128 stays');
  t.equal(await kbps('mp3_44100_160'), 192, '160 → 192');
});

t.test('output_format refusals: ulaw/alaw and unparsable → 400 invalid_request; refused rates → provider_error', async (t) => {
  for (const fmt of ['ulaw_8000', 'alaw_8000', 'flac_44100', 'mp3', 'pcm_16000_64', 'mp3_44100_320']) {
    const res = await tts(`/v1/text-to-speech/default?output_format=${fmt}`, { text: 'No.' });
    t.equal(res.status, 400, fmt);
    t.equal(((await res.json()) as any).detail.status, 'invalid_request', fmt);
  }
  for (const fmt of ['mp3_22050_32', 'pcm_22050', 'wav_22050', 'mp3_24000_48', 'opus_24000', 'pcm_11025']) {
    const res = await tts(`/v1/text-to-speech/default?output_format=${fmt}`, { text: 'No.' });
    t.equal(res.status, 400, fmt);
    const body = (await res.json()) as any;
    t.equal(body.detail.status, 'provider_error', fmt);
    t.match(body.detail.message, /^Invalid sample rate/, `${fmt}: the native message`);
  }
  // Through the official client: the 22.05 kHz family is an ElevenLabsError with status 400.
  const e = await statusOf(el.textToSpeech.convert('default', { text: 'No.', outputFormat: 'mp3_22050_32' }));
  t.equal(e.statusCode, 400);
  t.equal(e.body?.detail?.status, 'provider_error');
  const u = await statusOf(el.textToSpeech.convert('default', { text: 'No.', outputFormat: 'ulaw_8000' }));
  t.equal(u.statusCode, 400);
  t.equal(u.body?.detail?.status, 'invalid_request');
});

t.test('convertWithTimestamps: snake_case seconds, characters spell the text, normalized identical', async (t) => {
  const ts = await el.textToSpeech.convertWithTimestamps('default', { text: TEXT, outputFormat: 'pcm_24000' });
  const audio = Buffer.from(ts.audioBase64, 'base64');
  t.equal(await heard(audio, 'pcm', 24000), TEXT, 'audio round trip');
  const a = ts.alignment!;
  t.equal(a.characters.join(''), TEXT);
  t.equal(a.characterStartTimesSeconds.length, a.characters.length);
  t.equal(a.characterEndTimesSeconds.length, a.characters.length);
  for (let i = 0; i < a.characters.length; i++) {
    const s = a.characterStartTimesSeconds[i]!;
    const e = a.characterEndTimesSeconds[i]!;
    t.ok(e >= s, 'end ≥ start');
    t.equal(Math.round(s * 1000), s * 1000, 'millisecond precision');
    if (i) t.ok(s >= a.characterEndTimesSeconds[i - 1]! - 1e-9, 'in order, no overlap');
  }
  const durationS = audio.length / 2 / 24000;
  t.ok(a.characterEndTimesSeconds.at(-1)! <= durationS + 0.001, 'within the audio');
  t.same(ts.normalizedAlignment, ts.alignment, 'normalized_alignment identical');
  // Raw wire keys are snake_case.
  const raw = (await (await tts('/v1/text-to-speech/default/with-timestamps', { text: 'Hi there.' })).json()) as any;
  t.same(Object.keys(raw).sort(), ['alignment', 'audio_base64', 'normalized_alignment']);
  t.same(Object.keys(raw.alignment).sort(), ['character_end_times_seconds', 'character_start_times_seconds', 'characters']);
  t.same(raw.normalized_alignment, raw.alignment);
  t.equal(await heard(Buffer.from(raw.audio_base64, 'base64'), 'mp3'), 'Hi there.', 'default mp3 round trip');
});

t.test('character timings follow the spoken words (interpolated from the segments)', async (t) => {
  const text = 'one two three';
  const ts = await el.textToSpeech.convertWithTimestamps('default', { text, outputFormat: 'pcm_16000' });
  const a = ts.alignment!;
  const pcm = Buffer.from(ts.audioBase64, 'base64');
  // Decode each word's region: the audio between its first character's start and last character's end is that word.
  const { decodeAudio } = await import('../../native/engines/synthetic/modem.ts');
  const words = decodeAudio(new Int16Array(pcm.buffer, pcm.byteOffset, pcm.length / 2), 16000)!.words;
  let at = 0;
  for (const w of words) {
    const i = text.indexOf(w.text, at);
    at = i + w.text.length;
    t.ok(Math.abs(a.characterStartTimesSeconds[i]! * 1000 - w.startMs) < 80, `${w.text} starts where it is heard`);
    t.ok(Math.abs(a.characterEndTimesSeconds[i + w.text.length - 1]! * 1000 - w.endMs) < 80, `${w.text} ends where it is heard`);
  }
});

t.test('streamWithTimestamps: NDJSON chunks with alignment, concatenating to audio and text', async (t) => {
  const res = await tts('/v1/text-to-speech/default/stream/with-timestamps?output_format=pcm_16000', { text: TEXT });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /ndjson/);
  const lines = (await res.text()).split('\n').filter(Boolean).map((l) => JSON.parse(l));
  t.ok(lines.length >= 1);
  for (const l of lines) t.same(l.normalized_alignment, l.alignment, 'each line: normalized identical');
  const chunks: Buffer[] = [];
  let chars = '';
  for await (const c of await el.textToSpeech.streamWithTimestamps('default', { text: TEXT, outputFormat: 'pcm_16000' })) {
    t.type(c.audioBase64, 'string');
    chunks.push(Buffer.from(c.audioBase64!, 'base64'));
    if (c.alignment) chars += c.alignment.characters!.join('');
  }
  t.equal(chars, TEXT, 'characters over all chunks spell the text');
  t.equal(await heard(Buffer.concat(chunks), 'pcm', 16000), TEXT, 'audio round trip');
});

t.test('voice_settings: speed sets the rate; stability maps to temperature; ignored fields never error', async (t) => {
  const len = async (speed: number) => Buffer.from(await (await tts('/v1/text-to-speech/default?output_format=pcm_16000', { text: 'Speed check.', voice_settings: { speed } })).arrayBuffer()).length;
  const normal = await len(1);
  const fast = await len(2);
  t.ok(fast < normal * 0.7, 'speed 2 gives much shorter audio');
  const res = await tts('/v1/text-to-speech/default?output_format=pcm_16000', {
    text: 'Settings.', voice_settings: { stability: 0.3, similarity_boost: 0.9, style: 0.4, use_speaker_boost: false, speed: 1 },
    language_code: 'en', seed: 7, previous_text: 'x', next_text: 'y', apply_text_normalization: 'auto', pronunciation_dictionary_locators: [], use_pvc_as_ivc: false,
  });
  t.equal(res.status, 200);
  t.equal(await heard(Buffer.from(await res.arrayBuffer()), 'pcm', 16000), 'Settings.');
  const bad = await tts('/v1/text-to-speech/default', { text: 'x', voice_settings: { stability: 2 } });
  t.equal(bad.status, 422, 'stability out of range: the vendor 422 list');
  t.ok(Array.isArray(((await bad.json()) as any).detail));
});

t.test('X-Service- headers reach the native request', async (t) => {
  const slow = await tts('/v1/text-to-speech/default?output_format=pcm_16000', { text: 'Header speed.' }, { 'X-Service-Prosody': '{"speed":0.5}', 'X-Service-Latency': 'normal', 'X-Service-Temperature': '0.3', 'X-Service-Top-P': '0.5' });
  t.equal(slow.status, 200);
  const slowLen = Buffer.from(await slow.arrayBuffer()).length;
  const normal = Buffer.from(await (await tts('/v1/text-to-speech/default?output_format=pcm_16000', { text: 'Header speed.' })).arrayBuffer()).length;
  t.ok(slowLen > normal * 1.5, 'X-Service-Prosody speed 0.5 slows the speech');
  const badLatency = await tts('/v1/text-to-speech/default', { text: 'x' }, { 'X-Service-Latency': 'warp' });
  t.equal(badLatency.status, 422, 'a native schema violation passes through');
  const unknown = await tts('/v1/text-to-speech/default', { text: 'x' }, { 'X-Service-Nonsense': '1' });
  t.equal(unknown.status, 400);
  t.equal(((await unknown.json()) as any).detail.status, 'invalid_request');
  const refs = await tts('/v1/text-to-speech/default/with-timestamps', { text: 'x' }, { 'X-Service-References': '[]' });
  t.equal(refs.status, 400, 'reference audio refused on the timestamp routes');
  const sttHeader = await stt({}, speech('x y z'), '', { 'X-Service-Temperature': '0.5' });
  t.equal(sttHeader.status, 400, 'native headers on speech to text → 400');
});

t.test('models: legacy eleven_* ids and service/ ids; others model_not_found', async (t) => {
  for (const modelId of ['eleven_multilingual_v2', 'eleven_turbo_v2_5', 'eleven_flash_v2_5', 'service/s2.1-pro', 'service/s2.1-pro-free', 'service/s2-pro', 'service/s1']) {
    const res = await tts('/v1/text-to-speech/default?output_format=pcm_16000', { text: 'Model.', model_id: modelId });
    t.equal(res.status, 200, modelId);
    t.equal(await heard(Buffer.from(await res.arrayBuffer()), 'pcm', 16000), 'Model.', `${modelId} round trip`);
  }
  for (const modelId of ['tts-1', 'service/transcribe-1', 'service/nope', 'undefined', '']) {
    const res = await tts('/v1/text-to-speech/default', { text: 'Model.', model_id: modelId });
    t.equal(res.status, 400, modelId);
    t.equal(((await res.json()) as any).detail.status, 'model_not_found', modelId);
  }
  const list = await el.models.list();
  t.ok(list.some((m) => m.modelId === 'service/s2.1-pro' && m.canDoTextToSpeech === true));
  t.ok(list.some((m) => m.modelId === 'service/transcribe-1' && m.canDoTextToSpeech === false));
});

t.test('authentication: missing key → unauthorized, invalid key → 401 provider_error No permission', async (t) => {
  const none = await fetch(`${base}/v1/voices`);
  t.equal(none.status, 401);
  t.same(await none.json(), { detail: { status: 'unauthorized', message: 'Missing API key: send it in the xi-api-key header' } });
  const bad = await fetch(`${base}/v1/text-to-speech/default`, { method: 'POST', headers: { 'xi-api-key': 'pk_wrong', 'Content-Type': 'application/json' }, body: '{"text":"x"}' });
  t.equal(bad.status, 401);
  t.same(await bad.json(), { detail: { status: 'provider_error', message: 'No permission' } });
  const client = new ElevenLabsClient({ apiKey: 'pk_wrong', baseUrl: base, maxRetries: 0 });
  const e = await statusOf(client.user.get());
  t.equal(e.statusCode, 401);
  t.same(e.body, { detail: { status: 'provider_error', message: 'No permission' } });
});

t.test('voices: the caller\'s voices in the vendor shape; another team\'s → 404 lookup, 400 in synthesis', async (t) => {
  const sample = await tts('/v1/text-to-speech/default?output_format=wav_24000', { text: 'This sample is long enough to be a voice.' });
  const form = new FormData();
  form.append('type', 'tts');
  form.append('train_mode', 'fast');
  form.append('title', 'Narrator');
  form.append('description', 'A calm voice');
  form.append('tags', 'accent:british');
  form.append('tags', 'calm');
  form.append('texts', 'This sample is long enough to be a voice.');
  form.append('voices', new File([new Uint8Array(await sample.arrayBuffer())], 'sample.wav', { type: 'audio/wav' }));
  const created = await fetch(`${app.url}/model`, { method: 'POST', headers: app.auth, body: form });
  t.equal(created.status, 201);
  const id = ((await created.json()) as { _id: string })._id;

  const all = await el.voices.getAll();
  const v = all.voices.find((x) => x.voiceId === id)!;
  t.ok(v, 'listed by /v1/voices');
  t.equal(v.name, 'Narrator');
  t.equal(v.category, 'cloned');
  t.same(v.labels, { accent: 'british', calm: '' });
  t.equal(v.description, 'A calm voice');
  const one = await el.voices.get(id);
  t.equal(one.voiceId, id);
  const page = await el.voices.search({ pageSize: 1 });
  t.equal(page.totalCount, 1);
  t.equal(page.hasMore, false);
  t.equal(page.voices[0]!.voiceId, id);
  const none = await el.voices.search({ search: 'zzz' });
  t.equal(none.totalCount, 0);

  // The voice synthesizes for its team.
  const mine = await collect(await el.textToSpeech.convert(id, { text: 'My voice.', outputFormat: 'pcm_16000' }));
  t.equal(await heard(mine, 'pcm', 16000), 'My voice.');

  const other = await app.newTeam();
  const theirs = new ElevenLabsClient({ apiKey: other.key, baseUrl: base, maxRetries: 0 });
  t.same((await theirs.voices.getAll()).voices, [], 'another team lists none');
  const lookup = await statusOf(theirs.voices.get(id));
  t.equal(lookup.statusCode, 404);
  t.equal(lookup.body?.detail?.status, 'voice_not_found');
  const synth = await statusOf(theirs.textToSpeech.convert(id, { text: 'Not mine.' }));
  t.equal(synth.statusCode, 400);
  t.same(synth.body, { detail: { status: 'provider_error', message: 'Reference not found' } });
  const missing = await statusOf(el.voices.get('no-such-voice'));
  t.equal(missing.statusCode, 404);
});

t.test('v2 voices pages with next_page_token', async (t) => {
  const team = await app.newTeam();
  const c = new ElevenLabsClient({ apiKey: team.key, baseUrl: base, maxRetries: 0 });
  const sample = Buffer.from(await (await tts('/v1/text-to-speech/default?output_format=wav_24000', { text: 'This sample is long enough to be a voice.' })).arrayBuffer());
  for (const title of ['A', 'B', 'C']) {
    const form = new FormData();
    form.append('type', 'tts');
    form.append('train_mode', 'fast');
    form.append('title', title);
    form.append('texts', 'This sample is long enough to be a voice.');
    form.append('voices', new File([new Uint8Array(sample)], 's.wav', { type: 'audio/wav' }));
    t.equal((await fetch(`${app.url}/model`, { method: 'POST', headers: team.auth, body: form })).status, 201);
  }
  const p1 = await c.voices.search({ pageSize: 2 });
  t.equal(p1.voices.length, 2);
  t.equal(p1.hasMore, true);
  t.equal(p1.totalCount, 3);
  const p2 = await c.voices.search({ pageSize: 2, nextPageToken: p1.nextPageToken! });
  t.equal(p2.voices.length, 1);
  t.equal(p2.hasMore, false);
  t.same(new Set([...p1.voices, ...p2.voices].map((v) => v.name)), new Set(['A', 'B', 'C']));
});

t.test('user stub satisfies the official client', async (t) => {
  const u = await el.user.get();
  t.equal(u.userId, app.teamId);
  t.equal(u.subscription.status, 'active');
  t.type(u.subscription.characterLimit, 'number');
});

t.test('speech to text: the official client, constants, word and spacing entries', async (t) => {
  const text = 'hello world from parley';
  const res = (await el.speechToText.convert({ file: new Blob([speech(text)], { type: 'audio/wav' }), modelId: 'scribe_v1', languageCode: 'en' })) as any;
  t.equal(res.text, text);
  t.equal(res.languageCode, 'en', 'echoes the request');
  t.equal(res.languageProbability, 1);
  t.same(res.words.map((w: any) => w.type), ['word', 'spacing', 'word', 'spacing', 'word', 'spacing', 'word']);
  t.equal(res.words.map((w: any) => w.text).join(''), text);
  for (const w of res.words) {
    t.equal(w.logprob, 0);
    t.equal(w.speakerId ?? null, null, 'no speaker (the client maps null to undefined)');
    t.ok(w.end >= w.start);
  }
  const noLang = (await el.speechToText.convert({ file: new Blob([speech('second clip, long enough')], { type: 'audio/wav' }), modelId: 'scribe_v1', timestampsGranularity: 'word', diarize: false, tagAudioEvents: false })) as any;
  t.equal(noLang.text, 'second clip, long enough');
  t.equal(noLang.languageCode, '', 'no language sent: empty string');
  // Raw wire: snake_case constants.
  const raw = await stt({ language_code: 'de' }, speech('raw wire check, long enough'));
  t.equal(raw.status, 200);
  t.match(raw.headers.get('x-generation-id'), /^gen/, 'X-Generation-Id');
  t.equal(raw.body.language_code, 'de');
  t.equal(raw.body.language_probability, 1);
  t.equal(raw.body.words[0].speaker_id, null);
  t.equal(raw.body.words[0].logprob, 0);
  // file_format=pcm_s16le_16: raw 16 kHz PCM.
  const pcm = int16ToPcmBytes(encodeText('raw pcm at sixteen kilohertz', { sampleRateHz: 16000 }).pcm);
  const rawPcm = await stt({ file_format: 'pcm_s16le_16' }, pcm);
  t.equal(rawPcm.body.text, 'raw pcm at sixteen kilohertz');
});

t.test('speech to text: every refusal row; false, False, 0 and off count as unset', async (t) => {
  const rows: Record<string, string> = {
    diarize: 'true', use_multi_channel: 'true', entity_detection: 'all', entity_redaction: 'pii', entity_redaction_mode: 'redacted',
    no_verbatim: 'true', tag_audio_events: 'true', additional_formats: '[{"format":"srt"}]', webhook: 'true', webhook_id: 'wh_1',
    source_url: 'https://example.com/a.wav', cloud_storage_url: 'https://example.com/b.wav',
  };
  for (const [name, value] of Object.entries(rows)) {
    const r = await stt({ [name]: value });
    t.equal(r.status, 400, `${name} refused`);
    t.equal(r.body.detail.status, 'invalid_request', name);
    t.match(r.body.detail.message, name);
    for (const unset of ['false', 'False', '0', 'off']) {
      const ok = await stt({ [name]: unset });
      t.equal(ok.status, 200, `${name}=${unset} counts as unset`);
    }
  }
  const ch = await stt({ timestamps_granularity: 'character' });
  t.equal(ch.status, 400, 'character granularity');
  t.equal(ch.body.detail.status, 'invalid_request');
  const noneG = await stt({ timestamps_granularity: 'none' });
  t.equal(noneG.status, 200);
  t.notOk('start' in noneG.body.words[0], 'none: words without times');
  const logging = await stt({}, undefined, '?enable_logging=false');
  t.equal(logging.status, 400, 'enable_logging=false refused');
  t.match(logging.body.detail.message, 'enable_logging');
  t.equal((await stt({}, undefined, '?enable_logging=true')).status, 200);
  // Through the official client, a refused option is an ElevenLabsError 400.
  const e = await statusOf(el.speechToText.convert({ file: new Blob([speech('x')]), modelId: 'scribe_v1', diarize: true }));
  t.equal(e.statusCode, 400);
  t.equal(e.body?.detail?.status, 'invalid_request');
  const noFile = await stt({ model_id: 'scribe_v1' }, null);
  t.equal(noFile.status, 400);
  const short = await stt({}, speech('a', 24000));
  t.equal(short.status, 400);
  t.equal(short.body.detail.status, 'provider_error', 'native refusal passes through');
});

t.test('round trips: every text comes back exactly through tts and stt', async (t) => {
  const texts = ['Hello, how are you today?', 'Numbers 123 and symbols: #, @!', 'Ünïcödé — naïve café, 日本語', 'Two sentences. Second one here?'];
  for (const text of texts) {
    const audio = await collect(await el.textToSpeech.convert('default', { text, outputFormat: 'wav_24000' }));
    t.equal(await heard(audio, 'wav'), text, `tts: ${text}`);
    const back = (await el.speechToText.convert({ file: new Blob([new Uint8Array(audio)], { type: 'audio/wav' }), modelId: 'scribe_v1' })) as any;
    t.equal(back.text, text, `tts → stt: ${text}`);
    const ts = await el.textToSpeech.convertWithTimestamps('default', { text, outputFormat: 'mp3_44100_128' });
    t.equal(ts.alignment!.characters.join(''), text, `timestamps spell: ${text}`);
    t.equal(await heard(Buffer.from(ts.audioBase64, 'base64'), 'mp3'), text, `with-timestamps audio: ${text}`);
  }
});

t.test('errors: malformed body, missing text, unknown path envelope', async (t) => {
  const bad = await fetch(`${base}/v1/text-to-speech/default`, { method: 'POST', headers: { 'xi-api-key': app.key, 'Content-Type': 'application/json' }, body: '{nope' });
  t.equal(bad.status, 400);
  t.equal(((await bad.json()) as any).detail.status, 'invalid_request');
  const missing = await tts('/v1/text-to-speech/default', { model_id: 'eleven_multilingual_v2' });
  t.equal(missing.status, 422, 'missing text: the vendor 422 list');
  t.same(((await missing.json()) as any).detail[0].loc, ['body', 'text']);
  const empty = await tts('/v1/text-to-speech/default', { text: '   ' });
  t.equal(empty.status, 422, 'empty text: native 422');
});

t.test('error classes of the official client: 422 list, 402 passthrough, Bearer fallback', async (t) => {
  const err = await el.textToSpeech.convert('default', { text: 'Too fast.', voiceSettings: { speed: 3 } }).then(() => null, (e: unknown) => e);
  t.ok(err instanceof ElevenLabs.UnprocessableEntityError, 'a native range violation is UnprocessableEntityError');
  t.equal((err as ElevenLabsError).statusCode, 422);
  t.same(((err as ElevenLabsError).body as any).detail[0].loc, ['body', 'prosody', 'speed']);
  const broke = await app.newTeam({ creditMicros: 0n });
  const poor = new ElevenLabsClient({ apiKey: broke.key, baseUrl: base, maxRetries: 0 });
  const e = await statusOf(poor.textToSpeech.convert('default', { text: 'No credit.' }));
  t.equal(e.statusCode, 402);
  t.equal(e.body?.detail?.status, 'provider_error', 'out of credit: the native status and message');
  const bearer = await fetch(`${base}/v1/models`, { headers: app.auth });
  t.equal(bearer.status, 200, 'Authorization: Bearer is accepted too');
});
