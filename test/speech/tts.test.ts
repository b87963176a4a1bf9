// POST /v1/tts through the real clients (official `fish-audio` in MessagePack, community
// `fish-audio-sdk` in JSON), every format, against a real platform and native backend.
import t from 'tap';
import { FishAudioClient } from 'fish-audio';
import { Session, TTSRequest } from 'fish-audio-sdk';
import { pack } from 'msgpackr';
import { startTestServer } from '../helpers/server.ts';
import { collect, heard, MAGIC } from './tts-helpers.ts';
import { recordUsage } from '../../src/speech/usage.ts';

const app = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());

const FORMATS = ['wav', 'mp3', 'pcm', 'opus'] as const;
const TEXT = 'Hello from Parley. Numbers 42 and café.';

t.test('official fish-audio client (MessagePack): every format streams decodable audio that transcribes back', async (t) => {
  const fish = new FishAudioClient({ apiKey: app.key, baseUrl: app.url });
  for (const format of FORMATS) {
    const stream = await fish.textToSpeech.convert({ text: TEXT, format, latency: 'normal', chunk_length: 200 } as never, 's1');
    const bytes = await collect(stream as ReadableStream<Uint8Array>);
    t.ok(MAGIC[format]!(bytes), `${format}: magic bytes`);
    t.equal(await heard(bytes, format, 44100), TEXT, `${format}: speech transcribes back exactly`);
  }
});

t.test('community fish-audio-sdk (JSON with its defaults and nulls): every format', async (t) => {
  const session = new Session(app.key, app.url);
  t.teardown(() => session.close());
  const log = console.log;
  const error = console.error;
  console.log = () => {}; // the SDK logs every request
  console.error = () => {};
  t.teardown(() => {
    console.log = log;
    console.error = error;
  });
  for (const format of FORMATS) {
    const req = new TTSRequest(TEXT, { format, sampleRate: format === 'opus' ? 48000 : format === 'mp3' ? 32000 : 24000, mp3Bitrate: 64 } as never);
    const parts: Buffer[] = [];
    for await (const c of session.tts(req)) parts.push(c);
    const bytes = Buffer.concat(parts);
    t.ok(MAGIC[format]!(bytes), `${format}: magic bytes`);
    t.equal(await heard(bytes, format, 24000), TEXT, `${format}: speech transcribes back exactly`);
  }
});

async function post(body: unknown, opts: { msgpack?: boolean; headers?: Record<string, string>; path?: string } = {}) {
  const res = await fetch(app.url + (opts.path ?? '/v1/tts'), {
    method: 'POST',
    headers: { ...app.auth, 'Content-Type': opts.msgpack ? 'application/msgpack' : 'application/json', ...opts.headers },
    body: opts.msgpack ? new Uint8Array(pack(body)) : JSON.stringify(body),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  let json: any;
  try {
    json = JSON.parse(bytes.toString());
  } catch {
    json = undefined;
  }
  return { status: res.status, type: res.headers.get('content-type'), bytes, json };
}

t.test('Content-Type names the format; WAV carries streaming placeholder sizes', async (t) => {
  const types = { mp3: 'audio/mpeg', wav: 'audio/wav', pcm: 'audio/pcm;rate=16000', opus: 'audio/ogg;codecs=opus' };
  for (const format of FORMATS) {
    const r = await post({ text: 'Hi.', format, ...(format === 'pcm' || format === 'wav' ? { sample_rate: 16000 } : {}) });
    t.equal(r.status, 200);
    t.equal(r.type, types[format], format);
    if (format === 'wav') {
      t.equal(r.bytes.readUInt32LE(4), 4294967076, 'RIFF size placeholder');
      t.equal(r.bytes.readUInt32LE(40), 4294967040, 'data size placeholder');
    }
  }
});

t.test('JSON and MessagePack give the same audio; references as bytes and as base64', async (t) => {
  const audio = Buffer.from('RIFF0000WAVEfmt not really audio');
  const a = await post({ text: 'Same either way.', format: 'pcm', sample_rate: 8000, references: [{ audio, text: 'ref' }] }, { msgpack: true });
  const b = await post({ text: 'Same either way.', format: 'pcm', sample_rate: 8000, references: [{ audio: audio.toString('base64'), text: 'ref' }] });
  t.equal(a.status, 200);
  t.equal(b.status, 200);
  t.ok(a.bytes.equals(b.bytes), 'identical PCM');
  const bad = await post({ text: 'x', references: [{ audio: 'not base64!', text: '' }] });
  t.equal(bad.status, 422, 'JSON reference audio must be base64');
});

t.test('explicit nulls are absent; unknown fields are ignored; the model header defaults', async (t) => {
  const r = await post({ text: 'Nulls.', format: 'pcm', sample_rate: null, opus_bitrate: null, reference_id: null, prosody: null, model_id: null, something_new: 1 }, { headers: { model: 'speech-1.6' } });
  t.equal(r.status, 200);
  t.equal(r.type, 'audio/pcm;rate=44100', 'null sample_rate → the default 44.1 kHz');
  t.equal(await heard(r.bytes, 'pcm', 44100), 'Nulls.');
});

t.test('every range boundary: accepted at the limit, refused one past', async (t) => {
  const base = { text: 'Ok.', format: 'pcm', sample_rate: 8000 };
  const cases: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ['prosody.speed low', { prosody: { speed: 0.5 } }, { prosody: { speed: 0.49 } }],
    ['prosody.speed high', { prosody: { speed: 2.0 } }, { prosody: { speed: 2.01 } }],
    ['prosody.volume low', { prosody: { volume: -20 } }, { prosody: { volume: -20.5 } }],
    ['prosody.volume high', { prosody: { volume: 20 } }, { prosody: { volume: 20.5 } }],
    ['chunk_length low', { chunk_length: 100 }, { chunk_length: 99 }],
    ['chunk_length high', { chunk_length: 300 }, { chunk_length: 301 }],
    ['temperature low', { temperature: 0 }, { temperature: -0.01 }],
    ['temperature high', { temperature: 1 }, { temperature: 1.01 }],
    ['top_p low', { top_p: 0 }, { top_p: -0.01 }],
    ['top_p high', { top_p: 1 }, { top_p: 1.01 }],
    ['repetition_penalty low', { repetition_penalty: 1 }, { repetition_penalty: 0.99 }],
    ['repetition_penalty high', { repetition_penalty: 2 }, { repetition_penalty: 2.01 }],
    ['max_new_tokens low', { max_new_tokens: 1 }, { max_new_tokens: 0 }],
    ['max_new_tokens high', { max_new_tokens: 2048 }, { max_new_tokens: 2049 }],
    ['mp3_bitrate', { format: 'mp3', sample_rate: 32000, mp3_bitrate: 192 }, { format: 'mp3', sample_rate: 32000, mp3_bitrate: 96 }],
    ['mp3_bitrate low', { format: 'mp3', sample_rate: 32000, mp3_bitrate: 64 }, { format: 'mp3', sample_rate: 32000, mp3_bitrate: 63 }],
    ['opus_bitrate auto', { format: 'opus', sample_rate: 48000, opus_bitrate: -1000 }, { format: 'opus', sample_rate: 48000, opus_bitrate: -1 }],
    ['opus_bitrate listed', { format: 'opus', sample_rate: 48000, opus_bitrate: 64000 }, { format: 'opus', sample_rate: 48000, opus_bitrate: 64001 }],
    ['opus_bitrate kbit/s', { format: 'opus', sample_rate: 48000, opus_bitrate: 24 }, { format: 'opus', sample_rate: 48000, opus_bitrate: 25 }],
    ['latency', { latency: 'normal' }, { latency: 'low' }],
    ['format', { format: 'wav' }, { format: 'flac' }],
    ['normalize', { normalize: false }, { normalize: 'yes' }],
  ];
  for (const [name, ok, bad] of cases) {
    const a = await post({ ...base, ...ok });
    t.equal(a.status, 200, `${name}: accepted at the limit`);
    const b = await post({ ...base, ...bad });
    t.equal(b.status, 422, `${name}: refused one past`);
    t.ok(Array.isArray(b.json) && b.json[0].loc[0] === 'body', `${name}: the 422 list names the field`);
  }
});

t.test('sample rate per format: allowed rates pass, others are 400 Invalid sample rate', async (t) => {
  const allowed: Record<string, number[]> = { wav: [8000, 16000, 24000, 32000, 44100, 48000], pcm: [8000, 48000], mp3: [32000, 44100], opus: [48000] };
  const refused: Record<string, number[]> = { wav: [22050, 11025], pcm: [96000], mp3: [48000, 16000], opus: [44100, 24000] };
  for (const [format, rates] of Object.entries(allowed)) {
    for (const sample_rate of rates) t.equal((await post({ text: 'Rate.', format, sample_rate })).status, 200, `${format} ${sample_rate}`);
  }
  for (const [format, rates] of Object.entries(refused)) {
    for (const sample_rate of rates) {
      const r = await post({ text: 'Rate.', format, sample_rate });
      t.equal(r.status, 400, `${format} ${sample_rate} refused`);
      t.match(r.json?.message, /^Invalid sample rate/);
    }
  }
});

t.test('text: empty is 422; 20,000 characters are accepted, 20,001 are 400', async (t) => {
  t.equal((await post({ text: '' })).status, 422);
  t.equal((await post({ text: '   ' })).status, 422);
  t.equal((await post({})).status, 422, 'missing text');
  const over = await post({ text: 'a'.repeat(20_001), format: 'pcm' });
  t.equal(over.status, 400);
  t.match(over.json?.message, /20000 characters/);
  // At the limit: accepted (the response starts); the test stops reading at once.
  const ac = new AbortController();
  const res = await fetch(app.url + '/v1/tts', { method: 'POST', signal: ac.signal, headers: { ...app.auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'word '.repeat(4000), format: 'pcm', sample_rate: 8000 }) });
  t.equal(res.status, 200, '20,000 characters accepted');
  ac.abort();
  await res.body?.cancel().catch(() => {});
});

t.test('errors: bad key, wrong media type, unknown voice, malformed body', async (t) => {
  const bad = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { Authorization: 'Bearer nope', 'Content-Type': 'application/json' }, body: '{"text":"x"}' });
  t.equal(bad.status, 401);
  t.same(await bad.json(), { status: 401, message: 'Invalid Token' });
  const plain = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...app.auth, 'Content-Type': 'text/plain' }, body: 'hello' });
  t.equal(plain.status, 415);
  const voice = await post({ text: 'Who?', reference_id: 'no-such-voice' });
  t.equal(voice.status, 400);
  t.equal(voice.json?.message, 'Reference not found');
  const broken = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' }, body: '{"text":' });
  t.equal(broken.status, 400);
});

t.test('a team without credit gets 402; usage is recorded and settled after a synthesis', async (t) => {
  const poor = await app.newTeam({ creditMicros: 0n });
  const r = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...poor.auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'Hi.' }) });
  t.equal(r.status, 402);
  t.same(await r.json(), { status: 402, message: 'Out of API credit' });

  const rich = await app.newTeam({ creditMicros: 1_000_000n });
  const text = 'Count these characters.';
  const ok = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...rich.auth, 'Content-Type': 'application/json', model: 's2.1-pro' }, body: JSON.stringify({ text, format: 'pcm' }) });
  t.equal(ok.status, 200);
  await ok.arrayBuffer();
  const sql = app.db.sql;
  let rows: any[] = [];
  for (let i = 0; i < 50 && rows.length === 0; i++) {
    rows = await sql`select kind, model, amount, cost_micros from usage where team_id = ${rich.teamId}`;
    if (!rows.length) await new Promise((r) => setTimeout(r, 50));
  }
  t.same(rows.map((r) => ({ kind: r.kind, model: r.model, amount: Number(r.amount), cost: Number(r.cost_micros) })), [{ kind: 'tts_characters', model: 's2.1-pro', amount: text.length, cost: text.length * 15 }]);
  const [team] = await sql`select credit_micros from teams where id = ${rich.teamId}`;
  t.equal(Number(team!.credit_micros), 1_000_000 - text.length * 15, 'credit settled');
  const ledger = await sql`select amount_micros, reason from credit_ledger where team_id = ${rich.teamId} and reason = 'usage'`;
  t.equal(ledger.length, 1, 'one ledger entry');
  t.equal(Number(ledger[0]!.amount_micros), -text.length * 15);
});

t.test('usage recorded at once is written together: a row and a ledger entry per call, the credit debited by the sum', async (t) => {
  const a = await app.newTeam({ creditMicros: 1_000_000n });
  const b = await app.newTeam({ creditMicros: 1_000_000n });
  const calls = [
    { teamId: a.teamId, amount: 10 },
    { teamId: b.teamId, amount: 7 },
    { teamId: a.teamId, amount: 20 },
    { teamId: a.teamId, amount: 30 },
    { teamId: b.teamId, amount: 0 }, // nothing to record
  ];
  const sql = app.db.sql;
  const rows = await Promise.all(calls.map((c) => recordUsage(sql, { ...c, kind: 'tts_characters', model: 's2.1-pro' })));
  t.same(rows.map((r) => (r ? Number(r.amount) : null)), [10, 7, 20, 30, null], 'each call gets its own row back');
  const credit = async (teamId: string) => Number((await sql`select credit_micros from teams where id = ${teamId}`)[0]!.credit_micros);
  t.equal(await credit(a.teamId), 1_000_000 - 60 * 15, 'team a debited by the sum of its three calls');
  t.equal(await credit(b.teamId), 1_000_000 - 7 * 15);
  const ledger = await sql`select amount_micros from credit_ledger where team_id = ${a.teamId} and reason = 'usage' order by id`;
  t.same(ledger.map((l) => Number(l.amount_micros)), [-150, -300, -450], 'one ledger entry per call');
  const usage = await sql`select amount from usage where team_id = ${b.teamId}`;
  t.same(usage.map((u) => Number(u.amount)), [7]);
});

t.test('reference_id: a stored voice of the team synthesizes; another team’s private voice is 400 Reference not found', async (t) => {
  const sample = await post({ text: 'This sample is long enough to be a voice.', format: 'wav', sample_rate: 24000 });
  t.equal(sample.status, 200);
  const form = new FormData();
  form.append('type', 'tts');
  form.append('title', 'Mine');
  form.append('train_mode', 'fast');
  form.append('texts', 'This sample is long enough to be a voice.');
  form.append('voices', new File([new Uint8Array(sample.bytes)], 'sample.wav', { type: 'audio/wav' }));
  const created = await fetch(app.url + '/model', { method: 'POST', headers: app.auth, body: form });
  t.equal(created.status, 201);
  const voice = (await created.json()) as { _id: string };
  const ok = await post({ text: 'With my voice.', format: 'pcm', reference_id: voice._id });
  t.equal(ok.status, 200);
  t.equal(await heard(ok.bytes, 'pcm', 44100), 'With my voice.');

  const other = await app.newTeam();
  const res = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...other.auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'Not mine.', reference_id: voice._id }) });
  t.equal(res.status, 400);
  t.same(await res.json(), { status: 400, message: 'Reference not found' });
});
