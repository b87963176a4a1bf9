import t from 'tap';
import { z } from 'zod';
import { ToolService, toolEntity, toolSummary } from '../../src/tools/service.ts';
import { publishDraft, updateDraft } from '../../src/drafts/store.ts';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer();
t.teardown(() => app.close());

const BASE = { name: 'lookup_order', description: 'Looks up an order', url: 'https://api.example.com/orders' };
const fullRead = z.strictObject(toolEntity.shape);
const summaryRead = z.strictObject(toolSummary.shape);
const create = (body: unknown, auth?: Record<string, string>) => app.req('POST', '/v1/agent/tools', body, auth);
const locs = (body: { loc: unknown[] }[]) => body.map((e) => e.loc);

/** Attaches ids to an agent's draft through the store (as PATCH …/config would). */
async function attach(teamId: string, agentId: string, section: 'tools' | 'knowledge_base', ids: string[]) {
  await updateDraft(app.db.sql, teamId, agentId, async (cur) => {
    const config = structuredClone(cur.config) as Record<string, Record<string, unknown>>;
    config[section] = { ...config[section], [section === 'tools' ? 'tool_ids' : 'knowledge_source_ids']: ids };
    return { config, hash: `test-${Math.random()}` };
  });
}
const publish = (teamId: string, agentId: string) => publishDraft(app.db.sql, teamId, agentId, { title: null, description: null }, async () => ({}));
const newAgent = async (name: string, auth?: Record<string, string>) => (await app.req('POST', '/v1/agent/agents', { name }, auth)).body.agent_id as string;

t.test('create with only the required fields: every default present on read', async (t) => {
  const res = await create(BASE);
  t.equal(res.status, 201);
  fullRead.parse(res.body);
  t.match(res.body.tool_id, /^tool_[0-9a-f]{24}$/);
  t.equal(res.body.workspace_id, app.teamId);
  t.match(res.body, {
    ...BASE, tool_type: 'webhook', method: 'POST', content_type: 'application/json', body_template: '', arguments: [], headers: [],
    timeout_seconds: 30, error_handling: 'passthrough', mock_responses: [], expects_response: true, execution_mode: 'blocking', used_by: 0,
  });
  const got = await app.req('GET', `/v1/agent/tools/${res.body.tool_id}`);
  t.same(got.body, res.body);
  const mock = await create({ ...BASE, mock_responses: [{}] });
  t.same(mock.body.mock_responses, [{ name: '', status_code: 200, content_type: 'application/json', body: '' }], 'mock defaults');
  const arg = await create({ ...BASE, arguments: [{ name: 'order_id' }], headers: [{ name: 'X-Plain', value: 'v' }] });
  t.same(arg.body.arguments, [{ name: 'order_id', description: '' }]);
  t.same(arg.body.headers, [{ name: 'X-Plain', kind: 'custom', value: 'v', has_secret: false }], 'header kind defaults to custom, not secret');
});

t.test('every field and limit of the tool table: at the limit accepted, one step past → 422 at the field', async (t) => {
  const s = (n: number, c = 'a') => c.repeat(n);
  const urlOf = (n: number) => 'https://example.com/' + 'p'.repeat(n - 'https://example.com/'.length);
  // [label, body overrides, expected loc or null when accepted]
  const cases: [string, Record<string, unknown>, (string | number)[] | null][] = [
    ['name 1', { name: 'a' }, null],
    ['name 120', { name: s(120) }, null],
    ['name 121', { name: s(121) }, ['body', 'name']],
    ['name empty', { name: '' }, ['body', 'name']],
    ['name null', { name: null }, ['body', 'name']],
    ['description 2000', { description: s(2000) }, null],
    ['description 2001', { description: s(2001) }, ['body', 'description']],
    ['tool_type webhook', { tool_type: 'webhook' }, null],
    ['tool_type other', { tool_type: 'mcp' }, ['body', 'tool_type']],
    ['argument name 64, description 500', { arguments: [{ name: s(64), description: s(500) }] }, null],
    ['argument name 65', { arguments: [{ name: s(65) }] }, ['body', 'arguments', 0, 'name']],
    ['argument name empty', { arguments: [{ name: '' }] }, ['body', 'arguments', 0, 'name']],
    ['argument description 501', { arguments: [{ name: 'a', description: s(501) }] }, ['body', 'arguments', 0, 'description']],
    ['argument unknown key', { arguments: [{ name: 'a', type: 'string' }] }, ['body', 'arguments', 0, 'type']],
    ['argument names repeat', { arguments: [{ name: 'a' }, { name: 'a' }] }, ['body', 'arguments', 1, 'name']],
    ['method GET', { method: 'GET' }, null],
    ['method PUT', { method: 'PUT' }, null],
    ['method PATCH', { method: 'PATCH' }, null],
    ['method DELETE', { method: 'DELETE' }, null],
    ['method HEAD', { method: 'HEAD' }, ['body', 'method']],
    ['method lower-case', { method: 'post' }, ['body', 'method']],
    ['url 4000', { url: urlOf(4000) }, null],
    ['url 4001', { url: urlOf(4001) }, ['body', 'url']],
    ['url missing on a webhook tool', { url: undefined }, ['body', 'url']],
    ['content_type 128', { content_type: s(128) }, null],
    ['content_type 129', { content_type: s(129) }, ['body', 'content_type']],
    ['body_template 100,000', { body_template: s(100_000) }, null],
    ['body_template 100,001', { body_template: s(100_001) }, ['body', 'body_template']],
    ['header name 128, value 4000', { headers: [{ name: s(128, 'x'), value: s(4000) }] }, null],
    ['header name 129', { headers: [{ name: s(129, 'x'), value: 'v' }] }, ['body', 'headers', 0, 'name']],
    ['header name empty', { headers: [{ name: '', value: 'v' }] }, ['body', 'headers', 0, 'name']],
    ['header name not a token', { headers: [{ name: 'X Bad', value: 'v' }] }, ['body', 'headers', 0, 'name']],
    ['header value 4001', { headers: [{ name: 'X-A', value: s(4001) }] }, ['body', 'headers', 0, 'value']],
    ['header value missing', { headers: [{ name: 'X-A' }] }, ['body', 'headers', 0, 'value']],
    ['header value with CRLF', { headers: [{ name: 'X-A', value: 'a\r\nX-Injected: 1' }] }, ['body', 'headers', 0, 'value']],
    ['header kind unknown', { headers: [{ name: 'X-A', value: 'v', kind: 'digest' }] }, ['body', 'headers', 0, 'kind']],
    ['credential header secret:false', { headers: [{ name: 'Authorization', value: 'Bearer x', kind: 'authorization_bearer', secret: false }] }, ['body', 'headers', 0, 'secret']],
    ['header unknown key', { headers: [{ name: 'X-A', value: 'v', has_secret: true }] }, ['body', 'headers', 0, 'has_secret']],
    ['timeout 1', { timeout_seconds: 1 }, null],
    ['timeout 0', { timeout_seconds: 0 }, ['body', 'timeout_seconds']],
    ['timeout 120 blocking', { timeout_seconds: 120 }, null],
    ['timeout 121 blocking', { timeout_seconds: 121 }, ['body', 'timeout_seconds']],
    ['timeout 121 fire_and_forget', { timeout_seconds: 121, execution_mode: 'fire_and_forget' }, ['body', 'timeout_seconds']],
    ['timeout 300 background', { timeout_seconds: 300, execution_mode: 'background' }, null],
    ['timeout 301 background', { timeout_seconds: 301, execution_mode: 'background' }, ['body', 'timeout_seconds']],
    ['timeout not an integer', { timeout_seconds: 1.5 }, ['body', 'timeout_seconds']],
    ['timeout as a string', { timeout_seconds: '30' }, ['body', 'timeout_seconds']],
    ['error_handling hide', { error_handling: 'hide' }, null],
    ['error_handling other', { error_handling: 'ignore' }, ['body', 'error_handling']],
    ['execution_mode fire_and_forget', { execution_mode: 'fire_and_forget' }, null],
    ['execution_mode other', { execution_mode: 'async' }, ['body', 'execution_mode']],
    ['expects_response false', { expects_response: false }, null],
    ['expects_response not boolean', { expects_response: 'yes' }, ['body', 'expects_response']],
    ['mock status 100 and 599, body 100,000, name 120, content_type 128', {
      mock_responses: [{ status_code: 100 }, { status_code: 599, body: s(100_000), name: s(120), content_type: s(128) }],
    }, null],
    ['mock status 99', { mock_responses: [{ status_code: 99 }] }, ['body', 'mock_responses', 0, 'status_code']],
    ['mock status 600', { mock_responses: [{ status_code: 600 }] }, ['body', 'mock_responses', 0, 'status_code']],
    ['mock body 100,001', { mock_responses: [{ body: s(100_001) }] }, ['body', 'mock_responses', 0, 'body']],
    ['mock name 121', { mock_responses: [{ name: s(121) }] }, ['body', 'mock_responses', 0, 'name']],
    ['mock content_type 129', { mock_responses: [{ content_type: s(129) }] }, ['body', 'mock_responses', 0, 'content_type']],
    ['mock unknown key', { mock_responses: [{ headers: {} }] }, ['body', 'mock_responses', 0, 'headers']],
    ['the spec\'s display name "mock responses" is not a key', { 'mock responses': [] }, ['body', 'mock responses']],
    ['unknown top-level key', { enabled: true }, ['body', 'enabled']],
  ];
  for (const [label, over, loc] of cases) {
    const body: Record<string, unknown> = { ...BASE, ...over };
    for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
    const res = await create(body);
    if (loc === null) {
      t.equal(res.status, 201, label);
      if (res.status === 201) {
        fullRead.parse(res.body);
        for (const [k, v] of Object.entries(over)) if (k !== 'headers' && k !== 'mock_responses' && k !== 'arguments') t.same(res.body[k], v, `${label}: ${k} stored`);
      }
    } else {
      t.equal(res.status, 422, label);
      t.same(locs(res.body), [loc], `${label}: loc`);
    }
  }
});

t.test('client tools: no URL, a function-style name', async (t) => {
  const ok = await create({ name: 'get_weather', tool_type: 'client', expects_response: false });
  t.equal(ok.status, 201);
  t.match(ok.body, { tool_type: 'client', url: '', expects_response: false });
  for (const [label, body, loc] of [
    ['spaces in name', { name: 'get weather', tool_type: 'client' }, ['body', 'name']],
    ['leading underscore is reserved', { name: '_end', tool_type: 'client' }, ['body', 'name']],
    ['65 characters', { name: 'a'.repeat(65), tool_type: 'client' }, ['body', 'name']],
    ['a client tool with a URL', { name: 'ok', tool_type: 'client', url: 'https://example.com/' }, ['body', 'url']],
  ] as const) {
    const res = await create(body);
    t.equal(res.status, 422, label);
    t.same(locs(res.body), [loc], label);
  }
  t.equal((await create({ name: 'a'.repeat(64), tool_type: 'client' })).status, 201, '64 characters');
});

t.test('PATCH: fields optional, null → 422, unknown → 422, combinations checked after merge, failure changes nothing', async (t) => {
  const tool = (await create({ ...BASE, arguments: [{ name: 'id' }] })).body;
  const path = `/v1/agent/tools/${tool.tool_id}`;
  const empty = await app.req('PATCH', path, {});
  t.equal(empty.status, 200, 'an empty patch is a no-op');
  t.same({ ...empty.body, updated_at: null }, { ...tool, updated_at: null });
  const renamed = await app.req('PATCH', path, { name: 'renamed', method: 'GET' });
  t.equal(renamed.status, 200);
  fullRead.parse(renamed.body);
  t.match(renamed.body, { name: 'renamed', method: 'GET', url: BASE.url, arguments: [{ name: 'id', description: '' }] });
  for (const field of ['name', 'description', 'tool_type', 'arguments', 'method', 'url', 'content_type', 'body_template', 'headers', 'timeout_seconds', 'error_handling', 'mock_responses', 'expects_response', 'execution_mode']) {
    const res = await app.req('PATCH', path, { [field]: null });
    t.equal(res.status, 422, `${field}: null`);
    t.same(locs(res.body), [['body', field]], `${field}: null at its loc`);
    t.ok(['null_forbidden', 'enum'].includes(res.body[0].type), `${field}: ${res.body[0].type}`);
  }
  const unknown = await app.req('PATCH', path, { tool_id: 'x' });
  t.same(locs(unknown.body), [['body', 'tool_id']]);
  const emptyUrl = await app.req('PATCH', path, { url: '' });
  t.same(locs(emptyUrl.body), [['body', 'url']], 'url is 1–4000 on PATCH');
  const tooLong = await app.req('PATCH', path, { timeout_seconds: 121 });
  t.same(locs(tooLong.body), [['body', 'timeout_seconds']]);
  const bg = await app.req('PATCH', path, { timeout_seconds: 300, execution_mode: 'background' });
  t.equal(bg.status, 200, 'background allows 300');
  const back = await app.req('PATCH', path, { execution_mode: 'blocking' });
  t.equal(back.status, 422, 'leaving background with a 300 s timeout');
  t.same(locs(back.body), [['body', 'execution_mode']], 'loc names the field that was sent');
  const both = await app.req('PATCH', path, { execution_mode: 'blocking', timeout_seconds: 200 });
  t.same(locs(both.body), [['body', 'timeout_seconds']]);
  const blocked = await app.req('PATCH', path, { url: 'http://169.254.169.254/latest', name: 'should not stick' });
  t.same(locs(blocked.body), [['body', 'url']]);
  const after = await app.req('GET', path);
  t.match(after.body, { name: 'renamed', url: BASE.url, execution_mode: 'background', timeout_seconds: 300 }, 'failed PATCHes left the tool as it was');
  const toClient = await app.req('PATCH', path, { tool_type: 'client' });
  t.same(locs(toClient.body), [['body', 'tool_type']], 'a webhook with a URL cannot become a client tool without dropping it');
});

t.test('credential headers are write-only, sealed at rest, rotate on a new value; runtime reads plaintext', async (t) => {
  const service = new ToolService(app.db.sql, app.box);
  const secrets = { bearer: 'Bearer sk-live-SECRET-1', basic: 'Basic dXNlcjpTRUNSRVQtMg==', custom: 'SECRET-3-custom' };
  const res = await create({
    ...BASE,
    headers: [
      { name: 'Authorization', value: secrets.bearer, kind: 'authorization_bearer' },
      { name: 'Proxy-Authorization', value: secrets.basic, kind: 'authorization_basic' },
      { name: 'X-Api-Key', value: secrets.custom, secret: true },
      { name: 'X-Trace', value: 'visible' },
    ],
  });
  t.equal(res.status, 201);
  t.notOk(res.text.includes('SECRET'), 'no secret in the create response');
  const expected = [
    { name: 'Authorization', kind: 'authorization_bearer', value: null, has_secret: true },
    { name: 'Proxy-Authorization', kind: 'authorization_basic', value: null, has_secret: true },
    { name: 'X-Api-Key', kind: 'custom', value: null, has_secret: true },
    { name: 'X-Trace', kind: 'custom', value: 'visible', has_secret: false },
  ];
  t.same(res.body.headers, expected);
  const id = res.body.tool_id;
  const got = await app.req('GET', `/v1/agent/tools/${id}`);
  t.same(got.body.headers, expected);
  t.notOk((await app.req('GET', '/v1/agent/tools')).text.includes('SECRET'), 'nor in the list');

  const raw = async () => (await app.db.sql`select row_to_json(t)::text as j from tools t where id = ${id}`)[0]!.j as string;
  const row1 = await raw();
  t.notOk(row1.includes('SECRET') || row1.includes('dXNlcjpTRUNSRVQtMg'), 'the raw row holds no plaintext');
  t.match(row1, /v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/, 'but ciphertext');

  const runtime = await service.resolveToolForRuntime(app.teamId, id);
  t.same(runtime!.headers, [
    { name: 'Authorization', kind: 'authorization_bearer', value: secrets.bearer, secret: true },
    { name: 'Proxy-Authorization', kind: 'authorization_basic', value: secrets.basic, secret: true },
    { name: 'X-Api-Key', kind: 'custom', value: secrets.custom, secret: true },
    { name: 'X-Trace', kind: 'custom', value: 'visible' },
  ]);
  t.match(runtime, { tool_id: id, url: BASE.url, method: 'POST', timeout_seconds: 30 });
  t.equal(await service.resolveToolForRuntime((await app.newTeam()).teamId, id), undefined, 'another team cannot resolve it');

  const rotated = await app.req('PATCH', `/v1/agent/tools/${id}`, { headers: [{ name: 'Authorization', value: 'Bearer sk-live-SECRET-ROTATED', kind: 'authorization_bearer' }] });
  t.equal(rotated.status, 200);
  t.same(rotated.body.headers, [{ name: 'Authorization', kind: 'authorization_bearer', value: null, has_secret: true }], 'headers replaced whole');
  t.notOk(rotated.text.includes('SECRET'));
  const row2 = await raw();
  t.notOk(row2.includes('SECRET'));
  t.not(row2, row1);
  t.same((await service.resolveToolForRuntime(app.teamId, id))!.headers, [{ name: 'Authorization', kind: 'authorization_bearer', value: 'Bearer sk-live-SECRET-ROTATED', secret: true }], 'rotated');
  const untouched = await app.req('PATCH', `/v1/agent/tools/${id}`, { name: 'other' });
  t.same((await service.resolveToolForRuntime(app.teamId, id))!.headers[0]!.value, 'Bearer sk-live-SECRET-ROTATED', 'a PATCH without headers keeps the secret');
  t.equal(untouched.status, 200);

  const bad = await app.req('PATCH', `/v1/agent/tools/${id}`, { headers: [{ name: 'Authorization', value: 'Bearer SECRET-x' + 'y'.repeat(4000), kind: 'authorization_bearer' }] });
  t.equal(bad.status, 422);
  t.notOk(bad.text.includes('SECRET'), 'a 422 never echoes the value');
});

t.test('mock responses are stored as given and read back', async (t) => {
  const mocks = [
    { name: 'found', status_code: 200, content_type: 'application/json', body: '{"status":"shipped"}' },
    { name: 'missing', status_code: 404, content_type: 'text/plain', body: 'no such order' },
  ];
  const res = await create({ ...BASE, mock_responses: mocks });
  t.same(res.body.mock_responses, mocks);
  t.same((await app.req('GET', `/v1/agent/tools/${res.body.tool_id}`)).body.mock_responses, mocks);
  const patched = await app.req('PATCH', `/v1/agent/tools/${res.body.tool_id}`, { mock_responses: [] });
  t.same(patched.body.mock_responses, []);
});

t.test('URL forms: accepted and rejected (SSRF rules) through the API', async (t) => {
  const accepted = [
    'https://api.example.com/orders',
    'http://example.com/hook',
    'https://example.com:8443/path?x=1#frag',
    'https://api.example.com/orders/{{order_id}}?expand=items',
    'https://8.8.8.8/dns',
    'https://[2001:4860:4860::8888]/v6',
    'HTTPS://EXAMPLE.COM/upper',
    'https://example.com./trailing-dot',
  ];
  const rejected: [string, RegExp][] = [
    ['http://localhost/', /public name/],
    ['http://LOCALHOST:3000/', /public name/],
    ['http://app.localhost/', /public name/],
    ['http://127.0.0.1/', /loopback/],
    ['http://127.1/', /loopback/],
    ['http://2130706433/', /loopback/],
    ['http://0177.0.0.1/', /loopback/],
    ['http://0x7f000001/', /loopback/],
    ['http://0x7f.0.0.1/', /loopback/],
    ['http://%31%32%37.0.0.1/', /loopback/],
    ['http://[::1]/', /public address/],
    ['http://[::ffff:127.0.0.1]/', /loopback/],
    ['http://[::ffff:7f00:1]/', /loopback/],
    ['http://[::ffff:10.0.0.1]/', /private/],
    ['http://10.0.0.1/', /private/],
    ['http://172.16.5.4/', /private/],
    ['http://192.168.1.1/', /private/],
    ['http://100.64.0.1/', /carrier-grade NAT/],
    ['http://169.254.169.254/latest/meta-data/', /public address/],
    ['http://[fd00:ec2::254]/', /public address/],
    ['http://metadata.google.internal/computeMetadata/v1/', /public name/],
    ['http://[fe80::1]/', /public address/],
    ['http://[fc00::1]/', /public address/],
    ['http://0.0.0.0/', /public address/],
    ['http://[::]/', /public address/],
    ['http://service.internal/', /public name/],
    ['https://user:pass@example.com/', /credentials/],
    ['https://user@example.com/', /credentials/],
    ['ftp://example.com/file', /scheme/],
    ['file:///etc/passwd', /scheme/],
    ['javascript:alert(1)', /scheme/],
    ['gopher://example.com/', /scheme/],
    ['not a url', /not valid/],
    ['http://[64:ff9b::a00:1]/', /embedded/],
    ['http://224.0.0.1/', /multicast/],
  ];
  let n = 0;
  for (const url of accepted) {
    const res = await create({ ...BASE, url });
    t.equal(res.status, 201, `accepted: ${url}`);
    n++;
  }
  for (const [url, reason] of rejected) {
    const res = await create({ ...BASE, url });
    t.equal(res.status, 422, `rejected: ${url}`);
    t.same(locs(res.body), [['body', 'url']], `${url}: loc`);
    t.match(res.body[0].msg, reason, `${url}: reason`);
    t.notOk(res.text.includes(url), `${url}: not echoed`);
    n++;
  }
  const tool = (await create(BASE)).body;
  const viaPatch = await app.req('PATCH', `/v1/agent/tools/${tool.tool_id}`, { url: 'http://[::ffff:169.254.169.254]/' });
  t.same(locs(viaPatch.body), [['body', 'url']], 'PATCH checks the URL too');
  t.ok(n >= 25, `${n} URL forms`);
});

t.test('403 without beta access', async (t) => {
  const other = await app.newTeam({ beta: false });
  const res = await create(BASE, other.auth);
  t.equal(res.status, 403);
  t.match(res.body.message, /^Agent platform is in private beta/);
});

t.test('delete: 409 with N while drafts reference it; published snapshots do not block; /agents lists draft references', async (t) => {
  const team = await app.newTeam();
  const tool = (await create(BASE, team.auth)).body;
  const a1 = await newAgent('first', team.auth);
  const a2 = await newAgent('second', team.auth);
  await attach(team.teamId, a1, 'tools', [tool.tool_id]);
  await attach(team.teamId, a2, 'tools', [tool.tool_id]);
  const path = `/v1/agent/tools/${tool.tool_id}`;
  const agents = await app.req('GET', `${path}/agents`, undefined, team.auth);
  t.same(agents.body, { agents: [{ agent_id: a2, name: 'second' }, { agent_id: a1, name: 'first' }], total: 2 });
  t.equal((await app.req('GET', path, undefined, team.auth)).body.used_by, 2);
  const blocked = await app.req('DELETE', path, undefined, team.auth);
  t.equal(blocked.status, 409);
  t.same(blocked.body, { status: 409, message: 'Tool is attached to 2 agent(s). Detach it first.' });

  const filtered = await app.req('GET', `/v1/agent/tools?agent_id=${a1}&include_total=true`, undefined, team.auth);
  t.same(filtered.body.tools.map((x: { tool_id: string }) => x.tool_id), [tool.tool_id], 'agent_id filter');
  const otherAgent = await newAgent('theirs');
  t.equal((await app.req('GET', `/v1/agent/tools?agent_id=${otherAgent}`, undefined, team.auth)).status, 404, "another team's agent_id → 404");

  // Publish both agents with the tool, then detach it from both drafts.
  t.ok(await publish(team.teamId, a1));
  t.ok(await publish(team.teamId, a2));
  await attach(team.teamId, a1, 'tools', []);
  const one = await app.req('DELETE', path, undefined, team.auth);
  t.same(one.body, { status: 409, message: 'Tool is attached to 1 agent(s). Detach it first.' });
  await attach(team.teamId, a2, 'tools', []);
  t.same((await app.req('GET', `${path}/agents`, undefined, team.auth)).body, { agents: [], total: 0 });
  const frozen = await new ToolService(app.db.sql, app.box).frozenToolsForPublish(team.teamId, [tool.tool_id, 'tool_missing']);
  t.same(frozen.map((f) => f.id), [tool.tool_id], 'frozen records for publish');
  const del = await app.req('DELETE', path, undefined, team.auth);
  t.equal(del.status, 204, 'published versions still naming it do not block');
  t.same((await app.req('GET', path, undefined, team.auth)).body, { status: 404, message: 'Tool not found' });
});

t.test("another team's tool gives exactly the same 404 as a missing one on every route", async (t) => {
  const other = await app.newTeam();
  const theirs = (await create(BASE, other.auth)).body;
  const missing = await app.req('GET', '/v1/agent/tools/tool_000000000000000000000000');
  t.same(missing.body, { status: 404, message: 'Tool not found' });
  for (const [method, suffix, body] of [['GET', '', undefined], ['PATCH', '', { name: 'mine' }], ['PATCH', '', { name: null }], ['DELETE', '', undefined], ['GET', '/agents', undefined]] as const) {
    const res = await app.req(method, `/v1/agent/tools/${theirs.tool_id}${suffix}`, body);
    t.equal(res.status, 404, `${method} ${suffix}`);
    t.equal(res.text, missing.text, `${method} ${suffix}: same body`);
  }
  const list = await app.req('GET', '/v1/agent/tools?page_size=100');
  t.notOk(list.body.tools.some((x: { tool_id: string }) => x.tool_id === theirs.tool_id));
  t.equal((await app.req('GET', `/v1/agent/tools/${theirs.tool_id}`, undefined, other.auth)).body.name, BASE.name, 'untouched');
});

t.test('list: pagination rules and search', async (t) => {
  const team = await app.newTeam();
  const ids: string[] = [];
  for (let i = 0; i < 35; i++) ids.push((await create({ ...BASE, name: `tool ${i}` }, team.auth)).body.tool_id);
  const newestFirst = ids.slice().reverse();
  const get = (q: string) => app.req('GET', `/v1/agent/tools${q}`, undefined, team.auth);
  const seen: string[] = [];
  let q = '?page_size=15';
  const sizes: number[] = [];
  for (;;) {
    const r = await get(q);
    t.equal(r.status, 200);
    summaryRead.array().parse(r.body.tools);
    t.equal(r.body.total, null);
    sizes.push(r.body.tools.length);
    seen.push(...r.body.tools.map((x: { tool_id: string }) => x.tool_id));
    if (!r.body.has_more) break;
    q = `?page_size=15&cursor=${r.body.next_cursor}`;
  }
  t.same(sizes, [15, 15, 5]);
  t.same(seen, newestFirst, 'cursor walk: every tool once, newest first');
  const p2 = await get('?page=2&page_size=15');
  t.equal(p2.body.total, 35);
  t.same(p2.body.tools.map((x: { tool_id: string }) => x.tool_id), newestFirst.slice(15, 30));
  t.type(p2.body.next_cursor, 'string');
  t.equal((await get('?include_total=true')).body.tools.length, 30, 'default page size 30');
  t.same((await get(`?page=1&cursor=${p2.body.next_cursor}`)).body, { status: 400, message: 'page and cursor are mutually exclusive' });
  t.same((await get('?cursor=nope!')).body, { status: 400, message: 'Invalid cursor' });
  t.same((await get('?page=1001&page_size=100')).body, { status: 400, message: 'Page offset exceeds 100000 rows' });
  for (const bad of ['?page_size=0', '?page_size=101', '?page=0']) t.equal((await get(bad)).status, 422, bad);
  const found = await get('?search=TOOL%203&include_total=true');
  t.equal(found.body.total, 6, 'tool 3, 30–34 (case-insensitive)');
  t.equal((await get('?search=100%25&include_total=true')).body.total, 0, 'wildcards are literal');
});

t.test('the draft config resolves tool ids through the store (PATCH …/config)', async (t) => {
  const team = await app.newTeam();
  const other = await app.newTeam();
  const mine = (await create(BASE, team.auth)).body.tool_id;
  const theirs = (await create(BASE, other.auth)).body.tool_id;
  const agent = await newAgent('resolver', team.auth);
  const bad = await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { tools: { tool_ids: [mine, theirs] } }, team.auth);
  t.equal(bad.status, 422);
  t.same(locs(bad.body), [['body', 'tools', 'tool_ids', 1]], "another team's tool does not resolve");
  const ok = await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { tools: { tool_ids: [mine] } }, team.auth);
  t.equal(ok.status, 200);
  t.same((await app.req('DELETE', `/v1/agent/tools/${mine}`, undefined, team.auth)).body, { status: 409, message: 'Tool is attached to 1 agent(s). Detach it first.' });
});
