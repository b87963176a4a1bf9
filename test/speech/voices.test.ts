import t from 'tap';
import { FishAudioClient, FishAudioError } from 'fish-audio';
import fishSdk from 'fish-audio-sdk';
import { pack } from 'msgpackr';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { decodeAudio, int16ToPcmBytes, wavHeader } from '../../src/audio/index.ts';
import { ServiceError } from '../../src/errors.ts';
import { resolveVoice } from '../../src/voices/service.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

type Entity = Record<string, any>;
const { Session } = fishSdk as unknown as {
  Session: new (key: string, base: string) => {
    createModel(p: { title: string; voices: Buffer[]; texts?: string[]; tags?: string[]; visibility?: string; coverImage?: Buffer; description?: string }): Promise<Entity>;
    listModels(p?: Record<string, unknown>): Promise<{ total: number; items: Entity[] }>;
    getModel(id: string): Promise<Entity>;
    updateModel(id: string, p: Record<string, unknown>): Promise<void>;
    deleteModel(id: string): Promise<void>;
    close(): void;
  };
};

function wav(pcm: Int16Array, rate: number): Uint8Array<ArrayBuffer> {
  const data = int16ToPcmBytes(pcm);
  const out = new Uint8Array(44 + data.byteLength);
  out.set(wavHeader(rate, data.byteLength));
  out.set(data, 44);
  return out;
}
const speech = (text: string, rate = 24000) => wav(encodeText(text, { sampleRateHz: rate }).pcm, rate);
const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0]);

function form(fields: Record<string, string | string[] | Uint8Array | Uint8Array[]>): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) {
    for (const x of Array.isArray(v) ? v : [v]) {
      if (typeof x === 'string') f.append(k, x);
      else f.append(k, new Blob([x as Uint8Array<ArrayBuffer>]), `${k}.bin`);
    }
  }
  return f;
}

let app: TestServer;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
});
t.teardown(() => app.close());

const call = async (method: string, path: string, body?: BodyInit, headers: Record<string, string> = {}, auth = app.auth) => {
  const res = await fetch(app.url + path, { method, headers: { ...auth, ...headers }, body });
  const text = await res.text();
  let json: any;
  try { json = text ? JSON.parse(text) : undefined; } catch { json = undefined; }
  return { status: res.status, body: json, text, headers: res.headers };
};
const create = (fields: Record<string, string | string[] | Uint8Array | Uint8Array[]>, auth = app.auth) => call('POST', '/model', form(fields), {}, auth);
const rejectsReference = (p: Promise<unknown>) =>
  p.then(() => 'resolved', (e: unknown) => (e instanceof ServiceError ? `${e.status} ${e.message}` : String(e)));

t.test('the official fish-audio client: create, get, search, update, delete', async (t) => {
  const fish = new FishAudioClient({ apiKey: app.key, baseUrl: app.url });
  const created = (await fish.voices.ivc.create({
    title: 'Narrator', voices: [new File([speech('the quick brown fox')], 'a.wav', { type: 'audio/wav' })],
    texts: ['the quick brown fox'], tags: ['calm', 'en'], description: 'A calm voice',
  })) as unknown as Entity;
  t.equal(created.title, 'Narrator');
  t.equal(created.type, 'tts');
  t.equal(created.state, 'trained', 'fast mode is trained at once');
  t.equal(created.train_mode, 'fast');
  t.equal(created.visibility, 'private', 'visibility defaults to private');
  t.same(created.tags, ['calm', 'en'], 'the comma-joined tags field is split');
  t.equal(created.description, 'A calm voice');
  t.equal(created.samples.length, 1);
  t.equal(created.samples[0].text, 'the quick brown fox');
  t.equal(created.author._id, app.teamId);
  t.equal(created.cover_image, '');
  for (const k of ['like_count', 'mark_count', 'shared_count', 'task_count']) t.equal(created[k], 0, k);
  t.ok(Date.parse(created.created_at));

  const got = (await fish.voices.get(created._id)) as unknown as Entity;
  t.same(got, created);

  const page = (await fish.voices.search({ self: true, page_size: 10, page_number: 1 })) as unknown as Entity;
  t.equal(typeof page.total, 'number');
  t.ok(page.items.some((m: Entity) => m._id === created._id));

  await fish.voices.update(created._id, { title: 'Renamed', tags: ['warm'], visibility: 'unlist' });
  const updated = (await fish.voices.get(created._id)) as unknown as Entity;
  t.equal(updated.title, 'Renamed');
  t.same(updated.tags, ['warm']);
  t.equal(updated.visibility, 'unlist');
  t.equal(updated.description, 'A calm voice', 'untouched fields stay');

  const { references } = await resolveVoice(app.db.sql, app.teamId, created._id);
  t.equal(references.length, 1);
  t.equal(references[0]!.text, 'the quick brown fox');
  const decoded = await decodeAudio(references[0]!.audio);
  t.equal(decoded.sampleRateHz, 24000, 'references are 24 kHz WAV files');

  await fish.voices.delete(created._id);
  const err = await fish.voices.get(created._id, { maxRetries: 0 }).then(() => null, (e: unknown) => e);
  t.ok(err instanceof FishAudioError);
  t.equal((err as FishAudioError).statusCode, 404);
  t.equal(await rejectsReference(resolveVoice(app.db.sql, app.teamId, created._id)), '400 Reference not found', 'a deleted voice does not resolve');
});

t.test('the community fish-audio-sdk: create (transcribed by the backend), list, update, delete', async (t) => {
  const session = new Session(app.key, app.url);
  t.teardown(() => session.close());
  const created = await session.createModel({ title: 'Community', voices: [Buffer.from(speech('transcribe me please'))], tags: ['sdk', 'test'] });
  t.equal(created.id, created._id);
  t.equal(created.visibility, 'private');
  t.equal(created.samples[0].text, 'transcribe me please', 'without texts, the sample is transcribed');
  t.same(created.tags, ['sdk', 'test']);

  const list = await session.listModels({ pageSize: 5, pageNumber: 1, self: true, tag: ['sdk', 'test'] });
  t.same(list.items.map((m) => m._id), [created._id], 'tag filter (every tag), axios tag[] params');
  t.equal(list.total, 1);

  await session.updateModel(created._id, { title: 'Community 2', description: 'updated' });
  const got = await session.getModel(created._id);
  t.equal(got.title, 'Community 2');
  t.equal(got.description, 'updated');

  await session.deleteModel(created._id);
  const missing = await call('GET', `/model/${created._id}`);
  t.equal(missing.status, 404);
  t.same(missing.body, { status: 404, message: 'Model not found' });
});

t.test('JSON (base64) and MessagePack (bytes) bodies', async (t) => {
  const voice = speech('json voice sample');
  const j = await call('POST', '/model', JSON.stringify({ type: 'tts', title: 'J', train_mode: 'fast', voices: [Buffer.from(voice).toString('base64')], texts: ['json voice sample'] }), { 'Content-Type': 'application/json' });
  t.equal(j.status, 201);
  t.equal(j.body.samples[0].text, 'json voice sample');
  const m = await call('POST', '/model', pack({ type: 'tts', title: 'M', train_mode: 'fast', voices: Buffer.from(voice), texts: null, visibility: null }) as unknown as BodyInit, { 'Content-Type': 'application/msgpack' });
  t.equal(m.status, 201);
  t.equal(m.body.samples[0].text, 'json voice sample', 'one file, transcribed; nil fields count as absent');
  t.equal(m.body.visibility, 'private');
});

t.test('team scoping and visibility', async (t) => {
  const other = await app.newTeam();
  const fields = (title: string, visibility?: string) => ({ type: 'tts', title, train_mode: 'fast', voices: speech(`voice of ${title}`), texts: `voice of ${title}`, ...(visibility ? { visibility } : {}) });
  const priv = (await create(fields('private-a'))).body;
  const unl = (await create(fields('unlisted-a', 'unlist'))).body;
  const pub = (await create({ ...fields('public-a', 'public'), cover_image: PNG })).body;
  t.equal(priv.visibility, 'private');
  t.equal(pub.cover_image, `/model/${pub._id}/cover`);

  // Another team's private voice: 404 on every verb, and 400 Reference not found for synthesis.
  t.equal((await call('GET', `/model/${priv._id}`, undefined, {}, other.auth)).status, 404);
  t.equal((await call('PATCH', `/model/${priv._id}`, JSON.stringify({ title: 'x' }), { 'Content-Type': 'application/json' }, other.auth)).status, 404);
  t.equal((await call('DELETE', `/model/${priv._id}`, undefined, {}, other.auth)).status, 404);
  t.equal(await rejectsReference(resolveVoice(app.db.sql, other.teamId, priv._id)), '400 Reference not found');
  t.equal(await rejectsReference(resolveVoice(app.db.sql, other.teamId, 'voice_does_not_exist')), '400 Reference not found');
  t.equal((await resolveVoice(app.db.sql, app.teamId, priv._id)).references.length, 1, 'the owner can use its private voice');

  // Public: listed for everyone, readable and usable, but only its team may change it.
  const list = (await call('GET', '/model?page_size=100', undefined, {}, other.auth)).body;
  const ids = list.items.map((m: Entity) => m._id);
  t.ok(ids.includes(pub._id), 'another team\'s public voice is listed');
  t.notOk(ids.includes(priv._id), 'private is not');
  t.notOk(ids.includes(unl._id), 'unlisted is not');
  t.equal((await call('GET', '/model?self=true', undefined, {}, other.auth)).body.total, 0, 'self=true: only the team\'s own');
  t.equal((await call('GET', `/model/${pub._id}`, undefined, {}, other.auth)).status, 200);
  t.equal((await resolveVoice(app.db.sql, other.teamId, pub._id)).references[0]!.text, 'voice of public-a');
  t.equal((await call('PATCH', `/model/${pub._id}`, JSON.stringify({ title: 'mine' }), { 'Content-Type': 'application/json' }, other.auth)).status, 404);
  t.equal((await call('DELETE', `/model/${pub._id}`, undefined, {}, other.auth)).status, 404);
  const byAuthor = (await call('GET', `/model?author_id=${app.teamId}`, undefined, {}, other.auth)).body;
  t.same(byAuthor.items.map((m: Entity) => m._id), [pub._id]);

  // Unlisted: usable and readable by id.
  t.equal((await call('GET', `/model/${unl._id}`, undefined, {}, other.auth)).status, 200);
  t.equal((await resolveVoice(app.db.sql, other.teamId, unl._id)).referenceId, unl._id);

  // Sample audio and cover, through the paths the entity gives.
  const sample = await fetch(app.url + pub.samples[0].audio, { headers: other.auth });
  t.equal(sample.headers.get('content-type'), 'audio/wav');
  const wavBytes = new Uint8Array(await sample.arrayBuffer());
  const asr = await fetch(`${app.url}/v1/asr`, { method: 'POST', headers: app.auth, body: form({ audio: wavBytes }) });
  t.equal((await asr.json()).text, 'voice of public-a', 'the stored sample still speaks its text');
  const cover = await fetch(app.url + pub.cover_image, { headers: other.auth });
  t.equal(cover.headers.get('content-type'), 'image/png');
  t.same(new Uint8Array(await cover.arrayBuffer()), PNG);
  t.equal((await fetch(app.url + priv.samples[0].audio, { headers: other.auth })).status, 404);

  // The owner makes the public voice private: it disappears for the other team.
  t.equal((await call('PATCH', `/model/${pub._id}`, JSON.stringify({ visibility: 'private' }), { 'Content-Type': 'application/json' })).status, 200);
  t.equal(await rejectsReference(resolveVoice(app.db.sql, other.teamId, pub._id)), '400 Reference not found');
});

t.test('validation and limits', async (t) => {
  const ok = { type: 'tts', title: 'V', train_mode: 'fast' };
  const noVoices = await create(ok);
  t.equal(noVoices.status, 422);
  t.same(noVoices.body[0].loc, ['body', 'voices']);

  const garbage = await create({ ...ok, voices: [speech('a fine sample here'), new TextEncoder().encode('not audio, only text')] });
  t.equal(garbage.status, 400);
  t.match(garbage.body.message, /^voices\[1\]: Audio could not be decoded/);

  const short = await create({ ...ok, voices: wav(new Int16Array(2400), 24000) });
  t.equal(short.status, 400);
  t.same(short.body, { status: 400, message: 'voices[0]: audio is shorter than 1 second' });

  const tooMany = await create({ ...ok, voices: Array.from({ length: 21 }, () => speech('x')) });
  t.equal(tooMany.status, 422, 'more than 20 files');

  const publicNoCover = await create({ ...ok, voices: speech('some sample text'), visibility: 'public' });
  t.equal(publicNoCover.status, 422);
  t.same(publicNoCover.body[0].loc, ['body', 'cover_image']);

  const badCover = await create({ ...ok, voices: speech('some sample text'), cover_image: new TextEncoder().encode('not an image') });
  t.equal(badCover.status, 400);

  const textsMismatch = await create({ ...ok, voices: [speech('one sample'), speech('two sample')], texts: ['a', 'b', 'c'] });
  t.equal(textsMismatch.status, 422);
  t.same(textsMismatch.body[0].loc, ['body', 'texts']);

  const badMode = await create({ ...ok, train_mode: 'full', voices: speech('some sample text') });
  t.equal(badMode.status, 422);

  const badVisibility = await create({ ...ok, voices: speech('some sample text'), visibility: 'secret' });
  t.equal(badVisibility.status, 422);

  const wrongType = await call('POST', '/model', 'title=x', { 'Content-Type': 'text/plain' });
  t.equal(wrongType.status, 415);
  t.equal(wrongType.text, '');

  const badKey = await call('POST', '/model', form({ ...ok, voices: speech('some sample text') }), {}, { Authorization: 'Bearer nope' });
  t.equal(badKey.status, 401);
  t.same(badKey.body, { status: 401, message: 'Invalid Token' });
  t.same((await call('GET', '/model', undefined, {}, { Authorization: 'Bearer nope' })).body, { status: 401, message: 'Invalid Token' });

  const bigCover = new Uint8Array(5 * 1024 * 1024 + 1);
  bigCover.set(PNG);
  const coverTooBig = await create({ ...ok, voices: speech('some sample text'), cover_image: bigCover });
  t.equal(coverTooBig.status, 413, 'cover over 5 MB');

  const hugeBody = await create({ ...ok, voices: new Uint8Array(51 * 1024 * 1024) });
  t.equal(hugeBody.status, 413, 'body over 50 MB');

  const urlencoded = await call('POST', '/model', new URLSearchParams({ ...ok, voices: Buffer.from(speech('form encoded sample')).toString('base64'), texts: 'form encoded sample', tags: 'a,b' }).toString(), { 'Content-Type': 'application/x-www-form-urlencoded' });
  t.equal(urlencoded.status, 201, 'urlencoded with base64 files');
  t.same(urlencoded.body.tags, ['a', 'b']);

  const own = (await create({ ...ok, voices: speech('some sample text'), texts: 'some sample text' })).body;
  const toPublic = await call('PATCH', `/model/${own._id}`, JSON.stringify({ visibility: 'public' }), { 'Content-Type': 'application/json' });
  t.equal(toPublic.status, 422, 'public needs a cover');
  const withCover = await call('PATCH', `/model/${own._id}`, form({ visibility: 'public', cover_image: PNG }));
  t.equal(withCover.status, 200);
  t.equal(withCover.body.visibility, 'public');
  const badPatch = await call('PATCH', `/model/${own._id}`, JSON.stringify({ visibility: 'everyone' }), { 'Content-Type': 'application/json' });
  t.equal(badPatch.status, 422);
  t.equal((await call('PATCH', '/model/voice_missing', JSON.stringify({ title: 'x' }), { 'Content-Type': 'application/json' })).status, 404);
  const del = await call('DELETE', `/model/${own._id}`);
  t.equal(del.status, 200);
  t.equal((await call('DELETE', `/model/${own._id}`)).status, 404, 'deleting twice');
});

t.test('list: pagination bounds, page numbers, filters', async (t) => {
  const team = await app.newTeam();
  const mk = (title: string, tags: string) => create({ type: 'tts', title, train_mode: 'fast', voices: speech(`sample ${title}`), texts: `sample ${title}`, tags }, team.auth);
  const a = (await mk('Alpha one', 'x,y')).body;
  const b = (await mk('Beta two', 'y')).body;
  const c = (await mk('Gamma three', 'z')).body;
  const list = (q: string) => call('GET', `/model${q}`, undefined, {}, team.auth);

  const first = (await list('?self=true&page_size=2&page_number=1')).body;
  t.equal(first.total, 3);
  t.same(first.items.map((m: Entity) => m._id), [c._id, b._id], 'newest first');
  t.equal(first.has_more, true);
  const second = (await list('?self=true&page_size=2&page_number=2')).body;
  t.same(second.items.map((m: Entity) => m._id), [a._id]);
  t.equal(second.has_more, false);
  t.equal((await list('?self=true')).body.items.length, 3, 'default page size 10');

  t.same((await list('?self=true&title=ALPHA')).body.items.map((m: Entity) => m._id), [a._id], 'title: case-insensitive substring');
  t.same((await list('?self=true&tag=y')).body.items.map((m: Entity) => m._id), [b._id, a._id]);
  t.same((await list('?self=true&tag=x&tag=y')).body.items.map((m: Entity) => m._id), [a._id], 'repeated tags: every one');
  t.equal((await list('?self=true&language=en')).body.total, 0, 'no languages are recorded');
  t.equal((await list('?self=true&sort_by=created_at&title_language=en')).status, 200);

  for (const q of ['page_size=0', 'page_size=101', 'page_number=0', 'page_size=abc', 'sort_by=random', 'self=perhaps']) {
    const r = await list(`?${q}`);
    t.equal(r.status, 422, q);
    t.equal(r.body[0].loc[0], 'query');
  }
  const far = await list('?page_size=100&page_number=1001');
  t.equal(far.status, 400);
  t.same(far.body, { status: 400, message: 'Page offset exceeds 100000 rows' });
});
