/**
 * Every route of /openapi.json, fuzzed from its schemas with a fixed seed and a bounded
 * count (docs/reliability.md): never a 5xx (503 aside: a dependency or engine state), never
 * a hang, the process alive, the store unchanged by a refused write. Longer runs:
 * `npx tsx bench/fuzz.ts`.
 */
import fc from 'fast-check';
import t from 'tap';
import { audioArbitrary, runFuzz, stateFingerprint } from '../helpers/fuzz.ts';
import { fuzzSockets } from '../helpers/fuzz-ws.ts';
import { startTestServer } from '../helpers/server.ts';
import { fuzzFixtures } from '../helpers/fuzz-fixtures.ts';

const app = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());

const SEED = Number(process.env.FUZZ_SEED ?? 21);
const COUNT = Number(process.env.FUZZ_COUNT ?? 600);

t.test(`${COUNT} fuzzed requests over every operation (seed ${SEED})`, async (t) => {
  const { doc, ids } = await fuzzFixtures(app);
  const out = await runFuzz({
    baseUrl: app.url,
    doc,
    ids,
    auth: app.auth,
    seed: SEED,
    count: COUNT,
    fingerprint: () => stateFingerprint(app.db.sql, FINGERPRINT_SKIP),
    alive: async () => (await app.req('GET', '/health')).status === 200,
  });
  t.equal(out.requests, COUNT);
  t.same(out.failures, [], JSON.stringify(out.statuses));
});

/** Tables that record attempts by design (a refused request may be counted there). */
const FINGERPRINT_SKIP = ['schema_migrations'];

t.test('random frames on every WebSocket endpoint end with a documented close code', async (t) => {
  const out = await fuzzSockets(app, { seed: SEED, count: Number(process.env.FUZZ_WS_COUNT ?? 40) });
  t.same(out.failures, [], JSON.stringify(out.closeCodes));
  t.equal((await app.req('GET', '/health')).status, 200);
});

t.test('random, truncated, empty and lying audio is a 400 naming the problem', async (t) => {
  const samples = fc.sample(audioArbitrary, { seed: SEED, numRuns: Number(process.env.FUZZ_AUDIO_COUNT ?? 60) });
  const seen: Record<string, number> = {};
  for (const audio of samples) {
    for (const [path, field] of [['/v1/asr', 'audio'], ['/compat/v1/audio/transcriptions', 'file'], ['/compat/elevenlabs/v1/speech-to-text', 'file']] as const) {
      const form = new FormData();
      form.set(field, new Blob([audio as Uint8Array<ArrayBuffer>]), 'a.wav');
      if (path.startsWith('/compat/v1')) form.set('model', 'whisper-1');
      if (path.includes('elevenlabs')) form.set('model_id', 'scribe_v1');
      const res = await fetch(app.url + path, { method: 'POST', headers: path.includes('elevenlabs') ? { 'xi-api-key': app.key } : app.auth, body: form });
      const text = await res.text();
      seen[`${path} ${res.status}`] = (seen[`${path} ${res.status}`] ?? 0) + 1;
      if (res.status !== 200) {
        t.ok(res.status === 400 || res.status === 422, `${path} ${audio.length} bytes → ${res.status} ${text.slice(0, 160)}`);
        t.match(text, /audio|decode|WAV|empty|format|file/i, `${path} names the problem: ${text.slice(0, 160)}`);
      }
    }
  }
  t.comment(JSON.stringify(seen));
});
