/**
 * The read caches behind `GET /v1/agent/agents/{id}` and API-key authentication (D-API-2,
 * D-API-5): what a client sees right after a write. Embedded: one node. With DATABASE_URL and
 * REDIS_URL: two nodes in this process on one schema and one key prefix, as two workers of a
 * node (`PARLEY_WORKERS`) or two nodes are: a write on one, the next read on the other.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { storeAdmin } from '../../src/admin/service.ts';
import { announceAuthChange, createKey } from '../../src/auth/keys.ts';
import { createLogger } from '../../src/log.ts';
import { randomSchema, startPlatform, type Platform } from '../../src/platform.ts';
import { startTestServer } from '../helpers/server.ts';

const databaseUrl = process.env.DATABASE_URL;
const redisUrl = process.env.REDIS_URL;

type Req = (method: string, path: string, body?: unknown, auth?: string) => Promise<{ status: number; body: any }>;

const client = (url: string, key: string): Req => async (method, path, body, auth = key) => {
  const res = await fetch(url + path, {
    method,
    headers: { Authorization: `Bearer ${auth}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
};

t.test('embedded: every write is seen by the next GET', async (t) => {
  const app = await startTestServer({ embedded: true });
  t.teardown(() => app.close());
  const req = client(app.url, app.key);
  const created = await req('POST', '/v1/agent/agents', { name: 'First' });
  t.equal(created.status, 201);
  const path = `/v1/agent/agents/${created.body.agent_id}`;
  t.same((await req('GET', path)).body, created.body, 'read (and kept)');
  t.same((await req('GET', path)).body, created.body, 'read again');

  for (let i = 0; i < 5; i++) {
    const patched = await req('PATCH', path, { name: `Name ${i}`, public_enabled: i % 2 === 0 });
    t.equal(patched.status, 200);
    const got = await req('GET', path);
    t.same(got.body, patched.body, `PATCH ${i} then GET: the new name and updated_at`);
  }

  const published = await req('POST', `${path}/publish`, {});
  t.equal(published.status, 200);
  const live = await req('GET', path);
  t.equal(live.body.publication_state, 'live', 'a publish is seen: publication_state live');

  const other = await app.newTeam();
  const theirs = await req('GET', path, undefined, other.key);
  t.equal(theirs.status, 404, "another team still gets 404 for a kept row that is not theirs");

  t.equal((await req('DELETE', path)).status, 204);
  t.same(await req('GET', path), { status: 404, body: { status: 404, message: 'Agent not found' } }, 'DELETE then GET: 404');
});

t.test('embedded: a revoked key is refused by the next request, not after the cache time', async (t) => {
  const app = await startTestServer({ embedded: true, config: { authCacheMs: 60_000 } });
  t.teardown(() => app.close());
  const { key, row } = await createKey(app.db.sql, app.teamId, { name: 'soon revoked' });
  const req = client(app.url, key);
  t.equal((await req('GET', '/v1/agent/agents')).status, 200, 'the key works (and is kept for 60 s)');
  // What the admin route (the CLI on a running embedded server) and the CLI on Postgres do.
  const admin = storeAdmin(app.db.sql, () => announceAuthChange(app.state));
  t.equal(await admin.revokeKey(row.id), 1);
  await app.state.sync(); // the announcement delivered (memory pub/sub delivers on a later turn)
  const after = await req('GET', '/v1/agent/agents');
  t.equal(after.status, 401);
  t.same(after.body, { status: 401, message: 'Invalid token' });
});

t.test('two nodes on Postgres and Redis: a write on one, the next read on the other', { skip: !databaseUrl || !redisUrl ? 'needs DATABASE_URL and REDIS_URL' : false }, async (t) => {
  const key = `pk_test_${randomBytes(24).toString('base64url')}`;
  const dbSchema = randomSchema();
  const statePrefix = `test:${randomBytes(4).toString('hex')}:`;
  const node = (): Promise<Platform> =>
    startPlatform({
      env: {},
      config: { host: '127.0.0.1', port: 0, dataDir: 'memory', databaseUrl, redisUrl, bootstrapKey: key, logLevel: 'silent', startNativeBackend: false, authCacheMs: 60_000 },
      dbSchema,
      statePrefix,
      log: createLogger({ level: 'silent' }),
    });
  const a = await node();
  t.teardown(() => a.close());
  const b = await node();
  t.teardown(() => b.close());
  const onA = client(a.url, key);
  const onB = client(b.url, key);

  const created = await onA('POST', '/v1/agent/agents', { name: 'Shared' });
  t.equal(created.status, 201);
  const path = `/v1/agent/agents/${created.body.agent_id}`;
  let stale = 0;
  for (let i = 0; i < 30; i++) {
    // B keeps the row, A changes it, B answers the very next GET.
    t.equal((await onB('GET', path)).status, 200);
    const patched = await onA('PATCH', path, { name: `Name ${i}` });
    const got = await onB('GET', path);
    if (got.body.name !== patched.body.name || got.body.updated_at !== patched.body.updated_at) stale++;
  }
  t.equal(stale, 0, '30 PATCHes on A, each GET on B right after shows it');

  t.equal((await onB('GET', path)).status, 200);
  t.equal((await onA('POST', `${path}/publish`, {})).status, 200);
  t.equal((await onB('GET', path)).body.publication_state, 'live', 'a publish on A is seen on B');
  t.equal((await onA('DELETE', path)).status, 204);
  t.equal((await onB('GET', path)).status, 404, 'a DELETE on A is seen on B');

  const second = await createKey(a.db.sql, a.teamId, { name: 'soon revoked' });
  t.equal((await onB('GET', '/v1/agent/agents', undefined, second.key)).status, 200, 'the key works on B (and B keeps it for 60 s)');
  const admin = storeAdmin(a.db.sql, () => announceAuthChange(a.state));
  t.equal(await admin.revokeKey(second.row.id), 1);
  await b.state.sync(); // every message published before this has reached B's subscribers
  t.equal((await onB('GET', '/v1/agent/agents', undefined, second.key)).status, 401, 'revoked on A: refused on B at once');
});
