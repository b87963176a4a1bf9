import t from 'tap';
import { FishAudioClient, FishAudioError } from 'fish-audio';
import fishSdk from 'fish-audio-sdk';
import { pack } from 'msgpackr';
import { createEspeakEngine } from '../../native/engines/espeak.ts';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { createEncoder, int16ToPcmBytes, wavHeader } from '../../src/audio/index.ts';
import { listUsage } from '../../src/usage/store.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const { Session, ASRRequest } = fishSdk as unknown as {
  Session: new (key: string, base: string) => { asr(r: unknown): Promise<{ text: string; duration: number; segments: { text: string; start: number; end: number }[] }>; close(): void };
  ASRRequest: new (audio: Buffer, language?: string, ignoreTimestamps?: boolean) => unknown;
};

const TEXT = 'hello world from parley';

function wav(pcm: Int16Array, rate: number): Uint8Array<ArrayBuffer> {
  const data = int16ToPcmBytes(pcm);
  const out = new Uint8Array(44 + data.byteLength);
  out.set(wavHeader(rate, data.byteLength));
  out.set(data, 44);
  return out;
}

/** Synthetic speech for `text` as a WAV file. */
const speech = (text: string, rate = 24000) => wav(encodeText(text, { sampleRateHz: rate }).pcm, rate);

function form(fields: Record<string, string | Uint8Array>): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) {
    if (typeof v === 'string') f.append(k, v);
    else f.append(k, new Blob([v as Uint8Array<ArrayBuffer>], { type: 'audio/wav' }), `${k}.wav`);
  }
  return f;
}

let app: TestServer;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
});
t.teardown(() => app.close());

const post = (body: BodyInit, headers: Record<string, string> = {}) => fetch(`${app.url}/v1/asr`, { method: 'POST', headers: { ...app.auth, ...headers }, body });

t.test('the official fish-audio client transcribes synthetic speech exactly', async (t) => {
  const fish = new FishAudioClient({ apiKey: app.key, baseUrl: app.url });
  const audio = new File([speech(TEXT)], 'hello.wav', { type: 'audio/wav' });
  const res = (await fish.speechToText.convert({ audio, language: 'en-US' })) as unknown as Record<string, unknown>;
  t.equal(res.text, TEXT);
  t.equal(res.language, 'en-US', 'language echoes the request');
  t.equal(res.language_code, 'en');
  t.ok(typeof res.duration === 'number' && (res.duration as number) > 1);
  const segments = res.segments as { text: string; start: number; end: number }[];
  t.equal(segments.length, 1);
  t.equal(segments[0]!.text, TEXT);
  t.ok(segments[0]!.start >= 0 && segments[0]!.end > segments[0]!.start && segments[0]!.end <= (res.duration as number));
  t.notOk('words' in res, 'ignore_timestamps defaults to true: no words');
});

t.test('the official client with ignore_timestamps=false gets words', async (t) => {
  const fish = new FishAudioClient({ apiKey: app.key, baseUrl: app.url });
  const audio = new File([speech(TEXT)], 'hello.wav', { type: 'audio/wav' });
  const res = (await fish.speechToText.convert({ audio, ignore_timestamps: false })) as unknown as Record<string, unknown>;
  t.equal(res.text, TEXT);
  t.equal(res.language, null, 'no hint: language is null');
  t.equal(res.language_code, null);
  const words = res.words as { text: string; start: number; end: number }[];
  t.same(words.map((w) => w.text), TEXT.split(' '));
  for (let i = 1; i < words.length; i++) t.ok(words[i]!.start >= words[i - 1]!.end, 'words in order');
});

t.test('the community fish-audio-sdk sends MessagePack and gets the exact text', async (t) => {
  const session = new Session(app.key, app.url);
  t.teardown(() => session.close());
  const res = await session.asr(new ASRRequest(Buffer.from(speech(TEXT, 16000)), 'en', false));
  t.equal(res.text, TEXT);
  t.equal(res.segments[0]!.text, TEXT);
  // Its `language` is undefined when not given, which msgpack sends as nil: treated as absent.
  const res2 = await session.asr(new ASRRequest(Buffer.from(speech('second clip here', 44100))));
  t.equal(res2.text, 'second clip here');
});

t.test('MP3 uploads are decoded and transcribed', async (t) => {
  const { pcm } = encodeText(TEXT, { sampleRateHz: 44100 });
  const enc = await createEncoder({ format: 'mp3', sampleRateHz: 44100, inputSampleRateHz: 44100 });
  const mp3 = Buffer.concat([...enc.push(pcm), ...enc.end()].map((c) => Buffer.from(c)));
  const res = await post(form({ audio: mp3, language: 'en' }));
  t.equal(res.status, 200);
  const body = await res.json();
  t.equal(body.text, TEXT);
  t.equal(body.language, 'en');
});

t.test('errors', async (t) => {
  const missing = await post(form({ language: 'en' }));
  t.equal(missing.status, 422, 'missing audio');
  const list = await missing.json();
  t.same(list[0].loc, ['body', 'audio']);

  const garbage = await post(form({ audio: new TextEncoder().encode('this is not audio at all, just some text bytes') }));
  t.equal(garbage.status, 400, 'undecodable audio');
  t.match(await garbage.json(), { status: 400, message: /could not be decoded/ });

  const short = await post(form({ audio: wav(new Int16Array(8000), 16000) }));
  t.equal(short.status, 400, 'half a second is too short');
  t.same(await short.json(), { status: 400, message: 'Audio is shorter than 1 second' });

  const json = await post(JSON.stringify({ audio: Buffer.from(speech(TEXT)).toString('base64') }), { 'Content-Type': 'application/json' });
  t.equal(json.status, 415, 'JSON with base64 audio is refused');
  t.equal(await json.text(), '');

  const plain = await post('hello', { 'Content-Type': 'text/plain' });
  t.equal(plain.status, 415);

  const bad = await fetch(`${app.url}/v1/asr`, { method: 'POST', headers: { Authorization: 'Bearer nope' }, body: form({ audio: speech(TEXT) }) });
  t.equal(bad.status, 401);
  t.same(await bad.json(), { status: 401, message: 'Invalid Token' });

  const none = await fetch(`${app.url}/v1/asr`, { method: 'POST', body: form({ audio: speech(TEXT) }) });
  t.equal(none.status, 401, 'no key: bare 401');
  t.equal(none.headers.get('www-authenticate'), 'Bearer');

  const textAudio = await post(new Uint8Array(pack({ audio: 'aGVsbG8=' })), { 'Content-Type': 'application/msgpack' });
  t.equal(textAudio.status, 422, 'msgpack audio must be bytes');

  const badBool = await post(form({ audio: speech(TEXT), ignore_timestamps: 'maybe' }));
  t.equal(badBool.status, 422);

  const fish = new FishAudioClient({ apiKey: 'wrong', baseUrl: app.url });
  const err = await fish.speechToText.convert({ audio: new File([speech(TEXT)], 'a.wav') }, { maxRetries: 0 }).then(() => null, (e: unknown) => e);
  t.ok(err instanceof FishAudioError);
  t.equal((err as FishAudioError).statusCode, 401);
  t.same((err as FishAudioError).body, { status: 401, message: 'Invalid Token' });
});

t.test('real speech without a speech-to-text provider: 400 (not retried) naming the settings that enable recognition', async (t) => {
  const espeak = createEspeakEngine({ workers: 1 });
  t.teardown(() => espeak.close());
  const real = await espeak.synthesize('what is the weather in paris', { language: 'en', speed: 1, sampleRateHz: 16000, voice: '' }, new AbortController().signal);
  const res = await post(form({ audio: wav(real.pcm, real.sampleRateHz) }));
  t.equal(res.status, 400);
  const body = await res.json();
  t.match(body, { status: 400, message: /^Not supported by the inference backend: audio is not synthetic speech: recognizing real speech needs a speech-to-text provider \(set PARLEY_STT_PROVIDER/ });
  t.notMatch(body.message, /pocketsphinx/, 'no longer sends anyone to install pocketsphinx');
});

t.test('audio over 20 MB is 413', async (t) => {
  const big = new Uint8Array(21 * 1024 * 1024);
  big.set(speech(TEXT));
  const res = await post(form({ audio: big }));
  t.equal(res.status, 413);
  t.match(await res.json(), { status: 413 });
});

t.test('audio over 60 minutes is 400', async (t) => {
  // 61 minutes of 4 kHz 8-bit silence fits under the 20 MB byte limit (14.6 MB).
  const rate = 4000;
  const seconds = 61 * 60;
  const data = seconds * rate; // 8-bit mono
  const out = new Uint8Array(44 + data);
  const v = new DataView(out.buffer);
  const ascii = (at: number, s: string) => [...s].forEach((c, k) => (out[at + k] = c.charCodeAt(0)));
  ascii(0, 'RIFF'); v.setUint32(4, 36 + data, true); ascii(8, 'WAVE'); ascii(12, 'fmt ');
  v.setUint32(16, 16, true); v.setUint16(20, 1, true); v.setUint16(22, 1, true); v.setUint32(24, rate, true);
  v.setUint32(28, rate, true); v.setUint16(32, 1, true); v.setUint16(34, 8, true); ascii(36, 'data'); v.setUint32(40, data, true);
  out.fill(128, 44);
  t.ok(out.byteLength < 20 * 1024 * 1024);
  const res = await post(form({ audio: out }));
  t.equal(res.status, 400);
  t.same(await res.json(), { status: 400, message: 'Audio is longer than 60 minutes' });
});

t.test('usage is recorded in seconds; a team without credit gets 402', async (t) => {
  const team = await app.newTeam();
  const audio = speech(TEXT);
  const res = await fetch(`${app.url}/v1/asr`, { method: 'POST', headers: team.auth, body: form({ audio }) });
  t.equal(res.status, 200);
  const { duration } = await res.json();
  const rows = await listUsage(app.db.sql, team.teamId);
  t.equal(rows.length, 1);
  t.match(rows[0], { kind: 'asr_seconds', model: 'transcribe-1' });
  t.ok(Math.abs(Number(rows[0]!.amount) - duration) < 0.01, 'the decoded duration');

  const broke = await app.newTeam({ creditMicros: 0n });
  const refused = await fetch(`${app.url}/v1/asr`, { method: 'POST', headers: broke.auth, body: form({ audio }) });
  t.equal(refused.status, 402);
  t.same(await refused.json(), { status: 402, message: 'Out of API credit' });
});

t.test('a recording longer than one backend message piece (over 1 MiB at 16 kHz) round-trips', async (t) => {
  const long = Array.from({ length: 30 }, (_, i) => `sentence number ${i} is here.`).join(' ');
  const audio = speech(long, 16000);
  t.ok(audio.byteLength > 1024 * 1024 + 44);
  const res = await post(form({ audio }));
  t.equal(res.status, 200);
  const body = await res.json();
  t.equal(body.text, long);
  t.ok(body.duration > 30);
});
