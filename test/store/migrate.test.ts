import t from 'tap';
import { createSchema, openDatabase, type Database } from '../../src/store/db.ts';
import { listMigrations, migrate } from '../../src/store/migrate.ts';
import { randomSchema } from '../../src/platform.ts';

/** Two "nodes" (two separate pools) migrating one database at the same moment. */
async function concurrentStarts(t: { teardown(fn: () => unknown): void; same: typeof import('tap').default.same; equal: typeof import('tap').default.equal }, open: () => Promise<Database[]>) {
  const [a, b] = await open();
  t.teardown(async () => {
    await a!.close();
    if (b !== a) await b!.close();
  });
  const [ra, rb] = await Promise.all([migrate(a!.sql), migrate(b!.sql)]);
  const all = listMigrations().map((m) => m.version);
  t.same([...ra, ...rb].sort(), all.slice().sort(), 'every migration applied exactly once across both');
  const rows = await a!.sql<{ version: string }[]>`select version from schema_migrations order by version`;
  t.same(rows.map((r) => r.version), all);
  t.same(await migrate(b!.sql), [], 'a third start applies nothing');
  const [tables] = await a!.sql`select count(*)::int as n from information_schema.tables where table_name = 'agents' and table_schema = current_schema()`;
  t.equal(tables!.n, 1);
}

t.test('embedded store: two pools migrating one PGlite at once', (t) =>
  concurrentStarts(t, async () => {
    const db = await openDatabase({ dataDir: 'memory' });
    const { default: postgres } = await import('postgres');
    const second = postgres(db.url, { max: 2, onnotice: () => {} });
    const other: Database = { ...db, sql: second as never, close: () => second.end() };
    return [db, other];
  }),
);

t.test('real Postgres: two nodes migrating one database at once', { skip: !process.env.DATABASE_URL && 'DATABASE_URL is not set' }, (t) =>
  concurrentStarts(t, async () => {
    const schema = randomSchema();
    // Opened at once too: both create the schema (two workers of a node do so on a new database).
    const [a, b] = await Promise.all([0, 1].map(() => openDatabase({ databaseUrl: process.env.DATABASE_URL, dataDir: 'memory', schema })));
    t.teardown(async () => {
      const { default: postgres } = await import('postgres');
      const sql = postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} });
      await sql`drop schema ${sql(schema)} cascade`;
      await sql.end();
    });
    return [a!, b!];
  }),
);

t.test('real Postgres: sessions creating one new schema at once all succeed', { skip: !process.env.DATABASE_URL && 'DATABASE_URL is not set' }, async (t) => {
  const { default: postgres } = await import('postgres');
  // Connected first, so the creations meet in the server (as two workers' starts did in a bench).
  const conns = Array.from({ length: 6 }, () => postgres(process.env.DATABASE_URL!, { max: 1, onnotice: () => {} }));
  t.teardown(() => Promise.all(conns.map((c) => c.end())));
  await Promise.all(conns.map((c) => c`select 1`));
  for (let round = 0; round < 10; round++) {
    const schema = randomSchema();
    const made = await Promise.allSettled(conns.map((c) => createSchema(c as never, schema)));
    const [row] = await conns[0]!<{ n: number }[]>`select count(*)::int as n from pg_namespace where nspname = ${schema}`;
    await conns[0]!`drop schema if exists ${conns[0]!(schema)} cascade`;
    t.same(made.map((o) => (o.status === 'fulfilled' ? 'created' : String(o.reason?.message))), Array(6).fill('created'), `round ${round + 1}: all six succeeded`);
    t.equal(row!.n, 1, 'and the schema exists');
  }
});

t.test('a failing migration rolls back and is not recorded', async (t) => {
  const db = await openDatabase({ dataDir: 'memory' });
  t.teardown(() => db.close());
  await migrate(db.sql);
  const bad = [{ version: '999_broken', sql: 'create table half_done (id int); select no_such_function();' }];
  await t.rejects(migrate(db.sql, bad));
  const [row] = await db.sql`select count(*)::int as n from schema_migrations where version = '999_broken'`;
  t.equal(row!.n, 0);
  const [tbl] = await db.sql`select count(*)::int as n from information_schema.tables where table_name = 'half_done'`;
  t.equal(tbl!.n, 0, 'the partial work was rolled back');
});
