import t from 'tap';
import { createKey } from '../../src/auth/keys.ts';
import { revokeKey } from '../../src/auth/store-keys.ts';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer();
t.teardown(() => app.close());

t.test('401: a missing Authorization header is a bare 401 with WWW-Authenticate: Bearer', async (t) => {
  const res = await fetch(`${app.url}/v1/agent/agents`);
  t.equal(res.status, 401);
  t.equal(res.headers.get('www-authenticate'), 'Bearer');
  t.equal(await res.text(), '');
});

t.test('401: a malformed Authorization header is a bare 401', async (t) => {
  for (const value of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer ', 'Token abc', 'Bearer a b']) {
    const res = await fetch(`${app.url}/v1/agent/agents`, { headers: { Authorization: value } });
    t.equal(res.status, 401, value);
    t.equal(res.headers.get('www-authenticate'), 'Bearer', value);
    t.equal(await res.text(), '', value);
  }
});

t.test('401: an unknown key is JSON Invalid token', async (t) => {
  const res = await app.req('GET', '/v1/agent/agents', undefined, { Authorization: 'Bearer pk_not_a_real_key' });
  t.equal(res.status, 401);
  t.same(res.body, { status: 401, message: 'Invalid token' });
  t.equal(res.headers.get('www-authenticate'), null);
});

t.test('401: a revoked key is JSON Invalid token', async (t) => {
  const { key, row } = await createKey(app.db.sql, app.teamId, { name: 'to revoke' });
  t.equal((await app.req('GET', '/v1/agent/agents', undefined, { Authorization: `Bearer ${key}` })).status, 200);
  t.equal(await revokeKey(app.db.sql, row.id), 1);
  await new Promise((r) => setTimeout(r, app.config.authCacheMs + 50)); // past the verification cache
  const res = await app.req('GET', '/v1/agent/agents', undefined, { Authorization: `Bearer ${key}` });
  t.equal(res.status, 401);
  t.same(res.body, { status: 401, message: 'Invalid token' });
});

t.test('401: an expired key is JSON Token expired', async (t) => {
  const { key } = await createKey(app.db.sql, app.teamId, { expiresAt: new Date(Date.now() - 1000) });
  const res = await app.req('GET', '/v1/agent/agents', undefined, { Authorization: `Bearer ${key}` });
  t.equal(res.status, 401);
  t.same(res.body, { status: 401, message: 'Token expired' });
});

t.test('415: a JSON endpoint with no body or another content type answers a bare 415', async (t) => {
  const none = await fetch(`${app.url}/v1/agent/agents`, { method: 'POST', headers: app.auth });
  t.equal(none.status, 415);
  t.equal(await none.text(), '');
  const wrong = await fetch(`${app.url}/v1/agent/agents`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'text/plain' }, body: '{"name":"x"}' });
  t.equal(wrong.status, 415);
  t.equal(await wrong.text(), '');
  const form = await fetch(`${app.url}/v1/agent/agents`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'name=x' });
  t.equal(form.status, 415);
});

t.test('400: invalid JSON is Malformed JSON', async (t) => {
  const res = await app.req('POST', '/v1/agent/agents', '{"name": "x",', { 'Content-Type': 'application/json' });
  t.equal(res.status, 400);
  t.same(res.body, { status: 400, message: 'Malformed JSON' });
});

t.test('413: a body over the route limit (1 MiB for JSON) is a JSON 413', async (t) => {
  const big = JSON.stringify({ name: 'x', description: 'y'.repeat(1024 * 1024) });
  const res = await app.req('POST', '/v1/agent/agents', big, { 'Content-Type': 'application/json' });
  t.equal(res.status, 413);
  t.equal(res.body.status, 413);
  t.match(res.body.message, /exceeds/);
  // and the agent was not created
  const list = await app.req('GET', '/v1/agent/agents');
  t.equal(list.body.agents.length, 0);
});

t.test('413: a chunked body (no Content-Length) over the limit is refused too', async (t) => {
  const chunk = new TextEncoder().encode('x'.repeat(64 * 1024));
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent >= 20) return c.close();
      sent++;
      c.enqueue(chunk);
    },
  });
  const res = await fetch(`${app.url}/v1/agent/agents`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' }, body: stream, duplex: 'half' } as RequestInit);
  t.equal(res.status, 413);
});

t.test('422: validation errors are a list of {type, loc, msg, ctx} with loc from body and no input echoed', async (t) => {
  const secretish = 'S3CR3T-'.repeat(30);
  const res = await app.req('POST', '/v1/agent/agents', { name: secretish, description: 5 });
  t.equal(res.status, 422);
  t.ok(Array.isArray(res.body), 'a list');
  for (const e of res.body) {
    t.same(Object.keys(e).sort(), ['ctx', 'loc', 'msg', 'type']);
    t.equal(e.loc[0], 'body');
  }
  t.same(res.body.map((e: { loc: unknown[] }) => e.loc).sort(), [['body', 'description'], ['body', 'name']]);
  t.notOk(res.text.includes('S3CR3T'), 'the offending value is not in the response');
});

t.test('422: unknown fields are extra_forbidden with their key in loc', async (t) => {
  const res = await app.req('POST', '/v1/agent/agents', { name: 'ok', colour: 'blue' });
  t.equal(res.status, 422);
  t.same(res.body, [{ type: 'extra_forbidden', loc: ['body', 'colour'], msg: 'Extra inputs are not permitted', ctx: {} }]);
});

t.test('422: explicit null on PATCH is refused, and the agent is unchanged', async (t) => {
  const created = await app.req('POST', '/v1/agent/agents', { name: 'keep me', description: 'd' });
  const id = created.body.agent_id;
  const res = await app.req('PATCH', `/v1/agent/agents/${id}`, { description: null });
  t.equal(res.status, 422);
  t.same(res.body[0].loc, ['body', 'description']);
  t.equal(res.body[0].type, 'null_forbidden');
  const after = await app.req('GET', `/v1/agent/agents/${id}`);
  t.equal(after.body.description, 'd');
  await app.req('DELETE', `/v1/agent/agents/${id}`);
});

t.test('404: an unknown route is JSON', async (t) => {
  const res = await app.req('GET', '/v1/nothing/here');
  t.equal(res.status, 404);
  t.same(res.body, { status: 404, message: 'Not found' });
});

t.test('405: a known path with the wrong method lists Allow', async (t) => {
  const res = await app.req('PUT', '/v1/agent/agents');
  t.equal(res.status, 405);
  t.same(res.headers.get('allow')!.split(', ').sort(), ['GET', 'POST']);
  t.equal(res.body.status, 405);
});

t.test('request ids: a safe X-Request-Id is echoed, an unsafe one replaced, a missing one made', async (t) => {
  const safe = await app.req('GET', '/health', undefined, { 'X-Request-Id': 'abc-123.DEF:4' });
  t.equal(safe.headers.get('x-request-id'), 'abc-123.DEF:4');
  const unsafe = await app.req('GET', '/health', undefined, { 'X-Request-Id': 'bad id <script>' });
  t.not(unsafe.headers.get('x-request-id'), 'bad id <script>');
  t.match(unsafe.headers.get('x-request-id'), /^[0-9a-f-]{36}$/);
  const errorRes = await app.req('GET', '/v1/agent/agents', undefined, { Authorization: 'Bearer nope', 'X-Request-Id': 'req-on-error' });
  t.equal(errorRes.headers.get('x-request-id'), 'req-on-error', 'echoed on errors too');
});
