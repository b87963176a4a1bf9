// Spec-coverage tests for the agents specification: rules of the tool resource, the knowledge
// sources, the authentication list and the error section that no other test names for
// every endpoint (docs/spec-coverage.md lists where every other row is asserted).
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer();
t.teardown(() => app.close());

const TOOL = { tool_type: 'webhook', name: 'Lookup', description: 'Finds an order', arguments: [{ name: 'order', description: 'order id' }], url: 'https://example.com/orders/{{order}}' };

async function newAgent(name = 'spec agent'): Promise<string> {
  const r = await app.req('POST', '/v1/agent/agents', { name });
  if (r.status !== 201) throw new Error(`agent create: ${r.status} ${r.text}`);
  return r.body.agent_id;
}

async function uploadKnowledge(text: string, path = '/v1/agent/knowledge-sources', method = 'POST') {
  const form = new FormData();
  form.set('source', new Blob([text], { type: 'text/plain' }), 'faq.txt');
  const res = await fetch(app.url + path, { method, headers: app.auth, body: form });
  return { status: res.status, body: (await res.json()) as any };
}

t.test('tools: "Editing a tool changes every agent that uses it" (the next publish takes the edit live)', async (t) => {
  const tool = await app.req('POST', '/v1/agent/tools', TOOL);
  t.equal(tool.status, 201);
  const agents = [await newAgent('first user'), await newAgent('second user')];
  for (const id of agents) {
    t.equal((await app.req('PATCH', `/v1/agent/agents/${id}/config`, { tools: { tool_ids: [tool.body.tool_id] } })).status, 200);
    t.equal((await app.req('POST', `/v1/agent/agents/${id}/publish`)).body.version_number, 1);
  }
  const edited = await app.req('PATCH', `/v1/agent/tools/${tool.body.tool_id}`, { url: 'https://example.com/v2/orders/{{order}}' });
  t.equal(edited.status, 200);
  t.equal(edited.body.used_by, 2, 'both agents use the edited tool');
  for (const id of agents) {
    const v = await app.req('POST', `/v1/agent/agents/${id}/publish`);
    t.equal(v.status, 200);
    t.equal(v.body.version_number, 2, `${id}: publishing after the tool edit creates a new version for new sessions`);
    const again = await app.req('POST', `/v1/agent/agents/${id}/publish`);
    t.equal(again.body.version_number, 2, `${id}: publishing again with nothing changed returns that version`);
  }
});

t.test('tools: "Detaching a tool from an agent leaves the tool in the workspace"', async (t) => {
  const tool = await app.req('POST', '/v1/agent/tools', TOOL);
  const agent = await newAgent();
  await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { tools: { tool_ids: [tool.body.tool_id] } });
  const detached = await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { tools: { tool_ids: [] } });
  t.same(detached.body.tools.tool_ids, []);
  const still = await app.req('GET', `/v1/agent/tools/${tool.body.tool_id}`);
  t.equal(still.status, 200, 'the tool is still readable');
  t.equal(still.body.used_by, 0);
  const listed = await app.req('GET', '/v1/agent/tools?page_size=100');
  t.ok(listed.body.tools.some((x: { tool_id: string }) => x.tool_id === tool.body.tool_id), 'and listed');
});

t.test('knowledge sources: a new upload reaches live sessions at the next publish (drafts follow the newest revision; publish pins it)', async (t) => {
  const ks = await uploadKnowledge('Refunds take five days.');
  t.equal(ks.status, 201);
  const agent = await newAgent();
  await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { knowledge_base: { enabled: true, knowledge_source_ids: [ks.body.knowledge_source_id] } });
  t.equal((await app.req('POST', `/v1/agent/agents/${agent}/publish`)).body.version_number, 1);
  const replaced = await uploadKnowledge('Refunds take three days.', `/v1/agent/knowledge-sources/${ks.body.knowledge_source_id}`, 'PATCH');
  t.equal(replaced.status, 200);
  t.equal(replaced.body.revision_number, 2);
  const v = await app.req('POST', `/v1/agent/agents/${agent}/publish`);
  t.equal(v.body.version_number, 2, 'publishing after the new revision creates a new version');
});

// Every in-scope endpoint (not phone numbers, calls or tool execution).
const ID = 'x_000000000000000000000000';
const ENDPOINTS: [string, string][] = [
  ['GET', '/v1/agent/agents'],
  ['POST', '/v1/agent/agents'],
  ['GET', `/v1/agent/agents/${ID}`],
  ['PATCH', `/v1/agent/agents/${ID}`],
  ['DELETE', `/v1/agent/agents/${ID}`],
  ['GET', `/v1/agent/agents/${ID}/config`],
  ['PATCH', `/v1/agent/agents/${ID}/config`],
  ['POST', `/v1/agent/agents/${ID}/publish`],
  ['GET', `/v1/agent/agents/${ID}/versions`],
  ['GET', `/v1/agent/agents/${ID}/versions/1`],
  ['GET', '/v1/agent/tools'],
  ['POST', '/v1/agent/tools'],
  ['GET', `/v1/agent/tools/${ID}`],
  ['PATCH', `/v1/agent/tools/${ID}`],
  ['DELETE', `/v1/agent/tools/${ID}`],
  ['GET', `/v1/agent/tools/${ID}/agents`],
  ['GET', '/v1/agent/knowledge-sources'],
  ['POST', '/v1/agent/knowledge-sources'],
  ['GET', `/v1/agent/knowledge-sources/${ID}`],
  ['PATCH', `/v1/agent/knowledge-sources/${ID}`],
  ['DELETE', `/v1/agent/knowledge-sources/${ID}`],
  ['GET', `/v1/agent/knowledge-sources/${ID}/agents`],
  ['GET', '/v1/agent/sessions'],
  ['GET', `/v1/agent/sessions/${ID}`],
  ['POST', `/v1/agent/sessions/${ID}/end`],
];

t.test('authentication rule 2: "A missing or malformed `Authorization` header on an endpoint other than session creation gives a bare `401` with header `WWW-Authenticate: Bearer`"', async (t) => {
  for (const [method, path] of ENDPOINTS) {
    for (const auth of [undefined, 'Basic dXNlcjpwYXNz', 'Bearer']) {
      const res = await fetch(app.url + path, { method, headers: auth ? { Authorization: auth } : {} });
      const label = `${method} ${path} ${auth ?? '(no header)'}`;
      t.equal(res.status, 401, label);
      t.equal(res.headers.get('www-authenticate'), 'Bearer', `${label}: WWW-Authenticate`);
      t.equal(await res.text(), '', `${label}: bare`);
    }
  }
});

t.test('authentication rule 2: "A present but bad credential gives the JSON error (`Invalid token` …)" on every endpoint', async (t) => {
  for (const [method, path] of [...ENDPOINTS, ['POST', '/v1/agent/sessions'] as [string, string]]) {
    const res = await fetch(app.url + path, { method, headers: { Authorization: 'Bearer pk_not_a_real_key' } });
    t.equal(res.status, 401, `${method} ${path}`);
    t.same(await res.json(), { status: 401, message: 'Invalid token' }, `${method} ${path}: JSON`);
  }
});

t.test('errors: "A missing body or wrong `Content-Type` gives a bare `415`" and "not valid JSON gives `400` … `Malformed JSON`" on every JSON write endpoint', async (t) => {
  const agent = await newAgent();
  const tool = (await app.req('POST', '/v1/agent/tools', TOOL)).body.tool_id;
  const writes: [string, string][] = [
    ['POST', '/v1/agent/agents'],
    ['PATCH', `/v1/agent/agents/${agent}`],
    ['PATCH', `/v1/agent/agents/${agent}/config`],
    ['POST', '/v1/agent/tools'],
    ['PATCH', `/v1/agent/tools/${tool}`],
    ['POST', '/v1/agent/sessions'],
  ];
  for (const [method, path] of writes) {
    const none = await fetch(app.url + path, { method, headers: app.auth });
    t.equal(none.status, 415, `${method} ${path}: no body`);
    t.equal(await none.text(), '', `${method} ${path}: bare 415`);
    const wrong = await fetch(app.url + path, { method, headers: { ...app.auth, 'Content-Type': 'text/plain' }, body: '{}' });
    t.equal(wrong.status, 415, `${method} ${path}: text/plain`);
    t.equal(await wrong.text(), '');
    const broken = await app.req(method, path, '{"name":', { 'Content-Type': 'application/json' });
    t.equal(broken.status, 400, `${method} ${path}: broken JSON`);
    t.same(broken.body, { status: 400, message: 'Malformed JSON' });
  }
  const multipart = await fetch(`${app.url}/v1/agent/knowledge-sources`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' }, body: '{}' });
  t.equal(multipart.status, 415, 'knowledge-source uploads need multipart/form-data');
  t.equal(await multipart.text(), '');
});

t.test('errors: "`404` Resource missing or belonging to another team (identical body)" for every resource kind', async (t) => {
  const other = await app.newTeam();
  const theirAgent = (await app.req('POST', '/v1/agent/agents', { name: 'theirs' }, other.auth)).body.agent_id;
  const theirTool = (await app.req('POST', '/v1/agent/tools', TOOL, other.auth)).body.tool_id;
  const form = new FormData();
  form.set('source', new Blob(['Their notes.'], { type: 'text/plain' }), 'notes.txt');
  const theirSource = ((await (await fetch(`${app.url}/v1/agent/knowledge-sources`, { method: 'POST', headers: other.auth, body: form })).json()) as any).knowledge_source_id;
  const cases: [string, string, string, string][] = [
    ['agent', `/v1/agent/agents/${theirAgent}`, '/v1/agent/agents/agent_000000000000000000000000', 'Agent not found'],
    ['tool', `/v1/agent/tools/${theirTool}`, '/v1/agent/tools/tool_000000000000000000000000', 'Tool not found'],
    ['knowledge source', `/v1/agent/knowledge-sources/${theirSource}`, '/v1/agent/knowledge-sources/ks_000000000000000000000000', 'Knowledge source not found'],
  ];
  for (const [kind, theirs, missing, message] of cases) {
    const a = await app.req('GET', theirs);
    const b = await app.req('GET', missing);
    t.equal(a.status, 404, `${kind}: another team's`);
    t.equal(b.status, 404, `${kind}: missing`);
    t.same(b.body, { status: 404, message }, `${kind}: message`);
    t.equal(a.text, b.text, `${kind}: identical body`);
  }
});

t.test('authentication rule 6: "Creating agent resources requires beta access on the account, else `403`" (`Agent platform is in private beta…`)', async (t) => {
  const team = await app.newTeam({ beta: false });
  const form = new FormData();
  form.set('source', new Blob(['Notes.'], { type: 'text/plain' }), 'notes.txt');
  const attempts: [string, () => Promise<{ status: number; body: any }>][] = [
    ['agent', () => app.req('POST', '/v1/agent/agents', { name: 'x' }, team.auth)],
    ['tool', () => app.req('POST', '/v1/agent/tools', TOOL, team.auth)],
    ['knowledge source', async () => {
      const res = await fetch(`${app.url}/v1/agent/knowledge-sources`, { method: 'POST', headers: team.auth, body: form });
      return { status: res.status, body: await res.json() };
    }],
  ];
  for (const [kind, attempt] of attempts) {
    const r = await attempt();
    t.equal(r.status, 403, kind);
    t.equal(r.body.status, 403, `${kind}: JSON body`);
    t.match(r.body.message, /^Agent platform is in private beta/, `${kind}: message`);
  }
  t.same((await app.req('GET', '/v1/agent/agents', undefined, team.auth)).body.agents, [], 'nothing was created');
});

t.test('limits table: every config limit is enforced through PATCH …/config with `422` at the field, and the draft is unchanged', async (t) => {
  const agent = await newAgent();
  const path = `/v1/agent/agents/${agent}/config`;
  const before = await app.req('GET', path);
  const s = (n: number, c = 'a') => c.repeat(n);
  const url = (n: number) => 'https://example.com/' + 'p'.repeat(n - 'https://example.com/'.length);
  // [limit row, accepted at the limit, refused one past, loc of the refusal]
  const rows: [string, unknown, unknown, (string | number)[]][] = [
    ['system_prompt: 4,000 tokens', { prompt: { system_prompt: ' a'.repeat(4000) } }, { prompt: { system_prompt: ' a'.repeat(4001) } }, ['body', 'prompt', 'system_prompt']],
    ['system_prompt: 100,000 characters', { prompt: { system_prompt: s(100_000, ' ') } }, { prompt: { system_prompt: s(100_001, ' ') } }, ['body', 'prompt', 'system_prompt']],
    ['first_message: 10,000 characters', { prompt: { first_message: s(10_000) } }, { prompt: { first_message: s(10_001) } }, ['body', 'prompt', 'first_message']],
    ['first_message_prompt: 10,000 characters', { prompt: { first_message_prompt: s(10_000) } }, { prompt: { first_message_prompt: s(10_001) } }, ['body', 'prompt', 'first_message_prompt']],
    ['voice_id: 256 characters', { voice: { voice_id: s(256, 'v') } }, { voice: { voice_id: s(257, 'v') } }, ['body', 'voice', 'voice_id']],
    ['max_duration_seconds: at least 60', { conversation: { max_duration_seconds: 60 } }, { conversation: { max_duration_seconds: 59 } }, ['body', 'conversation', 'max_duration_seconds']],
    ['max_duration_seconds: at most 3600', { conversation: { max_duration_seconds: 3600 } }, { conversation: { max_duration_seconds: 3601 } }, ['body', 'conversation', 'max_duration_seconds']],
    ['conversation.timezone: 64 characters', { conversation: { timezone: 'America/Argentina/Buenos_Aires' } }, { conversation: { timezone: s(65, 'A') } }, ['body', 'conversation', 'timezone']],
    ['webhooks.post_call: 5 endpoints', { webhooks: { post_call: Array.from({ length: 5 }, (_, i) => ({ url: `https://h${i}.example.com/` })) } }, { webhooks: { post_call: Array.from({ length: 6 }, (_, i) => ({ url: `https://h${i}.example.com/` })) } }, ['body', 'webhooks', 'post_call']],
    ['webhooks.post_call: url 4,000 characters', { webhooks: { post_call: [{ url: url(4000) }] } }, { webhooks: { post_call: [{ url: url(4001) }] } }, ['body', 'webhooks', 'post_call', 0, 'url']],
    ['webhooks.post_call: url at least 1 character', { webhooks: { post_call: [{ url: 'https://e.example.com' }] } }, { webhooks: { post_call: [{ url: '' }] } }, ['body', 'webhooks', 'post_call', 0, 'url']],
    ['webhooks.post_call: secret 256 characters', { webhooks: { post_call: [{ url: 'https://e.example.com', secret: s(256) }] } }, { webhooks: { post_call: [{ url: 'https://e.example.com', secret: s(257) }] } }, ['body', 'webhooks', 'post_call', 0, 'secret']],
    ['analysis.data_fields: 20 entries', { analysis: { data_fields: Array.from({ length: 20 }, (_, i) => ({ name: `f${i}` })) } }, { analysis: { data_fields: Array.from({ length: 21 }, (_, i) => ({ name: `f${i}` })) } }, ['body', 'analysis', 'data_fields']],
    ['analysis.data_fields: name pattern', { analysis: { data_fields: [{ name: 'a' + s(63, 'b') }] } }, { analysis: { data_fields: [{ name: 'a' + s(64, 'b') }] } }, ['body', 'analysis', 'data_fields', 0, 'name']],
    ['analysis.data_fields: description 500 characters', { analysis: { data_fields: [{ name: 'f', description: s(500) }] } }, { analysis: { data_fields: [{ name: 'f', description: s(501) }] } }, ['body', 'analysis', 'data_fields', 0, 'description']],
    ['analysis.criteria: 10 entries', { analysis: { criteria: Array.from({ length: 10 }, (_, i) => ({ name: `c${i}` })) } }, { analysis: { criteria: Array.from({ length: 11 }, (_, i) => ({ name: `c${i}` })) } }, ['body', 'analysis', 'criteria']],
    ['analysis.criteria: name pattern', { analysis: { criteria: [{ name: 'resolved' }] } }, { analysis: { criteria: [{ name: 'Resolved' }] } }, ['body', 'analysis', 'criteria', 0, 'name']],
    ['analysis.criteria: description 500 characters', { analysis: { criteria: [{ name: 'c', description: s(500) }] } }, { analysis: { criteria: [{ name: 'c', description: s(501) }] } }, ['body', 'analysis', 'criteria', 0, 'description']],
    ['analysis.summary.prompt: 1,000 characters', { analysis: { summary: { prompt: s(1000) } } }, { analysis: { summary: { prompt: s(1001) } } }, ['body', 'analysis', 'summary', 'prompt']],
  ];
  for (const [row, atLimit, past, loc] of rows) {
    const good = await app.req('PATCH', path, atLimit);
    t.equal(good.status, 200, `${row}: accepted at the limit`);
    const current = await app.req('GET', path);
    const bad = await app.req('PATCH', path, past);
    t.equal(bad.status, 422, `${row}: refused one past`);
    t.ok(Array.isArray(bad.body) && bad.body.some((e: { loc: unknown[] }) => JSON.stringify(e.loc) === JSON.stringify(loc)), `${row}: 422 at ${loc.join('.')}`);
    t.same((await app.req('GET', path)).body, current.body, `${row}: draft unchanged by the refusal`);
  }
  t.not((await app.req('GET', path)).body.config_hash, before.body.config_hash, 'the accepted edits did land');
});

t.test('limits table: "session name 128 characters", "dynamic_variables 50 entries", "session timezone … 64 characters" → 422 at the field', async (t) => {
  const agent = await newAgent();
  t.equal((await app.req('POST', `/v1/agent/agents/${agent}/publish`)).status, 200);
  const vars = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`v${i}`, i]));
  const rows: [string, Record<string, unknown>, Record<string, unknown>, (string | number)[]][] = [
    ['session name', { name: 'n'.repeat(128) }, { name: 'n'.repeat(129) }, ['body', 'name']],
    ['dynamic_variables', { dynamic_variables: vars(50) }, { dynamic_variables: vars(51) }, ['body', 'dynamic_variables']],
    ['session timezone', { timezone: 'Europe/Paris' }, { timezone: 'E'.repeat(65) }, ['body', 'timezone']],
    ['client_timezone', { client_timezone: 'Europe/Paris' }, { client_timezone: 'E'.repeat(65) }, ['body', 'client_timezone']],
  ];
  for (const [row, atLimit, past, loc] of rows) {
    t.equal((await app.req('POST', '/v1/agent/sessions', { agent_id: agent, ...atLimit })).status, 200, `${row}: accepted at the limit`);
    const bad = await app.req('POST', '/v1/agent/sessions', { agent_id: agent, ...past });
    t.equal(bad.status, 422, `${row}: refused one past`);
    t.same(bad.body?.[0]?.loc, loc, `${row}: loc`);
  }
});
