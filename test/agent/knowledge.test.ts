import t from 'tap';
import { z } from 'zod';
import { KNOWLEDGE_MAX_BYTES, chunkText, knowledgeEntity, knowledgeSummary } from '../../src/knowledge/service.ts';
import { publishDraft, updateDraft } from '../../src/drafts/store.ts';
import { currentKnowledgeRevisions, knowledgeRevisionContent, knowledgeSourceIdsOf, searchKnowledge } from '../../src/knowledge/store.ts';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer();
t.teardown(() => app.close());

const entityRead = z.strictObject(knowledgeEntity.shape);
const summaryRead = z.strictObject(knowledgeSummary.shape);
const PATH = '/v1/agent/knowledge-sources';

type FormValue = string | { file: string | Uint8Array; name: string };
/** Sends multipart/form-data (fetch builds the boundary). */
async function form(method: 'POST' | 'PATCH', path: string, fields: Record<string, FormValue | FormValue[]>, auth: Record<string, string> = app.auth) {
  const fd = new FormData();
  for (const [k, v] of Object.entries(fields)) {
    for (const one of Array.isArray(v) ? v : [v]) {
      if (typeof one === 'string') fd.append(k, one);
      else fd.append(k, new Blob([one.file as BlobPart], { type: 'text/plain' }), one.name);
    }
  }
  const res = await fetch(app.url + path, { method, headers: auth, body: fd });
  const text = await res.text();
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, body, text };
}
const upload = (file: string | Uint8Array, name = 'faq.md', extra: Record<string, FormValue> = {}, auth?: Record<string, string>) =>
  form('POST', PATH, { source: { file, name }, ...extra }, auth);
const locs = (body: { loc: unknown[] }[]) => body.map((e) => e.loc);

async function attachKnowledge(teamId: string, agentId: string, ids: string[]) {
  await updateDraft(app.db.sql, teamId, agentId, async (cur) => {
    const config = structuredClone(cur.config) as Record<string, Record<string, unknown>>;
    config.knowledge_base = { ...config.knowledge_base, knowledge_source_ids: ids };
    return { config, hash: `test-${Math.random()}` };
  });
}
const publish = (teamId: string, agentId: string) => publishDraft(app.db.sql, teamId, agentId, { title: null, description: null }, async () => ({}));
const newAgent = async (name: string, auth?: Record<string, string>) => (await app.req('POST', '/v1/agent/agents', { name }, auth)).body.agent_id as string;

t.test('upload UTF-8 text: 201 with the entity; name defaults to the file name', async (t) => {
  const text = '# Préférences\n\nCafé crème, naïve façade — ünïcödé.\n\n日本語のテキストです。中文文本。한국어 텍스트.\n';
  const res = await upload(text, 'notes.md');
  t.equal(res.status, 201);
  entityRead.parse(res.body);
  t.match(res.body.knowledge_source_id, /^ks_[0-9a-f]{24}$/);
  t.match(res.body, { workspace_id: app.teamId, name: 'notes.md', description: '', file_name: 'notes.md', size_bytes: Buffer.byteLength(text), revision_number: 1, content: text });
  t.ok(res.body.chunk_count >= 1);
  const got = await app.req('GET', `${PATH}/${res.body.knowledge_source_id}`);
  t.same(got.body, res.body, 'accented and CJK text read back byte for byte');
  const named = await upload('plain text', 'a.txt', { name: 'Returns policy', description: 'What we refund' });
  t.match(named.body, { name: 'Returns policy', description: 'What we refund', file_name: 'a.txt' });
  const bom = await upload(new Uint8Array([0xef, 0xbb, 0xbf, ...Buffer.from('with BOM')]), 'bom.txt');
  t.equal(bom.status, 201);
  t.equal(bom.body.content, 'with BOM', 'a UTF-8 BOM is dropped');
});

t.test('upload rejections', async (t) => {
  const notText = { status: 400, message: 'Knowledge source must be UTF-8 plain text' };
  const latin1 = await upload(Buffer.from('Café crème', 'latin1'), 'latin1.txt');
  t.same([latin1.status, latin1.body], [400, notText], 'Latin-1 bytes');
  const binary = await upload(new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13]), 'image.md');
  t.same([binary.status, binary.body], [400, notText], 'binary (PNG header)');
  const nul = await upload('valid utf-8\u0000with a NUL', 'nul.txt');
  t.same([nul.status, nul.body], [400, notText], 'NUL byte');
  const pdf = await upload('looks like text', 'doc.pdf');
  t.same([pdf.status, pdf.body], [400, notText], 'not a .md or .txt file');
  const empty = await upload('', 'empty.md');
  t.same([empty.status, empty.body], [400, { status: 400, message: 'Knowledge source file is empty' }]);
  const atLimit = await upload('a'.repeat(KNOWLEDGE_MAX_BYTES), 'big.txt');
  t.equal(atLimit.status, 201, 'exactly 1 MB is accepted');
  t.equal(atLimit.body.size_bytes, KNOWLEDGE_MAX_BYTES);
  const over = await upload('a'.repeat(KNOWLEDGE_MAX_BYTES + 1), 'big.txt');
  t.same([over.status, over.body], [400, { status: 400, message: 'Knowledge source exceeds 1 MB (1048576 bytes)' }], 'one byte over → 400');
  const huge = await upload('a'.repeat(2 * KNOWLEDGE_MAX_BYTES), 'huge.txt');
  t.equal(huge.status, 413, 'a body past the route limit → 413 before it is read');
  const json = await app.req('POST', PATH, { name: 'x' });
  t.equal(json.status, 415);
  t.equal(json.text, '', 'bare 415');
  const noBody = await app.req('POST', PATH);
  t.equal(noBody.status, 415);
  const missing = await form('POST', PATH, { name: 'no file' });
  t.equal(missing.status, 422);
  t.same(missing.body, [{ type: 'missing', loc: ['body', 'source'], msg: 'Field required', ctx: {} }]);
  const asText = await form('POST', PATH, { source: 'just a field' });
  t.same(locs(asText.body), [['body', 'source']], 'source as a plain field is not a file');
  const extra = await upload('x', 'x.md', { colour: 'blue' });
  t.same(locs(extra.body), [['body', 'colour']], 'unknown form field');
  const longName = await upload('x', 'x.md', { name: 'n'.repeat(121) });
  t.same(locs(longName.body), [['body', 'name']]);
  t.equal((await upload('x', 'x.md', { name: 'n'.repeat(120), description: 'd'.repeat(2000) })).status, 201, 'name 120, description 2000');
  const longDesc = await upload('x', 'x.md', { description: 'd'.repeat(2001) });
  t.same(locs(longDesc.body), [['body', 'description']]);
  const emptyName = await upload('x', 'x.md', { name: '' });
  t.same(locs(emptyName.body), [['body', 'name']]);
  const two = await form('POST', PATH, { source: [{ file: 'a', name: 'a.md' }, { file: 'b', name: 'b.md' }] });
  t.same(locs(two.body), [['body', 'source']], 'two files');
  const nameAsFile = await form('POST', PATH, { source: { file: 'x', name: 'x.md' }, name: { file: 'n', name: 'n.txt' } });
  t.same(locs(nameAsFile.body), [['body', 'name']], 'name as a file');
  const garbled = await app.req('POST', PATH, 'not multipart at all', { 'Content-Type': 'multipart/form-data; boundary=xyz' });
  t.equal(garbled.status, 422, 'a body with no parts has no source');
  t.same(locs(garbled.body), [['body', 'source']]);
  const noBeta = await app.newTeam({ beta: false });
  const forbidden = await upload('x', 'x.md', {}, noBeta.auth);
  t.equal(forbidden.status, 403);
});

t.test('PATCH: a new file adds a revision under the same id; name and description alone do not', async (t) => {
  const created = (await upload('first version about shipping', 'v1.md')).body;
  const path = `${PATH}/${created.knowledge_source_id}`;
  const renamed = await form('PATCH', path, { name: 'Shipping', description: 'How we ship' });
  t.equal(renamed.status, 200);
  entityRead.parse(renamed.body);
  t.match(renamed.body, { name: 'Shipping', description: 'How we ship', revision_number: 1, file_name: 'v1.md', content: 'first version about shipping' });
  const replaced = await form('PATCH', path, { source: { file: 'second version about returns', name: 'v2.txt' } });
  t.equal(replaced.status, 200);
  t.match(replaced.body, { knowledge_source_id: created.knowledge_source_id, name: 'Shipping', revision_number: 2, file_name: 'v2.txt', content: 'second version about returns', size_bytes: 28 });
  t.equal((await app.req('GET', path)).body.revision_number, 2);
  const bad = await form('PATCH', path, { source: { file: Buffer.from('ÿþ', 'latin1'), name: 'v3.txt' }, name: 'not applied' });
  t.equal(bad.status, 400);
  t.match((await app.req('GET', path)).body, { name: 'Shipping', revision_number: 2 }, 'a rejected PATCH changes nothing');
  t.same(locs((await form('PATCH', path, { name: '' })).body), [['body', 'name']]);
  t.equal((await app.req('PATCH', path, { name: 'json' })).status, 415, 'PATCH is multipart too');

  t.same(await knowledgeRevisionContent(app.db.sql, { id: created.knowledge_source_id, revision: 1 }), { file_name: 'v1.md', size_bytes: 28, content: 'first version about shipping' }, 'revision 1 stays readable for pins');
  t.same(await currentKnowledgeRevisions(app.db.sql, app.teamId, [created.knowledge_source_id, 'ks_missing']), [{ id: created.knowledge_source_id, revision: 2 }]);
  const v1 = await searchKnowledge(app.db.sql, [{ id: created.knowledge_source_id, revision: 1 }], 'shipping', 5);
  t.same(v1.map((h) => h.text), ['first version about shipping'], 'a pinned revision searches its own passages');
  t.same(await searchKnowledge(app.db.sql, [{ id: created.knowledge_source_id, revision: 2 }], 'shipping', 5), []);
});

t.test('chunking and full-text search rank the right passage first', async (t) => {
  const para = (topic: string, n: number) => Array.from({ length: n }, (_, i) => `Sentence ${i} is about ${topic} and nothing else.`).join(' ');
  const doc = [
    '# Help centre',
    para('opening hours of the shop on weekdays', 8),
    para('refund policy: refunds are paid within fourteen days to the original card', 8),
    para('delivery times for international parcels', 8),
    para('warranty claims for broken headphones', 30), // longer than one passage: cut at sentences
  ].join('\n\n');
  const res = await upload(doc, 'help.md');
  t.equal(res.status, 201);
  const chunks = chunkText(doc);
  t.equal(res.body.chunk_count, chunks.length);
  t.ok(chunks.length >= 4, `${chunks.length} passages`);
  for (const c of chunks) t.ok(c.length <= 800, `passage of ${c.length} ≤ 800`);
  t.ok(chunks.slice(0, -1).every((c) => c.length >= 400), 'passages are not tiny');
  t.same(chunks.join(' ').split(/\s+/), doc.split(/\s+/), 'no word lost or added');
  t.same(chunkText('x'.repeat(2000)).map((c) => c.length), [800, 800, 400], 'a run without spaces is cut hard');
  t.same(chunkText('\n\n  \n'), [], 'blank text has no passages');
  t.ok(chunkText('日本語。'.repeat(400)).every((c) => c.length <= 800), 'CJK sentences without spaces');

  const refs = await currentKnowledgeRevisions(app.db.sql, app.teamId, [res.body.knowledge_source_id]);
  const hits = await searchKnowledge(app.db.sql, refs, 'how long do refunds take', 3);
  t.ok(hits.length >= 1);
  t.match(hits[0]!.text, /refund policy/, 'the refund passage ranks first');
  t.ok(hits.every((h, i) => i === 0 || h.rank <= hits[i - 1]!.rank), 'best first');
  const warranty = await searchKnowledge(app.db.sql, refs, 'broken headphones warranty', 10);
  t.match(warranty[0]!.text, /warranty claims/);
  t.same(await searchKnowledge(app.db.sql, refs, 'zebra', 3), [], 'no match, no hits');
  t.same(await searchKnowledge(app.db.sql, [], 'refund', 3), []);
  t.same(await searchKnowledge(app.db.sql, refs, '"unbalanced quote OR -', 3).then(() => 'ok'), 'ok', 'any user text is a valid query');
});

t.test('delete: 409 while a draft or the latest published version references it; deleted → 404 everywhere', async (t) => {
  const team = await app.newTeam();
  const ks = (await upload('content', 'kb.md', {}, team.auth)).body.knowledge_source_id as string;
  const path = `${PATH}/${ks}`;
  const a1 = await newAgent('first', team.auth);
  const a2 = await newAgent('second', team.auth);
  await attachKnowledge(team.teamId, a1, [ks]);
  await attachKnowledge(team.teamId, a2, [ks]);
  t.same((await app.req('GET', `${path}/agents`, undefined, team.auth)).body, { agents: [{ agent_id: a2, name: 'second' }, { agent_id: a1, name: 'first' }], total: 2 });
  t.same((await app.req('DELETE', path, undefined, team.auth)).body, { status: 409, message: 'Knowledge source is attached to 2 agent(s). Detach it first.' });

  // a1: publish with it, then detach from the draft → the published version still blocks.
  t.ok(await publish(team.teamId, a1));
  await attachKnowledge(team.teamId, a1, []);
  await attachKnowledge(team.teamId, a2, []);
  t.same((await app.req('GET', `${path}/agents`, undefined, team.auth)).body, { agents: [{ agent_id: a1, name: 'first' }], total: 1 }, 'published reference listed');
  const blocked = await app.req('DELETE', path, undefined, team.auth);
  t.equal(blocked.status, 409);
  t.same(blocked.body, { status: 409, message: 'Knowledge source is attached to 1 agent(s). Detach it first.' });

  // Publishing the detached draft makes a later version the live one: no longer blocks.
  t.ok(await publish(team.teamId, a1));
  t.same((await app.req('GET', `${path}/agents`, undefined, team.auth)).body, { agents: [], total: 0 });
  t.equal((await app.req('DELETE', path, undefined, team.auth)).status, 204);

  const missing = { status: 404, message: 'Knowledge source not found' };
  for (const [label, res] of [
    ['GET', await app.req('GET', path, undefined, team.auth)],
    ['GET agents', await app.req('GET', `${path}/agents`, undefined, team.auth)],
    ['DELETE', await app.req('DELETE', path, undefined, team.auth)],
    ['PATCH', await form('PATCH', path, { name: 'back' }, team.auth)],
  ] as const) t.same([res.status, res.body], [404, missing], `deleted: ${label}`);
  const list = await app.req('GET', `${PATH}?include_total=true`, undefined, team.auth);
  t.equal(list.body.total, 0, 'not listed');
  t.same(await knowledgeSourceIdsOf(app.db.sql, team.teamId, [ks]), new Set(), 'no longer resolves for drafts');
  t.ok(await knowledgeRevisionContent(app.db.sql, { id: ks, revision: 1 }), 'the old version\'s pinned content survives');
});

t.test("another team's source gives exactly the same 404 as a missing one on every route", async (t) => {
  const other = await app.newTeam();
  const theirs = (await upload('theirs', 'theirs.md', {}, other.auth)).body.knowledge_source_id;
  const missing = await app.req('GET', `${PATH}/ks_000000000000000000000000`);
  t.same(missing.body, { status: 404, message: 'Knowledge source not found' });
  for (const [label, res] of [
    ['GET', await app.req('GET', `${PATH}/${theirs}`)],
    ['GET agents', await app.req('GET', `${PATH}/${theirs}/agents`)],
    ['DELETE', await app.req('DELETE', `${PATH}/${theirs}`)],
    ['PATCH', await form('PATCH', `${PATH}/${theirs}`, { name: 'mine' })],
    ['PATCH with a bad file', await form('PATCH', `${PATH}/${theirs}`, { source: { file: '', name: 'x.md' } })],
  ] as const) {
    t.equal(res.status, 404, label);
    t.equal(res.text, missing.text, `${label}: same body`);
  }
  t.same(await knowledgeSourceIdsOf(app.db.sql, app.teamId, [theirs]), new Set(), 'does not resolve for another team');
  t.same(await knowledgeSourceIdsOf(app.db.sql, other.teamId, [theirs, 'ks_nope']), new Set([theirs]));
  t.equal((await app.req('GET', `${PATH}/${theirs}`, undefined, other.auth)).body.name, 'theirs.md', 'untouched');
});

t.test('list: pagination rules, search on name and file name, no content in rows', async (t) => {
  const team = await app.newTeam();
  const ids: string[] = [];
  for (let i = 0; i < 35; i++) ids.push((await upload(`doc ${i}`, `file-${i}.txt`, i === 7 ? { name: 'Pricing sheet' } : {}, team.auth)).body.knowledge_source_id);
  const newestFirst = ids.slice().reverse();
  const get = (q: string) => app.req('GET', `${PATH}${q}`, undefined, team.auth);
  const seen: string[] = [];
  const sizes: number[] = [];
  let q = '?page_size=15';
  for (;;) {
    const r = await get(q);
    t.equal(r.status, 200);
    summaryRead.array().parse(r.body.knowledge_sources);
    t.equal(r.body.total, null);
    sizes.push(r.body.knowledge_sources.length);
    seen.push(...r.body.knowledge_sources.map((x: { knowledge_source_id: string }) => x.knowledge_source_id));
    if (!r.body.has_more) break;
    q = `?page_size=15&cursor=${r.body.next_cursor}`;
  }
  t.same(sizes, [15, 15, 5]);
  t.same(seen, newestFirst);
  const p3 = await get('?page=3&page_size=15');
  t.equal(p3.body.total, 35);
  t.equal(p3.body.has_more, false);
  t.same(p3.body.knowledge_sources.map((x: { knowledge_source_id: string }) => x.knowledge_source_id), newestFirst.slice(30));
  t.equal((await get('')).body.knowledge_sources.length, 30, 'default page size 30');
  t.same((await get(`?page=1&cursor=${(await get('?page_size=1')).body.next_cursor}`)).body, { status: 400, message: 'page and cursor are mutually exclusive' });
  t.same((await get('?cursor=%%%')).body, { status: 400, message: 'Invalid cursor' });
  t.same((await get('?page=1001&page_size=100')).body, { status: 400, message: 'Page offset exceeds 100000 rows' });
  for (const bad of ['?page_size=0', '?page_size=101', '?page=0']) t.equal((await get(bad)).status, 422, bad);
  t.equal((await get('?search=pricing&include_total=true')).body.total, 1, 'by name');
  t.equal((await get('?search=FILE-3&include_total=true')).body.total, 6, 'by file name: file-3, file-30…34 (file-7 renamed still matches its file name)');
  t.equal((await get('?search=file-7&include_total=true')).body.total, 1);
});

t.test('/openapi.json describes every tool and knowledge-source endpoint from the validating schemas', async (t) => {
  const doc = (await app.req('GET', '/openapi.json')).body;
  const ops: [string, string, string][] = [
    ['/v1/agent/tools', 'post', '201'], ['/v1/agent/tools', 'get', '200'], ['/v1/agent/tools/{tool_id}', 'get', '200'],
    ['/v1/agent/tools/{tool_id}', 'patch', '200'], ['/v1/agent/tools/{tool_id}', 'delete', '204'], ['/v1/agent/tools/{tool_id}/agents', 'get', '200'],
    [PATH, 'post', '201'], [PATH, 'get', '200'], [`${PATH}/{knowledge_source_id}`, 'get', '200'], [`${PATH}/{knowledge_source_id}`, 'patch', '200'],
    [`${PATH}/{knowledge_source_id}`, 'delete', '204'], [`${PATH}/{knowledge_source_id}/agents`, 'get', '200'],
  ];
  for (const [path, method, ok] of ops) {
    const op = doc.paths[path]?.[method];
    t.ok(op, `${method.toUpperCase()} ${path} documented`);
    t.ok(op?.responses?.[ok], `${method.toUpperCase()} ${path}: ${ok}`);
  }
  t.ok(doc.paths[PATH].post.requestBody.content['multipart/form-data'], 'upload is multipart');
  t.same(doc.paths[PATH].post.requestBody.content['multipart/form-data'].schema.required, ['source']);
  t.same(doc.paths['/v1/agent/tools'].post.requestBody.content['application/json'].schema.required, ['name']);
  t.equal(doc.paths['/v1/agent/tools'].post.requestBody.content['application/json'].schema.additionalProperties, false, 'strict');
  const full = doc.paths['/v1/agent/tools/{tool_id}'].get.responses['200'].content['application/json'].schema;
  t.ok(full.properties.headers && full.properties.mock_responses && full.properties.used_by, 'full read shape');
  t.notOk(doc.paths[PATH].get.responses['200'].content['application/json'].schema.properties.knowledge_sources.items.properties.content, 'list rows have no content');
});
