import t from 'tap';
import { join, makeTool, sleep, startToolsPlatform, toolAgent, toolItems, until } from './helpers.ts';

const { app, endpoint } = await startToolsPlatform(t);
endpoint.routes.set('/hang', 'hang');

t.test('Background calls in flight: 10 per conversation; the eleventh fails at once with an error the agent can react to', async (t) => {
  const tool = await makeTool(app, { name: 'Slowjob', url: `${endpoint.url}/hang`, execution_mode: 'background', timeout_seconds: 300 });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  const started = () => caller.toolEvents().filter((e) => e.type === 'tool.started').length;
  for (let i = 1; i <= 10; i++) {
    caller.say(`Please slowjob number ${i}.`); // each typed turn interrupts the reply before it
    await until(() => started() === i, `call ${i} started`);
  }
  await endpoint.waitFor(10, '/hang');
  t.same(caller.toolEvents().filter((e) => e.type !== 'tool.started'), [], '10 in flight, none settled');
  caller.say('Please slowjob once more.');
  await until(() => caller.toolEvents().some((e) => e.type === 'tool.failed'), 'the eleventh fails');
  const failed = caller.toolEvents().find((e) => e.type === 'tool.failed')!;
  t.match(failed, { toolName: 'slowjob', error: 'Too many background calls in flight (10); try later' });
  t.equal(failed.callId, caller.toolEvents().filter((e) => e.type === 'tool.started')[10]!.callId, 'the eleventh call');
  await caller.waitFor(() => caller.transcripts.some((x) => x.role === 'agent' && x.text.includes('Too many')), 20_000, 'the agent reacting');
  t.pass('the model was told the error and spoke about it');
  await sleep(200);
  t.equal(endpoint.hits.filter((h) => h.url === '/hang').length, 10, 'the eleventh never reached the endpoint');
});

t.test('POST …/end cancels in-flight background calls; their attempts stay in the history as cancelled', async (t) => {
  const tool = await makeTool(app, { name: 'Report', url: `${endpoint.url}/hang?r=1`, execution_mode: 'background', timeout_seconds: 300 });
  const caller = await join(app, await toolAgent(app, [tool]));
  const before = endpoint.hits.length;
  caller.say('Please report.');
  await until(() => caller.toolEvents().length === 1, 'started');
  await until(() => endpoint.hits.length === before + 1, 'the request in flight');
  const hit = endpoint.hits[before]!;
  const ended = new Promise((r) => caller.convo.on('ended', r));
  const r = await app.req('POST', `/v1/agent/sessions/${caller.sessionId}/end`);
  t.equal(r.status, 204);
  await ended;
  await hit.closed;
  t.pass('the request to the endpoint was aborted');
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items, [
    { type: 'tool_call', tool_name: 'report', tool_source: 'webhook' },
    { type: 'tool_result', tool_name: 'report', status: 'cancelled', output: null, error: /Cancelled/ },
  ]);
  // The socket hears the end before the record is written: wait for the record to leave `active`.
  let record = await app.req('GET', `/v1/agent/sessions/${caller.sessionId}`);
  for (const stop = Date.now() + 15_000; record.body.status === 'active' && Date.now() < stop; ) {
    await sleep(50);
    record = await app.req('GET', `/v1/agent/sessions/${caller.sessionId}`);
  }
  t.match(record.body, { status: 'completed', ended_reason: 'ended_by_api' });
});

t.test('a tool whose host name resolves to a loopback address is refused at connect time when the allow-list does not name it', async (t) => {
  const runtime = app.runtime;
  // Public-looking name (the write-time check passes); the resolver answers 127.0.0.1, where the endpoint listens.
  runtime.toolLookup = async () => [{ address: '127.0.0.1', family: 4 }];
  t.teardown(() => { runtime.toolLookup = undefined; });
  const tool = await makeTool(app, { name: 'Rebind', url: `http://tools.example.test:${endpoint.port}/rebind` });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please rebind.', false);
  const reply = await caller.reply(1);
  t.match(reply, /^rebind returned: \{"error":"Outbound request blocked: host resolves to a non-public address \(.*loopback.*\) \(ssrf_blocked\)"\}$/);
  t.notOk(endpoint.hits.some((h) => h.url === '/rebind'), 'nothing reached the endpoint');
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items[1], { status: 'failed', error: /ssrf_blocked/ });
});

t.test('mock responses never intercept a conversation\'s call', async (t) => {
  endpoint.routes.set('/real', { body: '{"real":1}' });
  const tool = await makeTool(app, { name: 'Quote', url: `${endpoint.url}/real`, mock_responses: [{ name: 'default', status_code: 200, body: '{"mock":1}' }] });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please quote.', false);
  t.equal(await caller.reply(1), 'quote returned: {"real":1}');
});

t.test('tools attached after publish are not offered; the pinned version is what runs', async (t) => {
  const first = await makeTool(app, { name: 'Alpha', url: `${endpoint.url}/real` });
  const agent = await toolAgent(app, [first]);
  const later = await makeTool(app, { name: 'Beta', url: `${endpoint.url}/real` });
  const patched = await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { tools: { tool_ids: [first, later] } });
  t.equal(patched.status, 200);
  const caller = await join(app, agent);
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please beta.', false);
  t.equal(await caller.reply(1), 'You said: Please beta.', 'beta is not a tool of the published version');
  caller.say('Please alpha.', false);
  t.equal(await caller.reply(2), 'alpha returned: {"real":1}');
});
