/**
 * Usage recorded while Postgres is unreachable is written once it is back, and billed once
 * (docs/reliability.md "Postgres restarts or is cut off", D-BILL-1): each call's record has a
 * ref given before its first write, and a batch written again after its answer was lost (its
 * commit happened as the connection dropped) skips what is stored. Found by bench/chaos.ts
 * (`usage recording failed`: syntheses completed during an outage were never billed).
 */
import t from 'tap';
import { Writable } from 'node:stream';
import { createTeam } from '../../src/auth/store-teams.ts';
import { newId } from '../../src/ids.ts';
import { createLogger } from '../../src/log.ts';
import { randomSchema } from '../../src/platform.ts';
import { recordUsage } from '../../src/speech/usage.ts';
import { openDatabase, type Database } from '../../src/store/db.ts';
import { migrate } from '../../src/store/migrate.ts';
import { insertUsages, type NewUsage } from '../../src/usage/store.ts';
import { proxyInFront } from '../fixtures/tcp-proxy.ts';
import { startTestServer } from '../helpers/server.ts';

const DATABASE_URL = process.env.DATABASE_URL;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** `p`, or 'hung' when it has not settled after `ms` (a bound against a hang, not a timing assertion). */
async function bounded<T>(p: Promise<T>, ms: number): Promise<T | 'hung'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<'hung'>((r) => (timer = setTimeout(() => r('hung'), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function withStore(t: { teardown(fn: () => unknown): void }, real: boolean): Promise<Database> {
  const schema = real ? randomSchema() : undefined;
  const db = await openDatabase({ databaseUrl: real ? DATABASE_URL : undefined, dataDir: 'memory', schema });
  t.teardown(async () => {
    if (schema) await db.sql`drop schema ${db.sql(schema)} cascade`;
    await db.close();
  });
  await migrate(db.sql);
  return db;
}

for (const real of [false, true]) {
  t.test(`${real ? 'real Postgres' : 'embedded store'}: a batch written again after its answer was lost bills once`, { skip: real && !DATABASE_URL && 'DATABASE_URL is not set' }, async (t) => {
    const { sql } = await withStore(t, real);
    const team = await createTeam(sql, { id: newId('team'), name: 't', betaAccess: true, creditMicros: 1_000_000n });
    const call = (amount: number): NewUsage => ({ ref: newId('use'), teamId: team.id, kind: 'tts_characters', model: 's2.1-pro', amount, costMicros: BigInt(amount * 15) });
    const batch = [call(10), call(20)];
    const first = await insertUsages(sql, batch);
    // The same records again, as a retry after a dropped connection sends them, with a new one.
    const added = call(40);
    const second = await insertUsages(sql, [batch[1]!, added, batch[0]!]);
    t.same(second.map((r) => r && Number(r.amount)), [20, 40, 10], 'each record answered, in the order given');
    t.same(second.map((r) => r?.id), [first[1]!.id, second[1]!.id, first[0]!.id], 'the stored rows, not new ones');
    const rows = await sql`select amount from usage where team_id = ${team.id} order by id`;
    t.same(rows.map((r) => Number(r.amount)), [10, 20, 40], 'one row per call');
    const [credit] = await sql`select credit_micros from teams where id = ${team.id}`;
    t.equal(Number(credit!.credit_micros), 1_000_000 - 70 * 15, 'debited once per call');
    const ledger = await sql`select amount_micros, ref from credit_ledger where team_id = ${team.id} and reason = 'usage' order by id`;
    t.same(ledger.map((l) => Number(l.amount_micros)), [-150, -300, -600], 'one ledger entry per call');
    t.same(await insertUsages(sql, batch).then((r) => r.map((x) => x?.id)), [first[0]!.id, first[1]!.id], 'a third attempt changes nothing');
    const [after] = await sql`select credit_micros from teams where id = ${team.id}`;
    t.equal(Number(after!.credit_micros), 1_000_000 - 70 * 15);
  });
}

t.test('syntheses completed while Postgres is cut are recorded and billed once when it is back', { skip: !DATABASE_URL && 'needs DATABASE_URL: the outage is a proxy in front of a real Postgres' }, async (t) => {
  const { proxy, url: viaProxy } = await proxyInFront(DATABASE_URL!, 5432);
  const lines: { level: number; msg: string }[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
      cb();
    },
  });
  const log = createLogger({ level: 'info', destination: sink });
  const app = await startTestServer({ backend: 'synthetic', config: { databaseUrl: viaProxy }, log });
  t.teardown(async () => {
    await proxy.restore();
    await app.close();
    await proxy.close();
  });
  const team = await app.newTeam({ creditMicros: 1_000_000n });
  const tts = (text: string) => app.req('POST', '/v1/tts', { text, format: 'wav' }, team.auth);
  const usage = async () => ((await app.req('GET', '/v1/usage', undefined, team.auth)).body?.days ?? []) as { kind: string; amount: number; count: number }[];
  const of = (days: { kind: string; amount: number; count: number }[], kind: string) => days.find((d) => d.kind === kind);

  t.equal((await tts('before')).status, 200);
  for (let i = 0; i < 100 && !of(await usage(), 'tts_characters'); i++) await sleep(100);
  t.match(of(await usage(), 'tts_characters'), { amount: 6, count: 1 }, 'the synthesis before the cut is recorded');

  // The key and the credit are read from the store at most every 2 s: once both expired, a
  // synthesis reads them fresh, and those right after it (during the cut) are served from cache.
  await sleep(2100);
  t.equal((await tts('fresh')).status, 200);
  await proxy.cut();
  const texts = ['during one', 'during two', 'during three'];
  const during = await Promise.all(texts.map(tts));
  const served = texts.filter((_, i) => during[i]!.status === 200);
  t.ok(served.length > 0, 'syntheses are served during the cut (they need no store until their key or credit is read again)');
  t.same(during.filter((r) => r.status !== 200).map((r) => r.status), during.filter((r) => r.status !== 200).map(() => 503), 'any other answer is a 503');
  // A record whose caller waits for it (a transcription's) does not keep it waiting for the store.
  const waited = await bounded(recordUsage(app.db.sql, { teamId: team.teamId, kind: 'asr_seconds', amount: 3, model: 'transcribe-1' }, log), 15_000);
  t.equal(waited, undefined, 'the transcription record answers at once (undefined: not written yet)');
  await sleep(1500); // the batches meet the outage and wait for the store
  t.ok(lines.some((l) => l.msg === 'usage waits for the store'), 'the wait is warned');

  await proxy.restore();
  const characters = 6 + 5 + served.reduce((n, s) => n + s.length, 0);
  let days = await usage();
  for (let i = 0; i < 200 && !(of(days, 'tts_characters')?.count === 2 + served.length && of(days, 'asr_seconds')); i++) {
    await sleep(100);
    days = await usage();
  }
  t.match(of(days, 'tts_characters'), { amount: characters, count: 2 + served.length }, 'every synthesis recorded once');
  t.match(of(days, 'asr_seconds'), { amount: 3, count: 1 }, 'the transcription record too');
  const ledger = (await app.req('GET', '/v1/usage/ledger?reason=usage&page_size=100', undefined, team.auth)).body.entries as { amount: number }[];
  t.equal(ledger.length, 3 + served.length, 'one ledger entry per call');
  const credit = (await app.req('GET', '/v1/team', undefined, team.auth)).body.credit;
  t.equal(credit, (1_000_000 - characters * 15 - 3 * 100) / 1_000_000, 'the credit debited once per call');
  t.same(lines.filter((l) => l.msg === 'usage recording failed' || l.level >= 50).map((l) => l.msg), [], 'nothing given up, no error');
});

t.test('a shutdown while Postgres is cut gives waiting usage the drain time, then logs what it gives up', { skip: !DATABASE_URL && 'needs DATABASE_URL: the outage is a proxy in front of a real Postgres' }, async (t) => {
  const { proxy, url: viaProxy } = await proxyInFront(DATABASE_URL!, 5432);
  const lines: { level: number; msg: string; records?: number; costMicros?: string }[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
      cb();
    },
  });
  const app = await startTestServer({ backend: 'synthetic', config: { databaseUrl: viaProxy, drainTimeoutMs: 1000 }, log: createLogger({ level: 'warn', destination: sink }) });
  t.teardown(() => proxy.close());
  const team = await app.newTeam({ creditMicros: 1_000_000n });
  await proxy.cut();
  t.equal(await recordUsage(app.db.sql, { teamId: team.teamId, kind: 'asr_seconds', amount: 2, model: 'transcribe-1' }, app.log), undefined, 'not written yet');
  const closed = await bounded(app.close().then(() => 'closed'), 60_000);
  t.equal(closed, 'closed', 'the shutdown does not wait out the 10 minutes of retries');
  t.match(lines.filter((l) => l.msg === 'usage not recorded: the store stayed unreachable'), [{ level: 50, records: 1, costMicros: '200' }], 'what is given up is logged as an error, with its cost');
});

t.test('the usage waiting for the store is bounded: past the mark billable calls are refused 503, nothing dropped', { skip: !DATABASE_URL && 'needs DATABASE_URL: the outage is a proxy in front of a real Postgres' }, async (t) => {
  const { proxy, url: viaProxy } = await proxyInFront(DATABASE_URL!, 5432);
  const lines: { level: number; msg: string; waiting?: number }[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
      cb();
    },
  });
  const app = await startTestServer({ backend: 'synthetic', config: { databaseUrl: viaProxy, usageBacklogMax: 3 }, log: createLogger({ level: 'warn', destination: sink }) });
  t.teardown(async () => {
    await proxy.restore();
    await app.close();
    await proxy.close();
  });
  const team = await app.newTeam({ creditMicros: 1_000_000n });
  const tts = () => app.req('POST', '/v1/tts', { text: 'Billable.', format: 'wav' }, team.auth);
  t.equal((await tts()).status, 200, 'served before the cut (its key and credit now cached for 2 s)');
  const days = async () => ((await app.req('GET', '/v1/usage', undefined, team.auth)).body?.days ?? []) as { kind: string; amount: number; count: number }[];
  for (let i = 0; i < 100 && !(await days()).some((d) => d.kind === 'tts_characters'); i++) await sleep(50);
  await proxy.cut();
  // Three calls finished during the cut: their records wait for the store, up to the mark.
  for (let i = 0; i < 3; i++) t.equal(await bounded(recordUsage(app.db.sql, { teamId: team.teamId, kind: 'asr_seconds', amount: 1, model: 'transcribe-1' }, app.log), 15_000), undefined);
  const refused = await tts();
  t.equal(refused.status, 503, 'a new billable call is refused, not served unbilled');
  t.equal(refused.headers.get('retry-after'), '2');
  t.match(refused.body, { status: 503, message: 'Usage cannot be recorded now: the store is unreachable; try again shortly' });
  // A call already under way when the mark was reached is still queued, not dropped.
  t.equal(await bounded(recordUsage(app.db.sql, { teamId: team.teamId, kind: 'asr_seconds', amount: 1, model: 'transcribe-1' }, app.log), 15_000), undefined);
  t.match((await app.req('GET', '/metrics')).text, /^parley_usage_backlog 4$/m, 'the backlog is a metric');
  t.match(lines.filter((l) => l.msg.startsWith('usage backlog full')), [{ level: 50 }], 'one error log for the episode');

  await proxy.restore();
  const asr = async () => (await days()).find((d) => d.kind === 'asr_seconds');
  let recorded = await asr();
  for (let i = 0; i < 200 && recorded?.count !== 4; i++) {
    await sleep(100);
    recorded = await asr();
  }
  t.match(recorded, { amount: 4, count: 4 }, 'every record written once the store is back, the one past the mark too');
  t.equal((await tts()).status, 200, 'billable calls are served again');
  t.ok(lines.some((l) => l.msg.startsWith('usage backlog below its mark')), 'the end of the episode is logged');
});
