// Agent tests (docs/api/agent-tests.md, API in D-TEST-1): text-only runs of an agent against a
// scripted user, webhook tools really executed and always blocking, judged by criteria.
import t from 'tap';
import { openApiValidator } from '../helpers/openapi.ts';
import { startTestServer } from '../helpers/server.ts';
import { allowWrites, startReceiver } from '../webhooks/helpers.ts';

const orders = await startReceiver((r, res) => {
  res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ order: 'A-17', status: 'shipped' }));
  return true;
});
allowWrites(t, `127.0.0.1:${orders.port}`);
const app = await startTestServer({ backend: 'synthetic', config: { outboundAllow: [`127.0.0.1:${orders.port}`] } });
t.teardown(async () => {
  await app.close();
  await orders.close();
});

async function agent(config: Record<string, unknown>, publish = false): Promise<string> {
  const r = await app.req('POST', '/v1/agent/agents', { name: 'Tested agent', config });
  if (r.status !== 201) throw new Error(`agent: ${r.status} ${r.text}`);
  if (publish) await app.req('POST', `/v1/agent/agents/${r.body.agent_id}/publish`);
  return r.body.agent_id;
}

const tool = await app.req('POST', '/v1/agent/tools', {
  tool_type: 'webhook', name: 'order lookup', description: 'Looks up an order', url: `${orders.url}/orders/{{order_id}}`, method: 'GET',
  arguments: [{ name: 'order_id', description: 'The order id' }], execution_mode: 'background',
});
const CONFIG = {
  prompt: { first_message_mode: 'fixed', first_message: 'Hi, this is Acme.' },
  tools: { tool_ids: [tool.body.tool_id] },
  analysis: { criteria: [{ name: 'order_found', description: 'The agent found the order' }] },
};

t.test('a run plays the conversation as text, executes webhook tools as blocking, and judges it', async (t) => {
  const agentId = await agent(CONFIG);
  const created = await app.req('POST', '/v1/agent/tests', { agent_id: agentId, name: 'Finds an order', user_turns: ['Please use order lookup, order id is A-17', 'Great, order found: success. Bye.'] });
  t.equal(created.status, 201);
  t.match(created.body, { test_id: /^test_[0-9a-f]{24}$/, agent_id: agentId, name: 'Finds an order', criteria: null, last_run: null, workspace_id: app.teamId });
  const failing = await app.req('POST', '/v1/agent/tests', { agent_id: agentId, name: 'Small talk', user_turns: ['Hello'] });

  const before = orders.requests.length;
  const run = await app.req('POST', `/v1/agent/agents/${agentId}/tests/run`);
  t.equal(run.status, 200);
  const [pass, fail] = run.body.runs;
  t.match(pass, { test_id: created.body.test_id, agent_id: agentId, version_number: null, verdict: 'pass', error: null, latency_ms: Number, config_hash: String });
  t.same(pass.criteria_results.map((c: any) => [c.name, c.result]), [['order_found', 'success']]);
  const messages = pass.items.filter((i: any) => i.type === 'message').map((i: any) => [i.role, i.content]);
  t.same(messages.slice(0, 2), [['assistant', 'Hi, this is Acme.'], ['user', 'Please use order lookup, order id is A-17']], 'the opener, then the scripted user');
  t.match(messages[2], ['assistant', /^order_lookup returned: .*shipped/], 'the model answered with the tool result: the background tool ran as blocking');
  t.same(messages[3], ['user', 'Great, order found: success. Bye.']);
  t.match(pass.items.find((i: any) => i.type === 'tool_call'), { tool_name: 'order_lookup', tool_source: 'webhook', input: '{"order_id":"A-17"}' });
  t.match(pass.items.find((i: any) => i.type === 'tool_result'), { tool_name: 'order_lookup', status: 'completed' });
  t.equal(orders.requests.length - before, 1, 'the webhook tool really executed');
  t.equal(orders.requests.at(-1)!.url, '/orders/A-17');

  t.equal(fail.verdict, 'fail', 'a criterion without evidence is unknown: the test fails');
  t.same(fail.criteria_results.map((c: any) => c.result), ['unknown']);

  const got = await app.req('GET', `/v1/agent/tests/${created.body.test_id}`);
  t.same(got.body.last_run, pass, 'the test keeps its last result');
  const runs = await app.req('GET', `/v1/agent/tests/${failing.body.test_id}/runs`);
  t.same(runs.body.runs.map((r: any) => r.run_id), [fail.run_id]);
  t.equal(runs.body.has_more, false);

  const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);
  const list = await app.req('GET', `/v1/agent/tests?agent_id=${agentId}`);
  t.same(oas.check('POST', '/v1/agent/tests', 201, created.body), [], 'create matches the OpenAPI document');
  t.same(oas.check('POST', '/v1/agent/agents/{agent_id}/tests/run', 200, run.body), [], 'run matches');
  t.same(oas.check('GET', '/v1/agent/tests/{test_id}', 200, got.body), [], 'read matches');
  t.same(oas.check('GET', '/v1/agent/tests', 200, list.body), [], 'list matches');
  t.same(oas.check('GET', '/v1/agent/tests/{test_id}/runs', 200, runs.body), [], 'runs match');
});

t.test('tests are listed, updated and deleted; test criteria replace the agent\'s', async (t) => {
  const agentId = await agent(CONFIG, true);
  const other = await agent(CONFIG);
  const a = await app.req('POST', '/v1/agent/tests', { agent_id: agentId, name: 'one', user_turns: ['hi'], criteria: [{ name: 'greeted', description: 'The agent greeted' }] });
  await app.req('POST', '/v1/agent/tests', { agent_id: other, name: 'two', user_turns: ['hi'] });
  const list = await app.req('GET', `/v1/agent/tests?agent_id=${agentId}`);
  t.same(list.body.tests.map((x: any) => x.name), ['one'], 'filtered by agent');

  const patched = await app.req('PATCH', `/v1/agent/tests/${a.body.test_id}`, { user_turns: ['greeted: success'], name: 'renamed' });
  t.match(patched.body, { name: 'renamed', user_turns: ['greeted: success'], criteria: [{ name: 'greeted', description: 'The agent greeted' }] });
  const run = await app.req('POST', `/v1/agent/agents/${agentId}/tests/run`, { test_ids: [a.body.test_id], version_number: 1 });
  t.equal(run.status, 200);
  t.match(run.body.runs[0], { version_number: 1, verdict: 'pass', criteria_results: [{ name: 'greeted', result: 'success' }] }, 'a published version, judged by the test\'s criteria');

  const cleared = await app.req('PATCH', `/v1/agent/tests/${a.body.test_id}`, { criteria: null });
  t.equal(cleared.body.criteria, null, 'null: back to the agent\'s criteria');

  t.equal((await app.req('DELETE', `/v1/agent/tests/${a.body.test_id}`)).status, 204);
  t.equal((await app.req('GET', `/v1/agent/tests/${a.body.test_id}`)).status, 404);
  t.same((await app.req('DELETE', `/v1/agent/tests/${a.body.test_id}`)).body, { status: 404, message: 'Agent test not found' });
});

t.test('validation and refusals: limits, unknown ids, another team, custom LLM, no criteria', async (t) => {
  const agentId = await agent(CONFIG);
  const bad = async (body: Record<string, unknown>) => (await app.req('POST', '/v1/agent/tests', { agent_id: agentId, name: 'x', user_turns: ['hi'], ...body })).body;
  t.same((await bad({ name: 'n'.repeat(201) })).map((e: any) => e.loc), [['body', 'name']], 'name: at most 200 characters');
  t.same((await bad({ user_turns: [] })).map((e: any) => e.loc), [['body', 'user_turns']], 'at least one user turn');
  t.same((await bad({ user_turns: ['m'.repeat(2001)] })).map((e: any) => e.loc), [['body', 'user_turns', 0]], 'each turn: at most 2,000 characters');
  t.same((await bad({ agent_id: 'agent_nope' })).map((e: any) => e.loc), [['body', 'agent_id']], 'an unknown agent is a 422');
  t.same((await bad({ extra: 1 })).map((e: any) => e.loc), [['body', 'extra']], 'unknown fields');
  t.same((await bad({ user_turns: Array(21).fill('hi') })).map((e: any) => e.loc), [['body', 'user_turns']], 'at most 20 user turns');
  t.same((await bad({ criteria: Array.from({ length: 11 }, (_, i) => ({ name: `c${i}` })) })).map((e: any) => e.loc), [['body', 'criteria']], 'at most 10 criteria');
  t.same((await bad({ criteria: [{ name: 'same' }, { name: 'same' }] })).map((e: any) => e.loc), [['body', 'criteria', 1, 'name']], 'criterion names are unique');
  t.same((await bad({ criteria: [{ name: 'Bad-Name' }] })).map((e: any) => e.loc), [['body', 'criteria', 0, 'name']], 'criterion names follow the analysis pattern');
  const many = await app.req('POST', `/v1/agent/agents/${agentId}/tests/run`, { test_ids: Array.from({ length: 21 }, (_, i) => `test_${i}`) });
  t.same(many.body.map((e: any) => e.loc), [['body', 'test_ids']], 'at most 20 tests per run');

  const team = await app.newTeam();
  const mine = await app.req('POST', '/v1/agent/tests', { agent_id: agentId, name: 'mine', user_turns: ['hi'] });
  t.equal((await fetch(`${app.url}/v1/agent/tests/${mine.body.test_id}`, { headers: team.auth })).status, 404, "another team's test is missing");
  t.equal((await fetch(`${app.url}/v1/agent/agents/${agentId}/tests/run`, { method: 'POST', headers: team.auth })).status, 404, "another team's agent is missing");

  const otherAgent = await agent(CONFIG);
  const notMine = await app.req('POST', `/v1/agent/agents/${otherAgent}/tests/run`, { test_ids: [mine.body.test_id] });
  t.equal(notMine.status, 422);
  t.same(notMine.body.map((e: any) => e.loc), [['body', 'test_ids', 0]], 'a test of another agent');
  t.same((await app.req('POST', `/v1/agent/agents/${agentId}/tests/run`, { version_number: 9 })).body, { status: 404, message: 'Version not found' });

  const noCriteria = await agent({ prompt: { first_message_mode: 'off' } });
  await app.req('POST', '/v1/agent/tests', { agent_id: noCriteria, name: 'x', user_turns: ['hi'] });
  const r = await app.req('POST', `/v1/agent/agents/${noCriteria}/tests/run`);
  t.match(r.body.runs[0], { verdict: 'error', error: /No criteria/ }, 'nothing to judge by: error');

  const custom = await agent({ llm: { custom: { base_url: 'https://llm.example.com/v1', model: 'm', api_key: 'sk-test' } } });
  const refused = await app.req('POST', `/v1/agent/agents/${custom}/tests/run`);
  t.same(refused.body, { status: 400, message: 'Agent tests cannot run against a custom LLM' });
});
