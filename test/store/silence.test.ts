/**
 * The silence bound on a real Postgres pool (`src/store/silence.ts`, docs/reliability.md
 * "Postgres goes silent"): what it cuts and what it leaves alone. A statement that keeps the
 * server silent for longer than the bound fails as a dropped connection (`ETIMEDOUT`, a `503`
 * for a request) and the pool serves the next query; rows streaming for longer than the bound
 * are not cut; before the bound is set (migrations) nothing is cut.
 */
import t from 'tap';
import { openDatabase } from '../../src/store/db.ts';
import { isConnectionError, toServiceError } from '../../src/errors.ts';

const DATABASE_URL = process.env.DATABASE_URL;
if (!DATABASE_URL) {
  t.plan(0, 'needs DATABASE_URL: the bound watches the sockets of a real Postgres pool');
  process.exit(0);
}

const db = await openDatabase({ databaseUrl: DATABASE_URL, dataDir: 'memory', max: 2 });
t.teardown(() => db.close());

t.test('off until set: a silent statement longer than a later bound completes (migrations run so)', async (t) => {
  const [row] = await db.sql`select pg_sleep(2.5), 1 as n`;
  t.equal(row!.n, 1);
});

t.test('a statement silent for longer than the bound fails as a dropped connection; the pool goes on', async (t) => {
  db.boundSilence(2000);
  t.teardown(() => db.boundSilence(0));
  const err = await db.sql`select pg_sleep(8)`.then(() => null, (e: unknown) => e);
  t.ok(err, 'the statement failed');
  t.equal((err as { code?: string }).code, 'ETIMEDOUT');
  t.ok(isConnectionError(err), 'a connection error');
  const answer = toServiceError(err);
  t.equal(answer.code, 'unavailable');
  t.same(answer.headers, { 'Retry-After': '2' });
  const [row] = await db.sql`select 1 as n`;
  t.equal(row!.n, 1, 'the next query is served');
});

t.test('rows streaming for longer than the bound are not cut; short statements neither', async (t) => {
  db.boundSilence(2000);
  t.teardown(() => db.boundSilence(0));
  // 16 rows of 16 KB, one every 0.25 s: the server is heard all along (each row fills its
  // output buffer), for about 4 s in all.
  const rows = await db.sql`select repeat('x', 16384) || pg_sleep(0.25)::text as s from generate_series(1, 16)`;
  t.equal(rows.length, 16);
  t.equal(rows[0]!.s.length, 16384);
  const [row] = await db.sql`select pg_sleep(0.1), 2 as n`;
  t.equal(row!.n, 2);
});
