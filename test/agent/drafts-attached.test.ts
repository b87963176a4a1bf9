// The draft's reported state follows its attached tools and knowledge sources (docs/api/drafts-versions.md:
// the draft's `config_hash` is the version's while nothing is unpublished, and a tool edit
// reaches every agent using it; docs/api/knowledge.md: a draft uses a source's newest
// revision, publish pins it; D-DRAFT-2). The draft holds only their ids, so the hash clients see folds in what publish
// would pin: an edit to an attached tool or a new revision of an attached source shows as
// unpublished changes until the next publish, and bookkeeping (an empty tool PATCH bumping
// `updated_at`, the tool being attached elsewhere) does not.
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer();
t.teardown(() => app.close());

const newAgent = async (name: string) => (await app.req('POST', '/v1/agent/agents', { name })).body.agent_id as string;
const hashOf = async (id: string) => {
  const r = await app.req('GET', `/v1/agent/agents/${id}/config`);
  if (r.status !== 200) throw new Error(`GET config ${r.status}`);
  return r.body.config_hash as string;
};
const publish = async (id: string) => {
  const r = await app.req('POST', `/v1/agent/agents/${id}/publish`, {});
  if (r.status !== 200) throw new Error(`publish ${r.status}`);
  return r.body as { version_number: number; config_hash: string };
};
const newTool = async (name: string) => {
  const r = await app.req('POST', '/v1/agent/tools', { tool_type: 'webhook', name, description: 'finds orders', arguments: [{ name: 'order', description: 'id' }], url: 'https://example.com/orders/{{order}}' });
  if (r.status !== 201) throw new Error(`create tool ${r.status}`);
  return r.body.tool_id as string;
};
const upload = async (method: 'POST' | 'PATCH', text: string, id?: string) => {
  const form = new FormData();
  form.set('source', new Blob([text], { type: 'text/plain' }), 'faq.txt');
  const r = await fetch(`${app.url}/v1/agent/knowledge-sources${id ? `/${id}` : ''}`, { method, headers: app.auth, body: form });
  const body = (await r.json()) as { knowledge_source_id: string; revision_number: number };
  if (r.status >= 300) throw new Error(`${method} knowledge source ${r.status}`);
  return body;
};
const attach = (id: string, body: unknown) => app.req('PATCH', `/v1/agent/agents/${id}/config`, body);

t.test('editing an attached tool shows as unpublished changes; publish makes N+1 and the hashes match again', async (t) => {
  const agent = await newAgent('tool edit');
  const tool = await newTool('Lookup');
  t.equal((await attach(agent, { tools: { tool_ids: [tool] } })).status, 200);
  const v1 = await publish(agent);
  t.equal(await hashOf(agent), v1.config_hash, 'published: the draft equals the latest version');

  t.equal((await app.req('PATCH', `/v1/agent/tools/${tool}`, { description: 'finds orders and refunds' })).status, 200);
  const edited = await hashOf(agent);
  t.not(edited, v1.config_hash, 'the tool edit is an unpublished change of the draft');

  const v2 = await publish(agent);
  t.equal(v2.version_number, v1.version_number + 1, 'publish creates a new version');
  t.equal(v2.config_hash, edited, "the version's hash is the hash the draft showed");
  t.equal(await hashOf(agent), v2.config_hash, 'nothing unpublished after publishing');
  t.equal((await publish(agent)).version_number, v2.version_number, 'publishing again returns the existing version');

  t.equal((await app.req('PATCH', `/v1/agent/tools/${tool}`, { description: 'finds orders' })).status, 200);
  t.not(await hashOf(agent), v2.config_hash, 'changing it back is a change against v2');
  t.equal(await hashOf(agent), v1.config_hash, '…and the draft is exactly what v1 was');
});

t.test('editing a tool shows unpublished changes on every agent that uses it', async (t) => {
  const tool = await newTool('Shared');
  const [a, b] = [await newAgent('a'), await newAgent('b')];
  for (const id of [a, b]) await attach(id, { tools: { tool_ids: [tool] } });
  const [va, vb] = [await publish(a), await publish(b)];
  await app.req('PATCH', `/v1/agent/tools/${tool}`, { url: 'https://example.com/v2/orders/{{order}}' });
  t.not(await hashOf(a), va.config_hash);
  t.not(await hashOf(b), vb.config_hash);
});

t.test('bookkeeping is not a change: an empty tool PATCH, or the tool attached to another agent', async (t) => {
  const agent = await newAgent('bookkeeping');
  const tool = await newTool('Quiet');
  await attach(agent, { tools: { tool_ids: [tool] } });
  const v = await publish(agent);

  const empty = await app.req('PATCH', `/v1/agent/tools/${tool}`, {});
  t.equal(empty.status, 200, 'an empty PATCH is accepted (it bumps updated_at)');
  t.equal(await hashOf(agent), v.config_hash, 'after an empty tool PATCH the draft still equals the version');
  t.equal((await publish(agent)).version_number, v.version_number, 'and publish creates no new version');

  await app.req('PATCH', `/v1/agent/tools/${tool}`, { description: 'finds orders' });
  t.equal(await hashOf(agent), v.config_hash, 'a PATCH that sets the same values is not a change either');

  const other = await newAgent('other');
  await attach(other, { tools: { tool_ids: [tool] } });
  t.equal(await hashOf(agent), v.config_hash, "the tool's used_by count changed, its content did not");
  t.equal((await publish(agent)).version_number, v.version_number);
});

t.test('a new revision of an attached knowledge source shows as unpublished changes until publish pins it', async (t) => {
  const agent = await newAgent('knowledge');
  const ks = await upload('POST', 'Refunds take five days.');
  await attach(agent, { knowledge_base: { enabled: true, knowledge_source_ids: [ks.knowledge_source_id] } });
  const v1 = await publish(agent);
  t.equal(await hashOf(agent), v1.config_hash);

  const renamed = await fetch(`${app.url}/v1/agent/knowledge-sources/${ks.knowledge_source_id}`, { method: 'PATCH', headers: app.auth, body: (() => { const f = new FormData(); f.set('name', 'FAQ'); return f; })() });
  t.equal(renamed.status, 200);
  t.equal(await hashOf(agent), v1.config_hash, 'renaming a source is no new revision: nothing to publish');

  const r2 = await upload('PATCH', 'Refunds take three days.', ks.knowledge_source_id);
  t.equal(r2.revision_number, 2);
  const pending = await hashOf(agent);
  t.not(pending, v1.config_hash, 'the new revision is an unpublished change');
  const v2 = await publish(agent);
  t.equal(v2.version_number, v1.version_number + 1);
  t.equal(v2.config_hash, pending);
  t.equal(await hashOf(agent), v2.config_hash);
});

t.test('the PATCH config response carries the same hash as GET', async (t) => {
  const agent = await newAgent('patch response');
  const tool = await newTool('Echo');
  const r = await attach(agent, { tools: { tool_ids: [tool] } });
  t.equal(r.body.config_hash, await hashOf(agent));
  const v = await publish(agent);
  t.equal(v.config_hash, r.body.config_hash);
});

t.test('a draft without attachments keeps the plain config hash', async (t) => {
  const agent = await newAgent('plain');
  const tool = await newTool('Temporary');
  const before = await hashOf(agent);
  await attach(agent, { tools: { tool_ids: [tool] } });
  t.not(await hashOf(agent), before);
  await attach(agent, { tools: { tool_ids: [] } });
  t.equal(await hashOf(agent), before, 'detaching gives back the same hash as before');
});
