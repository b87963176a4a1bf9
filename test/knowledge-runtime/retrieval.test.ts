// Knowledge in conversations (docs/api/knowledge.md): each turn searches the version's pinned passages with
// the caller's latest text and gives the best ones to the model within a token budget.
import t from 'tap';
import { fitBudget, knowledgeRetriever, KNOWLEDGE_SEARCH_TIMEOUT_MS, KNOWLEDGE_TOKEN_BUDGET } from '../../src/knowledge/retrieval.ts';
import type { StoredDraft } from '../../src/agent-config/index.ts';
import { countPromptTokens } from '../../src/agent-config/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { agentWith, connect, createSession } from '../e2e/session-helpers.ts';

const app = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());

/** Filler that shares no word with the questions below, so only the facts can match. */
const filler = (n: number, seed: string) =>
  Array.from({ length: n }, (_, i) => `Paragraph ${seed}${i}: lorem ipsum dolor sit amet consectetur adipiscing elit sed eiusmod tempor incididunt labore dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco laboris nisi aliquip commodo consequat.`).join('\n\n');

async function upload(app: TestServer, name: string, text: string, id?: string): Promise<string> {
  const form = new FormData();
  form.append('source', new Blob([text], { type: 'text/markdown' }), name);
  const res = await fetch(`${app.url}/v1/agent/knowledge-sources${id ? `/${id}` : ''}`, { method: id ? 'PATCH' : 'POST', headers: app.auth, body: form });
  const body = await res.json();
  if (res.status >= 300) throw new Error(`upload: ${res.status} ${JSON.stringify(body)}`);
  return body.knowledge_source_id;
}

async function ask(agentId: string, questions: string[]): Promise<string[]> {
  const caller = await connect(await createSession(app, agentId));
  try {
    for (const [i, q] of questions.entries()) {
      caller.convo.sendUserMessage(q, { audio: false });
      await caller.waitFor(() => caller.finals('agent').length === i + 1, 15_000, 'the reply');
    }
    return caller.finals('agent');
  } finally {
    await caller.convo.hangup();
  }
}

const SHIPPING = (days: string) => `# Shipping\n\n${filler(30, 's')}\n\nStandard shipping takes ${days} business days.\n\n${filler(10, 't')}`;
const RETURNS = `# Returns\n\n${filler(30, 'r')}\n\nReturns are accepted within thirty days of delivery.\n\n${filler(10, 'q')}`;

t.test('an agent with two knowledge sources answers each question from the right passage', async (t) => {
  t.ok(Buffer.byteLength(SHIPPING('five') + RETURNS) > 8 * 1024, 'over 8 KB attached: searched per turn, not inlined');
  const shipping = await upload(app, 'shipping.md', SHIPPING('five'));
  const returns = await upload(app, 'returns.md', RETURNS);
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' }, knowledge_base: { enabled: true, knowledge_source_ids: [shipping, returns] } });
  t.same(await ask(agent, ['How many days does shipping take?', 'When are returns accepted?', 'Hello there']), [
    'Standard shipping takes five business days.',
    'Returns are accepted within thirty days of delivery.',
    'You said: Hello there',
  ]);

  // Knowledge off: the same question gets no passage.
  const off = await agentWith(app, { prompt: { first_message_mode: 'off' }, knowledge_base: { enabled: false, knowledge_source_ids: [shipping, returns] } });
  t.same(await ask(off, ['How many days does shipping take?']), ['You said: How many days does shipping take?'], 'knowledge_base.enabled false: no retrieval');
});

t.test('a published version keeps the revisions it pinned; the next publish picks up the new text', async (t) => {
  const shipping = await upload(app, 'shipping.md', SHIPPING('five'));
  const returns = await upload(app, 'returns.md', RETURNS);
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' }, knowledge_base: { enabled: true, knowledge_source_ids: [shipping, returns] } });
  await upload(app, 'shipping.md', SHIPPING('two'), shipping); // revision 2, after the publish
  t.same(await ask(agent, ['How many days does shipping take?']), ['Standard shipping takes five business days.'], 'version 1 reads revision 1');
  const edit = await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { prompt: { system_prompt: 'Answer from the knowledge base.' } });
  t.equal(edit.status, 200);
  const pub = await app.req('POST', `/v1/agent/agents/${agent}/publish`);
  t.equal(pub.status, 200);
  t.same(await ask(agent, ['How many days does shipping take?']), ['Standard shipping takes two business days.'], 'version 2 reads revision 2');
});

t.test('up to 8 KB attached is inlined whole every turn', async (t) => {
  const small = await upload(app, 'hours.txt', 'Opening hours.\n\nThe office opens at nine in the morning.');
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' }, knowledge_base: { enabled: true, knowledge_source_ids: [small] } });
  t.same(await ask(agent, ['When does the office open?']), ['The office opens at nine in the morning.']);
});

t.test('passages beyond the token budget are left out, best first', async (t) => {
  const p = 'word '.repeat(600).trim();
  const n = countPromptTokens(p);
  const kept = fitBudget([p, p, p, 'short one'], n * 2 + countPromptTokens('short one'));
  t.same(kept, [p, p, 'short one'], 'the third long passage does not fit; a later short one does');
  t.ok(KNOWLEDGE_TOKEN_BUDGET > 0);
});

t.test('the search has a fixed time budget; past it the turn goes on without knowledge', async (t) => {
  t.equal(KNOWLEDGE_SEARCH_TIMEOUT_MS, 1000);
  const shipping = await upload(app, 'shipping.md', SHIPPING('five'));
  const config = { knowledge_base: { enabled: true, knowledge_source_ids: [shipping] } } as StoredDraft;
  const pinned = { knowledge: [{ id: shipping, revision: 1 }] };
  const signal = new AbortController().signal;
  // The same database answering 50 ms late, against a 10 ms budget (a 0 ms budget raced a fast
  // local query: the query could win).
  const slowSql = ((strings: TemplateStringsArray, ...values: unknown[]) =>
    new Promise((r) => setTimeout(r, 50)).then(() => (app.db.sql as unknown as (s: TemplateStringsArray, ...v: unknown[]) => Promise<unknown>)(strings, ...values))) as unknown as typeof app.db.sql;
  const late = knowledgeRetriever(slowSql, { config, pinned, timeoutMs: 10 })!;
  await t.rejects(late('How long does shipping take?', signal), { message: 'knowledge search timed out' }, 'no answer within the budget: rejected (the actor then goes on without it)');
  const inTime = knowledgeRetriever(app.db.sql, { config, pinned })!;
  const passages = await inTime('How long does shipping take?', signal);
  t.ok(passages.some((p) => p.includes('Standard shipping takes five business days.')), 'within the budget: the passage');
  t.equal(knowledgeRetriever(app.db.sql, { config: { knowledge_base: { enabled: false, knowledge_source_ids: [shipping] } } as StoredDraft, pinned }), undefined, 'knowledge off: no hook');
});
