// The spend tiers of the speech concurrency cap (docs/api/speech.md "Concurrency": 429 past the
// cap of the spend tier, 5 below $100 paid, 15 from $100, 50 from $1,000), "paid" being the net of a team's credit grants,
// and PARLEY_SPEECH_CONCURRENCY, which fixes N for every team.
import t from 'tap';
import { createKey } from '../../src/auth/keys.ts';
import { newId } from '../../src/ids.ts';
import { parseSpeechConcurrency, SpeechConcurrency, tierLimit } from '../../src/speech/concurrency.ts';
import { recordUsage } from '../../src/speech/usage.ts';
import { paidMicros } from '../../src/usage/store-spend.ts';
import { createTeam, grantCredit } from '../../src/auth/store-teams.ts';
import { startTestServer } from '../helpers/server.ts';

// Real-time pacing: a long synthesis stays in flight until the test aborts it.
const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' } });
t.teardown(() => app.close());
const $ = (dollars: number) => BigInt(Math.round(dollars * 1_000_000));

t.test('tiers: 5 below $100 paid, 15 from $100, 50 from $1,000', async (t) => {
  t.equal(tierLimit(0n), 5);
  t.equal(tierLimit($(99.999999)), 5);
  t.equal(tierLimit($(100)), 15);
  t.equal(tierLimit($(999.999999)), 15);
  t.equal(tierLimit($(1000)), 50);
  t.equal(tierLimit($(25_000)), 50);
});

t.test('PARLEY_SPEECH_CONCURRENCY: a positive integer, or unset for the tiers', async (t) => {
  t.equal(parseSpeechConcurrency(undefined), undefined);
  t.equal(parseSpeechConcurrency(''), undefined);
  t.equal(parseSpeechConcurrency('3'), 3);
  for (const bad of ['0', '-1', '2.5', 'many']) t.throws(() => parseSpeechConcurrency(bad), /PARLEY_SPEECH_CONCURRENCY must be a positive integer/, bad);
  const fixed = new SpeechConcurrency({ state: app.state, override: 7 });
  t.equal(await fixed.limitFor('team_whatever'), 7, 'the override applies to every team, whatever it paid');
});

t.test('"paid" is the net of credit grants: usage does not lower it, a negative grant does', async (t) => {
  const team = await createTeam(app.db.sql, { id: newId('team'), name: 'tiers', betaAccess: true, creditMicros: $(1) });
  const gate = new SpeechConcurrency({ state: app.state, sql: app.db.sql, tierCacheMs: 0 });
  t.teardown(() => gate.close());
  t.equal(await paidMicros(app.db.sql, team.id), $(1), 'the starting credit is a grant');
  t.equal(await gate.limitFor(team.id), 5);
  await grantCredit(app.db.sql, team.id, $(99));
  t.equal(await gate.limitFor(team.id), 15, '$100 paid (parley credit grant)');
  await recordUsage(app.db.sql, { teamId: team.id, kind: 'tts_characters', amount: 1_000_000, model: 's2.1-pro' });
  t.equal(await paidMicros(app.db.sql, team.id), $(100), 'spending credit is not a refund of payment');
  t.equal(await gate.limitFor(team.id), 15);
  await grantCredit(app.db.sql, team.id, $(900));
  t.equal(await gate.limitFor(team.id), 50, '$1,000 paid');
  await grantCredit(app.db.sql, team.id, $(-0.5));
  t.equal(await gate.limitFor(team.id), 15, 'a correction below $1,000 drops the tier');
  t.equal(await paidMicros(app.db.sql, 'team_missing'), 0n, 'no ledger: nothing paid');
});

t.test('a team that paid under $100 runs 5 speech requests at once; the 6th gets 429 with Retry-After', async (t) => {
  const team = await createTeam(app.db.sql, { id: newId('team'), name: 'small', betaAccess: true, creditMicros: $(20) });
  const { key } = await createKey(app.db.sql, team.id);
  const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const long = Array.from({ length: 200 }, (_, i) => `Sentence number ${i + 1} is here.`).join(' ');
  const held: AbortController[] = [];
  // Kept referenced: fetch cancels the body of a response that is garbage collected unread.
  const streams: Response[] = [];
  t.teardown(() => {
    held.forEach((ac) => ac.abort());
    streams.length = 0;
  });
  for (let i = 0; i < 5; i++) {
    const ac = new AbortController();
    held.push(ac);
    const r = await fetch(app.url + '/v1/tts', { method: 'POST', signal: ac.signal, headers, body: JSON.stringify({ text: long, format: 'pcm', sample_rate: 16000, chunk_length: 100 }) });
    t.equal(r.status, 200, `stream ${i + 1}`);
    streams.push(r);
  }
  const sixth = await fetch(app.url + '/v1/tts', { method: 'POST', headers, body: JSON.stringify({ text: 'Six.' }) });
  t.equal(sixth.status, 429);
  t.same(await sixth.json(), { status: 429, message: 'Too many concurrent requests: this team may run 5 speech requests at once' });
  t.ok(Number(sixth.headers.get('retry-after')) >= 1, 'Retry-After in seconds');
  const bootstrap = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'Other team.', format: 'wav' }) });
  t.equal(bootstrap.status, 200, 'the cap is per team');
  await bootstrap.arrayBuffer();
});
