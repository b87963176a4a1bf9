// Spec-coverage tests for the speech specification, native API: the rows of the request-field and
// `model`-header tables, the native authentication row and the trace-propagation rules that
// no other test names (docs/spec-coverage.md lists where every other row is asserted).
import t from 'tap';
import { LatencyMode, type SynthesizeRequest } from '../../src/gen/inference/v1/inference_pb.ts';
import { listUsage, type UsageRow } from '../../src/usage/store.ts';
import { captureSpansForTests } from '../../src/telemetry/tracing.ts';
import { startTestServer } from '../helpers/server.ts';
import { heard, MAGIC } from '../speech/tts-helpers.ts';

const spans = captureSpansForTests();
/** What the backend was asked: the synthesis requests it received, in order. */
const synthRequests: SynthesizeRequest[] = [];
const app = await startTestServer({ backend: 'synthetic', backendOptions: { onCall: (c) => { if (c.rpc === 'synthesize') synthRequests.push(c.request as SynthesizeRequest); } } });
t.teardown(() => app.close());

async function tts(body: unknown, headers: Record<string, string> = {}, path = '/v1/tts') {
  const res = await fetch(app.url + path, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const bytes = Buffer.from(await res.arrayBuffer());
  let json: any;
  try {
    json = JSON.parse(bytes.toString());
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, type: res.headers.get('content-type'), bytes, json };
}

/** Usage is settled after the response ends: polls until `n` rows are there. */
async function usageRows(teamId: string, n: number): Promise<UsageRow[]> {
  let rows: UsageRow[] = [];
  for (let i = 0; i < 100; i++) {
    rows = await listUsage(app.db.sql, teamId);
    if (rows.length >= n) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return rows;
}

async function creditOfTeam(teamId: string): Promise<bigint> {
  const [row] = await app.db.sql<{ credit_micros: bigint }[]>`select credit_micros from teams where id = ${teamId}`;
  return BigInt(row!.credit_micros);
}

t.test('model header: `s2.1-pro` is "used when the header is omitted or has an unrecognized value"', async (t) => {
  for (const model of [undefined, 'speech-1.6', 's3-ultra', '']) {
    const team = await app.newTeam();
    const r = await tts({ text: 'Which model?', format: 'pcm', sample_rate: 16000 }, { ...team.auth, ...(model === undefined ? {} : { model }) });
    t.equal(r.status, 200, `model header ${JSON.stringify(model)}: served`);
    t.equal(await heard(r.bytes, 'pcm', 16000), 'Which model?');
    const rows = await usageRows(team.teamId, 1);
    t.same(rows.map((u) => u.model), ['s2.1-pro'], `model header ${JSON.stringify(model)}: billed and run as s2.1-pro`);
  }
});

t.test('model header: `s2.1-pro-free` is "the same model at zero price"', async (t) => {
  const team = await app.newTeam({ creditMicros: 1_000_000n });
  const text = 'Free of charge.';
  const r = await tts({ text, format: 'pcm', sample_rate: 16000 }, { ...team.auth, model: 's2.1-pro-free' });
  t.equal(r.status, 200);
  t.equal(await heard(r.bytes, 'pcm', 16000), text, 'the same speech');
  const rows = await usageRows(team.teamId, 1);
  t.equal(rows.length, 1, 'the call is recorded');
  t.equal(rows[0]!.model, 's2.1-pro-free');
  t.equal(Number(rows[0]!.amount), text.length, 'characters counted');
  t.equal(Number(rows[0]!.cost_micros), 0, 'at zero price');
  t.equal(await creditOfTeam(team.teamId), 1_000_000n, 'credit untouched');
});

t.test('model header: `s2-pro` and `s1` "remain selectable as previous generations"', async (t) => {
  for (const model of ['s2-pro', 's1', 'S1']) {
    const team = await app.newTeam();
    const r = await tts({ text: 'Older model.', format: 'pcm', sample_rate: 16000 }, { ...team.auth, model });
    t.equal(r.status, 200, model);
    t.equal(await heard(r.bytes, 'pcm', 16000), 'Older model.');
    t.same((await usageRows(team.teamId, 1)).map((u) => u.model), [model.toLowerCase()], `${model}: run and billed as the selected model`);
  }
});

t.test('format: "Default `mp3`" when the body names no format', async (t) => {
  const r = await tts({ text: 'No format given.' });
  t.equal(r.status, 200);
  t.equal(r.type, 'audio/mpeg');
  t.ok(MAGIC.mp3!(r.bytes), 'MP3 bytes');
  t.equal(await heard(r.bytes, 'mp3'), 'No format given.');
});

/** Bitrate (kbit/s) of the first MPEG-1 Layer III frame after any ID3v2 tag. */
function firstFrameKbps(b: Buffer): number | undefined {
  let i = 0;
  if (b.subarray(0, 3).toString('latin1') === 'ID3') i = 10 + ((b[6]! << 21) | (b[7]! << 14) | (b[8]! << 7) | b[9]!);
  for (; i + 3 < b.length; i++) {
    if (b[i] === 0xff && (b[i + 1]! & 0xfe) === 0xfa) {
      // MPEG-1 Layer III bitrate table
      const table = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
      return table[b[i + 2]! >> 4];
    }
  }
  return undefined;
}

t.test('mp3_bitrate: "`64`, `128` or `192`" is the bitrate of the audio returned (default 128)', async (t) => {
  for (const [mp3_bitrate, want] of [[64, 64], [128, 128], [192, 192], [undefined, 128]] as const) {
    const r = await tts({ text: 'Bitrate check.', format: 'mp3', sample_rate: 44100, ...(mp3_bitrate === undefined ? {} : { mp3_bitrate }) });
    t.equal(r.status, 200);
    t.equal(firstFrameKbps(r.bytes), want, `mp3_bitrate ${mp3_bitrate ?? '(omitted)'} → ${want} kbit/s frames`);
    t.equal(await heard(r.bytes, 'mp3'), 'Bitrate check.');
  }
});

t.test('prosody.speed (0.5 to 2.0) sets the speech rate', async (t) => {
  const text = 'Rate of speech.';
  const len: Record<number, number> = {};
  for (const speed of [0.5, 1, 2]) {
    const r = await tts({ text, format: 'pcm', sample_rate: 16000, prosody: { speed } });
    t.equal(r.status, 200, `speed ${speed}`);
    t.equal(await heard(r.bytes, 'pcm', 16000), text, `speed ${speed}: same words`);
    len[speed] = r.bytes.length;
  }
  t.ok(len[2]! < len[1]! && len[1]! < len[0.5]!, `faster speech is shorter (${len[0.5]} > ${len[1]} > ${len[2]} bytes)`);
});

/** The backend request behind one `POST /v1/tts` with `body`. */
async function backendRequestOf(body: Record<string, unknown>): Promise<SynthesizeRequest> {
  const before = synthRequests.length;
  const r = await tts({ text: 'Defaults reach the backend.', format: 'wav', ...body });
  if (r.status !== 200) throw new Error(`tts: ${r.status} ${r.bytes.toString()}`);
  if (synthRequests.length !== before + 1) throw new Error(`expected one backend request, saw ${synthRequests.length - before}`);
  return synthRequests[before]!;
}

t.test('latency: "`balanced` (default) or `normal`" is what the backend is asked for', async (t) => {
  t.equal((await backendRequestOf({})).latency, LatencyMode.BALANCED, 'omitted: balanced');
  t.equal((await backendRequestOf({ latency: null })).latency, LatencyMode.BALANCED, 'null (clients that send it): balanced');
  t.equal((await backendRequestOf({ latency: 'normal' })).latency, LatencyMode.NORMAL, 'normal');
  t.equal((await backendRequestOf({ latency: 'balanced' })).latency, LatencyMode.BALANCED, 'balanced');
});

t.test('chunk_length: "100 to 300, default 200" is what the backend is asked for', async (t) => {
  t.equal((await backendRequestOf({})).chunkLength, 200, 'omitted: 200');
  t.equal((await backendRequestOf({ chunk_length: 100 })).chunkLength, 100);
  t.equal((await backendRequestOf({ chunk_length: 300 })).chunkLength, 300);
});

t.test('normalize ("expands numbers and dates for natural reading"): the switch reaches the backend, which expands', async (t) => {
  t.equal((await backendRequestOf({})).normalize, true, 'omitted: on (the default)');
  t.equal((await backendRequestOf({ normalize: false })).normalize, false);
  t.equal((await backendRequestOf({ normalize: true })).normalize, true);
});

t.test('authentication: native REST needs "`Authorization: Bearer <API_KEY>`"', async (t) => {
  const routes: [string, string, BodyInit | undefined, Record<string, string>][] = [
    ['POST', '/v1/tts', JSON.stringify({ text: 'x' }), { 'Content-Type': 'application/json' }],
    ['POST', '/v1/tts/stream/with-timestamp', JSON.stringify({ text: 'x' }), { 'Content-Type': 'application/json' }],
    ['GET', '/model', undefined, {}],
    ['GET', '/model/voice_missing', undefined, {}],
  ];
  for (const [method, path, body, headers] of routes) {
    const none = await fetch(app.url + path, { method, headers, body });
    t.equal(none.status, 401, `${method} ${path} without a key`);
    await none.arrayBuffer();
    const bad = await fetch(app.url + path, { method, headers: { ...headers, Authorization: 'Bearer nope' }, body });
    t.equal(bad.status, 401, `${method} ${path} with a bad key`);
    t.same(await bad.json(), { status: 401, message: 'Invalid Token' });
  }
});

t.test('with-timestamp: a team without credit gets 402 Out of API credit before any event', async (t) => {
  const poor = await app.newTeam({ creditMicros: 0n });
  const r = await tts({ text: 'No credit.' }, poor.auth, '/v1/tts/stream/with-timestamp');
  t.equal(r.status, 402);
  t.same(r.json, { status: 402, message: 'Out of API credit' });
});

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

t.test('tracing "does not change authentication, rate limits, billing, request priority or generated output"', async (t) => {
  const bad = await tts({ text: 'x' }, { Authorization: 'Bearer nope', traceparent: TRACEPARENT });
  t.equal(bad.status, 401, 'authentication: a bad key with a valid traceparent is still 401');
  t.same(bad.json, { status: 401, message: 'Invalid Token' });

  const poor = await app.newTeam({ creditMicros: 0n });
  const broke = await tts({ text: 'x' }, { ...poor.auth, traceparent: TRACEPARENT });
  t.equal(broke.status, 402, 'billing: no credit is still 402 with a traceparent');

  const body = { text: 'Same audio either way.', format: 'pcm', sample_rate: 16000 };
  const plainTeam = await app.newTeam();
  const tracedTeam = await app.newTeam();
  const plain = await tts(body, plainTeam.auth);
  const traced = await tts(body, { ...tracedTeam.auth, traceparent: TRACEPARENT });
  t.equal(traced.status, 200);
  t.ok(traced.bytes.equals(plain.bytes), 'generated output: identical bytes');
  const strip = (rows: UsageRow[]) => rows.map((u) => ({ kind: u.kind, model: u.model, amount: Number(u.amount), cost: Number(u.cost_micros) }));
  t.same(strip(await usageRows(tracedTeam.teamId, 1)), strip(await usageRows(plainTeam.teamId, 1)), 'billing: the same usage and cost');
});

t.test('tracing: "Keys, user identifiers, transcripts and audio URLs must not be placed in trace ids or span names"', async (t) => {
  spans.reset();
  const text = 'Confidential words spoken here.';
  const synth = await tts({ text, format: 'wav', sample_rate: 16000 }, { traceparent: TRACEPARENT });
  t.equal(synth.status, 200);
  const form = new FormData();
  form.set('audio', new Blob([new Uint8Array(synth.bytes)], { type: 'audio/wav' }), 'clip.wav');
  const asr = await fetch(`${app.url}/v1/asr`, { method: 'POST', headers: app.auth, body: form });
  t.equal(asr.status, 200);
  const transcript = ((await asr.json()) as { text: string }).text;
  t.equal(transcript, text);
  const voiceForm = new FormData();
  voiceForm.set('type', 'tts');
  voiceForm.set('title', 'Traced voice');
  voiceForm.set('train_mode', 'fast');
  voiceForm.set('texts', text);
  voiceForm.set('voices', new File([new Uint8Array(synth.bytes)], 'sample.wav', { type: 'audio/wav' }));
  const voice = (await (await fetch(`${app.url}/model`, { method: 'POST', headers: app.auth, body: voiceForm })).json()) as { _id: string; samples: { audio: string }[] };
  const withVoice = await tts({ text: 'With a saved voice.', format: 'pcm', sample_rate: 16000, reference_id: voice._id });
  t.equal(withVoice.status, 200);
  for (let i = 0; i < 50 && spans.getFinishedSpans().length < 6; i++) await new Promise((r) => setTimeout(r, 20));
  const finished = spans.getFinishedSpans();
  t.ok(finished.length >= 6, `request and backend spans of the three calls (${finished.length})`);
  const forbidden = [app.key, app.teamId, text, transcript.split(' ')[0]!, voice._id, voice.samples[0]?.audio ?? '/model/'];
  for (const s of finished) {
    for (const word of forbidden) {
      t.notOk(s.name.includes(word), `span ${JSON.stringify(s.name)} does not name ${JSON.stringify(word.slice(0, 24))}`);
      t.notOk(s.spanContext().traceId.includes(word) || s.spanContext().spanId.includes(word), 'nor do its ids');
    }
  }
});

t.test('prosody.volume (number, dB) scales the loudness of the audio returned', async (t) => {
  const rms = (b: Buffer) => {
    let sum = 0;
    const n = b.length >> 1;
    for (let i = 0; i < n; i++) sum += b.readInt16LE(i * 2) ** 2;
    return Math.sqrt(sum / n);
  };
  const level: Record<number, number> = {};
  for (const volume of [0, -6, -20]) {
    const r = await tts({ text: 'Loud and quiet.', format: 'pcm', sample_rate: 16000, prosody: { volume } });
    t.equal(r.status, 200, `volume ${volume}`);
    level[volume] = rms(r.bytes);
  }
  const ratio6 = level[-6]! / level[0]!;
  const ratio20 = level[-20]! / level[0]!;
  t.ok(ratio6 > 0.45 && ratio6 < 0.56, `-6 dB is about half the amplitude (ratio ${ratio6.toFixed(3)})`);
  t.ok(ratio20 > 0.08 && ratio20 < 0.12, `-20 dB is about a tenth (ratio ${ratio20.toFixed(3)})`);
});
