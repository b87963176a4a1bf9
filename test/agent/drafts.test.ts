import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { openApiValidator } from '../helpers/openapi.ts';

const app = await startTestServer();
t.teardown(() => app.close());
const doc = (await app.req('GET', '/openapi.json')).body;
const oas = openApiValidator(doc);

/** Every response these tests receive is also checked against /openapi.json. */
async function call(method: string, template: string, path: string, body?: unknown) {
  const res = await app.req(method, path, body);
  if (res.status < 300 && res.body !== undefined) {
    const errors = oas.check(method, template, res.status, res.body);
    if (errors.length) throw new Error(`${method} ${path} → ${res.status} does not match its documented schema: ${errors.join('; ')}`);
  }
  return res;
}

async function newAgent(name = 'agent') {
  const r = await call('POST', '/v1/agent/agents', '/v1/agent/agents', { name });
  return r.body.agent_id as string;
}
const cfg = (id: string) => call('GET', '/v1/agent/agents/{agent_id}/config', `/v1/agent/agents/${id}/config`);
const patch = (id: string, body: unknown) => call('PATCH', '/v1/agent/agents/{agent_id}/config', `/v1/agent/agents/${id}/config`, body);
const publish = (id: string, body?: unknown) => call('POST', '/v1/agent/agents/{agent_id}/publish', `/v1/agent/agents/${id}/publish`, body);
const versions = (id: string, q = '') => call('GET', '/v1/agent/agents/{agent_id}/versions', `/v1/agent/agents/${id}/versions${q}`);
const version = (id: string, n: string | number) => call('GET', '/v1/agent/agents/{agent_id}/versions/{version_number}', `/v1/agent/agents/${id}/versions/${n}`);

t.test('a new agent has a draft with every top-level field and the defaults', async (t) => {
  const id = await newAgent();
  const r = await cfg(id);
  t.equal(r.status, 200);
  for (const k of ['agent_id', 'config_hash', 'prompt', 'voice', 'conversation', 'tools', 'webhooks', 'knowledge_base', 'analysis', 'guardrails', 'updated_at']) t.ok(k in r.body, k);
  t.equal(r.body.agent_id, id);
  t.equal(r.body.prompt.first_message_mode, 'prompt');
  t.equal(r.body.conversation.max_duration_seconds, 1800);
  t.match(r.body.config_hash, /^[0-9a-f]{64}$/);
});

t.test('agent creation applies a full config patch over the defaults; errors point into config', async (t) => {
  const r = await call('POST', '/v1/agent/agents', '/v1/agent/agents', { name: 'with config', config: { prompt: { system_prompt: 'You are terse.' }, voice: { speaking_language: 'fr' } } });
  t.equal(r.status, 201);
  const c = await cfg(r.body.agent_id);
  t.equal(c.body.prompt.system_prompt, 'You are terse.');
  t.equal(c.body.voice.speaking_language, 'fr');
  const bad = await app.req('POST', '/v1/agent/agents', { name: 'bad', config: { voice: { speaking_language: 'xx' } } });
  t.equal(bad.status, 422);
  t.same(bad.body[0].loc, ['body', 'config', 'voice', 'speaking_language']);
});

t.test('state table: draft equals latest version → PATCH changing content → unpublished changes, hash changes', async (t) => {
  const id = await newAgent();
  const v1 = await publish(id);
  t.equal(v1.status, 200);
  t.equal(v1.body.version_number, 1);
  const before = await cfg(id);
  t.equal(before.body.config_hash, v1.body.config_hash, 'draft equals the latest version');
  const after = await patch(id, { prompt: { system_prompt: 'New prompt' } });
  t.equal(after.status, 200);
  t.not(after.body.config_hash, v1.body.config_hash, 'config_hash changed');
  const live = await version(id, 1);
  t.equal(live.body.config.prompt.system_prompt, '', 'the live version is unaffected');
  t.equal(live.body.config_hash, v1.body.config_hash);
});

t.test('state table: unpublished changes → publish → a new immutable version, draft equals it', async (t) => {
  const id = await newAgent();
  await publish(id, { version_title: 'first' });
  await patch(id, { conversation: { max_duration_seconds: 600 } });
  const v2 = await publish(id, { version_title: 'shorter calls', version_description: 'ten minutes' });
  t.equal(v2.body.version_number, 2);
  t.equal(v2.body.version_title, 'shorter calls');
  t.equal(v2.body.version_description, 'ten minutes');
  t.equal((await cfg(id)).body.config_hash, v2.body.config_hash);
  await patch(id, { conversation: { max_duration_seconds: 900 } });
  const frozen = await version(id, 2);
  t.equal(frozen.body.config.conversation.max_duration_seconds, 600, 'version 2 stays as published');
  const list = await versions(id);
  t.same(list.body.versions.map((v: { version_number: number }) => v.version_number), [2, 1], 'highest first');
  t.equal(list.body.versions[1].version_title, 'first');
  t.equal(list.body.versions[1].version_description, null, 'unset description reads null');
});

t.test('publish with no unpublished changes returns the existing version unchanged', async (t) => {
  const id = await newAgent();
  const v1 = await publish(id, { version_title: 'one' });
  const again = await publish(id, { version_title: 'ignored' });
  t.same(again.body, v1.body);
  t.equal((await versions(id, '?include_total=true')).body.total, 1);
  const same = await patch(id, { prompt: { system_prompt: '' } });
  t.equal(same.body.config_hash, v1.body.config_hash, 'an edit that changes nothing keeps the hash');
  t.equal((await publish(id)).body.version_number, 1);
});

t.test('state table: any state, PATCH that fails validation → 422 and the draft unchanged', async (t) => {
  const id = await newAgent();
  await patch(id, { prompt: { system_prompt: 'keep' } });
  const good = await cfg(id);
  for (const body of [
    { prompt: { system_prompt: 'changed' }, voice: { speaking_language: 'xx' } },
    { prompt: { system_prompt: 'changed' }, conversation: { max_duration_seconds: 59 } },
    { prompt: { system_prompt: 'changed', surprise: 1 } },
    { prompt: { system_prompt: null } },
    { tools: { tool_ids: ['tool_000000000000000000000000'] }, prompt: { system_prompt: 'changed' } },
    { prompt: { system_prompt: 'word '.repeat(4100) } },
  ]) {
    const r = await app.req('PATCH', `/v1/agent/agents/${id}/config`, body);
    t.equal(r.status, 422, JSON.stringify(body).slice(0, 60));
    const now = await cfg(id);
    t.same(now.body, good.body, 'draft and hash unchanged');
  }
});

t.test('the token-count 422 names the count', async (t) => {
  const id = await newAgent();
  const r = await app.req('PATCH', `/v1/agent/agents/${id}/config`, { prompt: { system_prompt: 'word '.repeat(4100) } });
  t.equal(r.status, 422);
  t.same(r.body[0].loc, ['body', 'prompt', 'system_prompt']);
  t.match(r.body[0].msg, /4000 tokens \(got \d{4}\)/);
});

t.test('state table: agent never published → create session → 409, draft unchanged', async (t) => {
  const id = await newAgent('never published');
  const before = await cfg(id);
  const r = await app.req('POST', '/v1/agent/sessions', { agent_id: id });
  t.equal(r.status, 409);
  t.same(r.body, { status: 409, message: 'Agent has no published version' });
  t.same((await cfg(id)).body, before.body);
});

t.test('versions: a non-integer version number renders 404; a missing one 404 Version not found', async (t) => {
  const id = await newAgent();
  await publish(id);
  for (const n of ['abc', '1.5', '-1', '0', '01x', '99999999999']) {
    const r = await app.req('GET', `/v1/agent/agents/${id}/versions/${n}`);
    t.equal(r.status, 404, n);
  }
  const missing = await app.req('GET', `/v1/agent/agents/${id}/versions/7`);
  t.same(missing.body, { status: 404, message: 'Version not found' });
});

t.test("another team's agent: config, publish and versions give the same 404 as a missing agent", async (t) => {
  const other = await app.newTeam();
  const theirs = (await app.req('POST', '/v1/agent/agents', { name: 'theirs' }, other.auth)).body.agent_id;
  await app.req('POST', `/v1/agent/agents/${theirs}/publish`, undefined, other.auth);
  const missingId = 'agent_000000000000000000000000';
  for (const [m, suffix, body] of [['GET', '/config'], ['PATCH', '/config', { guardrails: { focus: true } }], ['POST', '/publish'], ['GET', '/versions'], ['GET', '/versions/1']] as const) {
    const a = await app.req(m, `/v1/agent/agents/${theirs}${suffix}`, body);
    const b = await app.req(m, `/v1/agent/agents/${missingId}${suffix}`, body);
    t.equal(a.status, 404, `${m} ${suffix}`);
    t.equal(a.text, b.text, `${m} ${suffix}: identical body`);
  }
  const still = await app.req('GET', `/v1/agent/agents/${theirs}/config`, undefined, other.auth);
  t.equal(still.body.guardrails.focus, false, 'their draft untouched');
});

t.test('versions pagination: cursor walk and page mode', async (t) => {
  const id = await newAgent();
  for (let i = 0; i < 5; i++) {
    await patch(id, { prompt: { system_prompt: `v${i}` } });
    await publish(id);
  }
  const p1 = await versions(id, '?page_size=2');
  t.same(p1.body.versions.map((v: { version_number: number }) => v.version_number), [5, 4]);
  const p2 = await versions(id, `?page_size=2&cursor=${p1.body.next_cursor}`);
  t.same(p2.body.versions.map((v: { version_number: number }) => v.version_number), [3, 2]);
  const p3 = await versions(id, '?page_size=2&page=3');
  t.same(p3.body.versions.map((v: { version_number: number }) => v.version_number), [1]);
  t.equal(p3.body.total, 5);
  t.equal((await app.req('GET', `/v1/agent/agents/${id}/versions?cursor=xyz!`)).status, 400);
});

t.test('concurrent PATCHes of different sections both land', async (t) => {
  const id = await newAgent();
  await Promise.all([patch(id, { guardrails: { focus: true } }), patch(id, { voice: { speaking_language: 'de' } }), patch(id, { prompt: { first_message_mode: 'fixed' } })]);
  const c = await cfg(id);
  t.equal(c.body.guardrails.focus, true);
  t.equal(c.body.voice.speaking_language, 'de');
  t.equal(c.body.prompt.first_message_mode, 'fixed');
});

t.test('every response above matched its documented schema', async (t) => {
  t.ok(oas.checked > 30, `${oas.checked} responses checked`);
});

t.test('publish pins the attached tools as they were and the knowledge revisions in use', async (t) => {
  const { getVersion } = await import('../../src/drafts/store.ts');
  const id = await newAgent('pinning');
  const tool = await app.req('POST', '/v1/agent/tools', { tool_type: 'webhook', name: 'Lookup', description: 'finds orders', arguments: [{ name: 'order', description: 'id' }], url: 'https://example.com/orders/{{order}}' });
  t.equal(tool.status, 201);
  const form = new FormData();
  form.set('source', new Blob(['Refunds take five days.'], { type: 'text/plain' }), 'faq.txt');
  const ks = await fetch(`${app.url}/v1/agent/knowledge-sources`, { method: 'POST', headers: app.auth, body: form }).then((r) => r.json());
  t.ok(ks.knowledge_source_id);
  t.equal((await patch(id, { tools: { tool_ids: [tool.body.tool_id] }, knowledge_base: { enabled: true, knowledge_source_ids: [ks.knowledge_source_id] } })).status, 200);
  const v = await publish(id);
  await app.req('PATCH', `/v1/agent/tools/${tool.body.tool_id}`, { description: 'changed later' });
  const row = await getVersion(app.db.sql, app.teamId, id, v.body.version_number);
  const pinned = row!.pinned as { tools: { id: string; description: string }[]; knowledge: { id: string; revision: number }[] };
  t.equal(pinned.tools.length, 1);
  t.equal(pinned.tools[0]!.description, 'finds orders', 'the frozen copy keeps the description as published');
  t.same(pinned.knowledge, [{ id: ks.knowledge_source_id, revision: 1 }]);
});
