import t from 'tap';
import { setBetaAccess } from '../../src/auth/store-teams.ts';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer();
t.teardown(() => app.close());

t.test('create, read, update, list and delete an agent', async (t) => {
  const created = await app.req('POST', '/v1/agent/agents', { name: 'Support', description: 'Answers calls' });
  t.equal(created.status, 201);
  const a = created.body;
  t.match(a, { name: 'Support', description: 'Answers calls', status: 'active', publication_state: 'draft', public_enabled: false, allowed_origins: [], overrides_allowed: [] });
  t.match(a.agent_id, /^agent_[0-9a-f]{24}$/);
  t.equal(a.workspace_id, app.teamId);
  const got = await app.req('GET', `/v1/agent/agents/${a.agent_id}`);
  t.same(got.body, a);
  const patched = await app.req('PATCH', `/v1/agent/agents/${a.agent_id}`, {
    name: 'Support 2', public_enabled: true, allowed_origins: ['https://Example.com/', 'http://localhost:3000'], overrides_allowed: ['language', 'voice_id'],
  });
  t.equal(patched.status, 200);
  t.match(patched.body, { name: 'Support 2', description: 'Answers calls', public_enabled: true, overrides_allowed: ['language', 'voice_id'] });
  t.same(patched.body.allowed_origins, ['https://example.com', 'http://localhost:3000'], 'origins normalised');
  t.ok(patched.body.updated_at >= a.updated_at);
  const bad = await app.req('PATCH', `/v1/agent/agents/${a.agent_id}`, { allowed_origins: ['https://example.com/path'], overrides_allowed: ['name'] });
  t.equal(bad.status, 422);
  t.same(bad.body.map((e: { loc: unknown[] }) => e.loc), [['body', 'allowed_origins', 0], ['body', 'overrides_allowed', 0]]);
  t.equal((await app.req('DELETE', `/v1/agent/agents/${a.agent_id}`)).status, 204);
  const gone = await app.req('GET', `/v1/agent/agents/${a.agent_id}`);
  t.equal(gone.status, 404);
  t.same(gone.body, { status: 404, message: 'Agent not found' });
});

t.test("another team's agent gives exactly the same 404 as a missing one", async (t) => {
  const other = await app.newTeam();
  const theirs = await app.req('POST', '/v1/agent/agents', { name: 'theirs' }, other.auth);
  t.equal(theirs.status, 201);
  const id = theirs.body.agent_id;
  const missing = await app.req('GET', '/v1/agent/agents/agent_000000000000000000000000');
  for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'mine now' }], ['DELETE', undefined]] as const) {
    const res = await app.req(method, `/v1/agent/agents/${id}`, body);
    t.equal(res.status, 404, method);
    t.equal(res.text, missing.text, `${method}: same body`);
  }
  const list = await app.req('GET', '/v1/agent/agents');
  t.notOk(list.body.agents.some((x: { agent_id: string }) => x.agent_id === id), 'not listed either');
  const still = await app.req('GET', `/v1/agent/agents/${id}`, undefined, other.auth);
  t.equal(still.body.name, 'theirs', 'and untouched');
});

t.test('403 without beta access', async (t) => {
  const other = await app.newTeam({ beta: false });
  const res = await app.req('POST', '/v1/agent/agents', { name: 'x' }, other.auth);
  t.equal(res.status, 403);
  t.equal(res.body.status, 403);
  t.match(res.body.message, /^Agent platform is in private beta/);
  await setBetaAccess(app.db.sql, other.teamId, true);
  await new Promise((r) => setTimeout(r, app.config.authCacheMs + 50));
  t.equal((await app.req('POST', '/v1/agent/agents', { name: 'x' }, other.auth)).status, 201, 'granted later, allowed');
});

t.test('pagination', async (t) => {
  const team = await app.newTeam();
  const ids: string[] = [];
  for (let i = 0; i < 75; i++) {
    const r = await app.req('POST', '/v1/agent/agents', { name: `agent ${i}` }, team.auth);
    ids.push(r.body.agent_id);
  }
  const newestFirst = ids.slice().reverse();
  const get = (q: string) => app.req('GET', `/v1/agent/agents${q}`, undefined, team.auth);

  t.test('a walk by cursor with page_size 30 sees every agent once, newest first', async (t) => {
    const seen: string[] = [];
    let q = '?page_size=30';
    const sizes: number[] = [];
    for (;;) {
      const r = await get(q);
      t.equal(r.status, 200);
      t.equal(r.body.total, null, 'total is null in cursor mode unless asked');
      sizes.push(r.body.agents.length);
      seen.push(...r.body.agents.map((a: { agent_id: string }) => a.agent_id));
      if (!r.body.has_more) {
        t.equal(r.body.next_cursor, null);
        break;
      }
      q = `?page_size=30&cursor=${r.body.next_cursor}`;
    }
    t.same(sizes, [30, 30, 15]);
    t.same(seen, newestFirst);
  });

  t.test('a walk by page with page_size 30 sees the same order, with total', async (t) => {
    const seen: string[] = [];
    for (let page = 1; page <= 3; page++) {
      const r = await get(`?page_size=30&page=${page}`);
      t.equal(r.body.total, 75);
      t.equal(r.body.has_more, page < 3);
      if (page < 3) t.type(r.body.next_cursor, 'string', 'next_cursor lets a client switch to cursor mode');
      seen.push(...r.body.agents.map((a: { agent_id: string }) => a.agent_id));
    }
    t.same(seen, newestFirst);
    const past = await get('?page_size=30&page=4');
    t.same(past.body.agents, []);
    t.equal(past.body.has_more, false);
  });

  t.test('include_total in cursor mode; default page size 30', async (t) => {
    const r = await get('?include_total=true');
    t.equal(r.body.total, 75);
    t.equal(r.body.agents.length, 30);
  });

  t.test('page and cursor together → 400', async (t) => {
    const first = await get('?page_size=5');
    const r = await get(`?page=1&cursor=${first.body.next_cursor}`);
    t.equal(r.status, 400);
    t.same(r.body, { status: 400, message: 'page and cursor are mutually exclusive' });
  });

  t.test('an undecodable cursor → 400', async (t) => {
    for (const c of ['nope!', 'bm9wZQ', Buffer.from('[1,2,3]').toString('base64url'), Buffer.from('["not a date","x"]').toString('base64url')]) {
      const r = await get(`?cursor=${encodeURIComponent(c)}`);
      t.equal(r.status, 400, c);
      t.same(r.body, { status: 400, message: 'Invalid cursor' });
    }
  });

  t.test('a page offset at or past 100,000 rows → 400; just below is served', async (t) => {
    const at = await get('?page=1001&page_size=100');
    t.equal(at.status, 400);
    t.same(at.body, { status: 400, message: 'Page offset exceeds 100000 rows' });
    t.equal((await get('?page=3335&page_size=30')).status, 400);
    const below = await get('?page=1000&page_size=100');
    t.equal(below.status, 200);
    t.same(below.body.agents, []);
  });

  t.test('page_size outside 1–100 and page below 1 → 422 at query', async (t) => {
    for (const q of ['?page_size=0', '?page_size=101', '?page_size=abc', '?page=0']) {
      const r = await get(q);
      t.equal(r.status, 422, q);
      t.equal(r.body[0].loc[0], 'query', q);
    }
  });

  t.test('search and publication_state filters', async (t) => {
    const r = await get('?search=AGENT%207&include_total=true');
    t.equal(r.body.total, 6, 'agent 7, 70–74');
    const drafts = await get('?publication_state=draft&include_total=true');
    t.equal(drafts.body.total, 75);
    const live = await get('?publication_state=live&include_total=true');
    t.equal(live.body.total, 0);
  });
});
