// POST /v1/voice-design against a real platform and native backend (espeak engine): the upstream
// request and response shapes, the model header, refusals, billing; a candidate saved through
// POST /model, then heard in /v1/tts and in an agent's session (its pitch is the design's);
// a backend that cannot design answers a clear 400.
import t from 'tap';
import { decodeAudio } from '../../src/audio/index.ts';
import { medianF0 } from '../helpers/pitch.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { connect, createSession, agentWith } from '../e2e/session-helpers.ts';

const app: TestServer = await startTestServer({ backend: 'espeak' });
t.teardown(() => app.close());

const MODEL = { model: 'voice-design-1' };
/** The upstream document's example request. */
const EXAMPLE = { instruction: 'Warm, confident studio narrator with a natural tone', reference_text: 'Welcome to Fish Audio.', language: 'en', n: 2, speed: 1, num_step: 32, guidance_scale: 2, instruct_guidance_scale: 0, seed: 42 };

const design = (body: unknown, headers: Record<string, string> = MODEL, auth = app.auth) => app.req('POST', '/v1/voice-design', body, { ...auth, ...headers });
const credit = async (teamId: string) => BigInt((await app.db.sql<{ c: string }[]>`select credit_micros::text as c from teams where id = ${teamId}`)[0]!.c);

/** The PCM of a base64 WAV (or any format decodeAudio reads). */
async function pcmOf(bytes: Uint8Array): Promise<{ pcm: Int16Array; rate: number }> {
  const d = await decodeAudio(bytes);
  return { pcm: d.pcm, rate: d.sampleRateHz };
}

t.test('the upstream example: two candidates with WAV previews, the instruction, and what espeak made of it; billed once', async (t) => {
  const before = await credit(app.teamId);
  const models = (await app.req('GET', '/model?self=true')).body.total;
  const r = await design(EXAMPLE);
  t.equal(r.status, 200, r.status === 200 ? 'designed' : r.text);
  t.equal(r.body.candidates.length, 2);
  for (const [i, c] of r.body.candidates.entries()) {
    t.same(Object.keys(c).sort(), ['audio_base64', 'duration_ms', 'id', 'index', 'instruct', 'language', 'sample_rate', 'summary', 'text']);
    t.equal(c.index, i);
    t.match(c.id, /^vd_[A-Za-z0-9_-]+\.[0-9a-f]{32}$/);
    const wav = Buffer.from(c.audio_base64, 'base64');
    t.equal(wav.subarray(0, 4).toString(), 'RIFF');
    const { pcm, rate } = await pcmOf(wav);
    t.equal(rate, c.sample_rate);
    t.ok(Math.abs((pcm.length / rate) * 1000 - c.duration_ms) <= 1, 'duration_ms is the audio\'s');
    t.equal(c.text, 'Welcome to Fish Audio.');
    t.equal(c.instruct, EXAMPLE.instruction);
    t.equal(c.language, 'en');
    t.match(c.summary, /Not applied \(espeak varies only voice variant, pitch and pace\): warm, confident, studio, narrator, natural\./);
  }
  t.not(r.body.candidates[0].id, r.body.candidates[1].id);
  const again = await design(EXAMPLE);
  t.same(again.body.candidates.map((c: { id: string }) => c.id), r.body.candidates.map((c: { id: string }) => c.id), 'the same seed gives the same candidates (stable ids)');
  t.equal(await credit(app.teamId), before - 20_000n, '0.01 per successful call');
  const usage = await app.db.sql<{ kind: string; amount: number; cost_micros: string }[]>`select kind, amount, cost_micros::text from usage where team_id = ${app.teamId} and kind = 'voice_designs'`;
  t.same(usage.map((u) => [u.amount, u.cost_micros]), [[1, '10000'], [1, '10000']]);
  t.equal((await app.req('GET', '/model?self=true')).body.total, models, 'stateless: no voice model was created');
  const report = await app.req('GET', '/v1/usage');
  t.match(report.body.totals.find((k: { kind: string }) => k.kind === 'voice_designs'), { unit: 'calls', amount: 2, cost: 0.02, count: 2 }, 'in the usage report');
});

t.test('the model header, the body\'s schema and ranges, the content type and the key', async (t) => {
  const cases: [string, unknown, Record<string, string>, unknown[]][] = [
    ['no model header', { instruction: 'calm' }, {}, ['header', 'model', 'missing']],
    ['another model', { instruction: 'calm' }, { model: 's1' }, ['header', 'model', 'literal_error']],
    ['no instruction', {}, MODEL, ['body', 'instruction', 'missing']],
    ['an empty instruction', { instruction: '' }, MODEL, ['body', 'instruction', 'too_small_string']],
    ['an extra key', { instruction: 'calm', voice: 'x' }, MODEL, ['body', 'voice', 'extra_forbidden']],
    ['n 5', { instruction: 'calm', n: 5 }, MODEL, ['body', 'n', 'too_big_number']],
    ['speed 0', { instruction: 'calm', speed: 0 }, MODEL, ['body', 'speed', 'too_small_number']],
    ['reference_text of 151 characters', { instruction: 'calm', reference_text: 'x'.repeat(151) }, MODEL, ['body', 'reference_text', 'too_big_string']],
    ['num_step 129', { instruction: 'calm', num_step: 129 }, MODEL, ['body', 'num_step', 'too_big_number']],
    ['a fractional seed', { instruction: 'calm', seed: 1.5 }, MODEL, ['body', 'seed']],
  ];
  for (const [what, body, headers, [where, field, type]] of cases) {
    const r = await design(body, headers);
    t.equal(r.status, 422, what);
    t.same(r.body[0].loc, [where, field], `${what}: loc`);
    if (type) t.equal(r.body[0].type, type, `${what}: type`);
  }
  const nulls = await design({ instruction: 'a calm woman', reference_text: null, language: null, seed: null, n: 1 });
  t.equal(nulls.status, 200, 'nulls where the schema allows them');
  const msgpack = await app.req('POST', '/v1/voice-design', Buffer.from([0x80]), { ...app.auth, ...MODEL, 'Content-Type': 'application/msgpack' });
  t.equal(msgpack.status, 415, 'JSON only');
  const bad = await design({ instruction: 'calm' }, MODEL, { Authorization: 'Bearer nope' });
  t.same([bad.status, bad.body?.message], [401, 'Invalid Token']);
  const poor = await app.newTeam({ creditMicros: 0n });
  const broke = await design({ instruction: 'calm' }, MODEL, poor.auth);
  t.same([broke.status, broke.body], [402, { status: 402, message: 'Out of API credit' }]);
});

t.test('a saved candidate: POST /model with voice_design_id, then /v1/tts and an agent speak with the design', async (t) => {
  const r = await design({ instruction: 'a high-pitched young woman who speaks fast', reference_text: 'One two three four five six seven eight nine ten.', n: 1, seed: 5 });
  const c = r.body.candidates[0];
  const preview = await pcmOf(Buffer.from(c.audio_base64, 'base64'));
  const previewF0 = medianF0(preview.pcm, preview.rate);
  const saved = await app.req('POST', '/model', { type: 'tts', title: 'Bright', train_mode: 'fast', voices: [c.audio_base64], texts: [c.text], voice_design_id: c.id });
  t.equal(saved.status, 201, saved.status === 201 ? 'saved' : saved.text);
  t.equal(saved.body.source, 'voice_design');
  t.equal(saved.body.state, 'trained');
  t.same(saved.body.samples.map((s: { text: string }) => s.text), [c.text], 'the preview is its sample');

  const speak = async (reference_id?: string) => {
    const res = await fetch(`${app.url}/v1/tts`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', model: 's1' }, body: JSON.stringify({ text: 'One two three four five six seven eight nine ten.', format: 'wav', ...(reference_id ? { reference_id } : {}) }) });
    t.equal(res.status, 200);
    return pcmOf(new Uint8Array(await res.arrayBuffer()));
  };
  const designed = await speak(saved.body._id);
  const plain = await speak();
  const [fDesigned, fPlain] = [medianF0(designed.pcm, designed.rate), medianF0(plain.pcm, plain.rate)];
  t.ok(Math.abs(fDesigned - previewF0) < 15, `/v1/tts speaks at the preview's pitch (${fDesigned.toFixed(0)} Hz, preview ${previewF0.toFixed(0)} Hz)`);
  t.ok(fDesigned > fPlain * 1.4, `and not the default voice's (${fPlain.toFixed(0)} Hz)`);
  t.ok(designed.pcm.length / designed.rate < (plain.pcm.length / plain.rate) * 0.9, 'at the designed pace (faster than the default voice)');

  // An agent with the saved voice: its opener is spoken in the designed voice.
  const agentId = await agentWith(app, { voice: { voice_id: saved.body._id }, prompt: { first_message_mode: 'fixed', first_message: 'One two three four five six seven eight nine ten.' } });
  const caller = await connect(await createSession(app, agentId));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  await caller.waitFor(() => caller.finals('agent').length === 1 && caller.states.at(-1) !== 'speaking', 20_000, 'the opener');
  const heard = medianF0(caller.audio(), 16_000);
  t.ok(Math.abs(heard - previewF0) < 15, `the agent speaks at the design's pitch (${heard.toFixed(0)} Hz)`);
});

t.test('candidate ids are the team\'s: another team\'s, an altered one, or a made-up one cannot be saved', async (t) => {
  const r = await design({ instruction: 'a calm man', n: 1, seed: 9 });
  const c = r.body.candidates[0];
  const other = await app.newTeam();
  const body = (id: string) => ({ type: 'tts', title: 'Stolen', train_mode: 'fast', voices: [c.audio_base64], texts: [c.text], voice_design_id: id });
  const theirs = await app.req('POST', '/model', body(c.id), other.auth);
  t.equal(theirs.status, 422);
  t.same(theirs.body[0].loc, ['body', 'voice_design_id']);
  const [payload, sig] = (c.id as string).slice(3).split('.');
  const forged = `vd_${Buffer.from(JSON.stringify(['espeak-design:whisper:10:300', 'voice-design-1'])).toString('base64url')}.${sig}`;
  t.equal((await app.req('POST', '/model', body(forged))).status, 422, 'a changed payload breaks the signature');
  t.equal((await app.req('POST', '/model', body(`vd_${payload}.${'0'.repeat(32)}`))).status, 422);
  t.equal((await app.req('POST', '/model', body('espeak-design:f3:50:100'))).status, 422, 'a backend voice id is not a candidate id');
  t.equal((await app.req('GET', '/model?self=true', undefined, other.auth)).body.total, 0, 'nothing was stored');
});

t.test('a backend that cannot design: a clear 400, nothing billed', async (t) => {
  const synthetic = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => synthetic.close());
  const before = BigInt((await synthetic.db.sql<{ c: string }[]>`select credit_micros::text as c from teams where id = ${synthetic.teamId}`)[0]!.c);
  const r = await synthetic.req('POST', '/v1/voice-design', { instruction: 'a calm woman' }, MODEL);
  t.equal(r.status, 400);
  t.equal(r.body.message, 'Voice design is not supported by the inference backend: the synthetic engine cannot vary its voice; voice design needs the espeak engine (PARLEY_SPEECH_ENGINE=espeak, or the model espeak) or an ElevenLabs speech provider');
  const after = BigInt((await synthetic.db.sql<{ c: string }[]>`select credit_micros::text as c from teams where id = ${synthetic.teamId}`)[0]!.c);
  t.equal(after, before);
});
