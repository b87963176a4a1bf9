import t from 'tap';
import { gate, join, makeTool, startToolsPlatform, toolAgent, toolItems, until } from './helpers.ts';

const { app, endpoint } = await startToolsPlatform(t);

t.test('blocking: arguments rendered in url and body, method, content type and credential headers sent exactly as stored; the reply uses the response', async (t) => {
  endpoint.routes.set('/orders/', { body: '{"st":"shipped"}' });
  const tool = await makeTool(app, {
    name: 'Order lookup',
    description: 'Looks up an order',
    arguments: [{ name: 'order_id', description: 'The order number' }, { name: 'note' }],
    method: 'PUT',
    url: `${endpoint.url}/orders/{{order_id}}?n={{note}}&keep={{undeclared}}`,
    content_type: 'application/json; charset=utf-8',
    body_template: '{"order":"{{order_id}}","note":"{{note}}","ch":"{{system.channel}}"}',
    headers: [
      { name: 'Authorization', value: 'Bearer tok_live_1', kind: 'authorization_bearer' },
      { name: 'X-Basic', value: 'Basic dTpw', kind: 'authorization_basic' },
      { name: 'X-Api-Key', value: 'key-123', kind: 'custom', secret: true },
      { name: 'X-MiXeD-Case', value: 'Mixed  Value;q=1' },
    ],
  });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please do the order lookup, order_id is A 1/2, note is "say hi".');
  t.equal(await caller.reply(1), 'order_lookup returned: {"st":"shipped"}', 'the model was called again with the response, then spoke');
  const [hit] = await endpoint.waitFor(1, '/orders/');
  t.equal(hit!.method, 'PUT');
  t.equal(hit!.url, '/orders/A%201%2F2?n=say%20hi&keep={{undeclared}}');
  t.same(JSON.parse(hit!.body), { order: 'A 1/2', note: 'say hi', ch: 'web_voice' });
  t.same(hit!.raw.find(([n]) => n === 'Authorization'), ['Authorization', 'Bearer tok_live_1'], 'bearer credential exactly as stored (decrypted)');
  t.same(hit!.raw.find(([n]) => n === 'X-Basic'), ['X-Basic', 'Basic dTpw'], 'basic credential exactly as stored');
  t.same(hit!.raw.find(([n]) => n === 'X-Api-Key'), ['X-Api-Key', 'key-123'], 'secret custom header decrypted');
  t.same(hit!.raw.find(([n]) => n === 'X-MiXeD-Case'), ['X-MiXeD-Case', 'Mixed  Value;q=1'], 'custom header name and value as stored');
  t.equal(hit!.headers['content-type'], 'application/json; charset=utf-8');

  const ev = caller.toolEvents();
  t.match(ev, [
    { type: 'tool.started', toolName: 'order_lookup', toolSource: 'webhook', input: JSON.stringify({ order_id: 'A 1/2', note: 'say hi' }) },
    { type: 'tool.completed', toolName: 'order_lookup', toolSource: 'webhook', output: '{"st":"shipped"}' },
  ]);
  t.equal(ev[0]!.callId, ev[1]!.callId);
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items, [
    { type: 'tool_call', call_id: ev[0]!.callId, tool_name: 'order_lookup', tool_source: 'webhook', input: '{"order_id":"A 1/2","note":"say hi"}', turn_id: 1 },
    { type: 'tool_result', call_id: ev[0]!.callId, status: 'completed', output: '{"st":"shipped"}', output_truncated: false, error: null, latency_ms: Number, turn_id: 1 },
  ]);
  t.notOk(JSON.stringify((await app.req('GET', `/v1/agent/tools/${tool}`)).body).includes('tok_live_1'), 'credentials still never read back');
});

t.test('fire_and_forget: the agent continues at once, told the request was dispatched; the response only reaches the history', async (t) => {
  const answer = gate();
  endpoint.routes.set('/ff', { gate: answer.promise, status: 500, body: 'boom' });
  const tool = await makeTool(app, { name: 'Notify', url: `${endpoint.url}/ff`, execution_mode: 'fire_and_forget' });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please notify.');
  const reply = await caller.reply(1);
  t.equal(reply, 'notify returned: {"status":"dispatched"}');
  const failed = caller.toolEvents().find((e) => e.type === 'tool.failed');
  t.notOk(failed, 'the agent did not wait for the (failing) response');
  answer.open();
  const items = await toolItems(app, caller.sessionId, (i) => i.some((x) => x.type === 'tool_result'));
  t.match(items[1], { type: 'tool_result', status: 'failed', error: 'The endpoint answered HTTP 500', tool_name: 'notify' }, 'the failure is in the history');
  await until(() => caller.toolEvents().length === 2, 'the terminal event');
  t.match(caller.toolEvents(), [{ type: 'tool.started' }, { type: 'tool.failed', toolName: 'notify' }], 'exactly one terminal event');
  t.equal(caller.finals('agent').length, 1, 'nothing more was said about it');
});

t.test('background: the agent keeps talking; the result is announced at the next natural pause', async (t) => {
  const answer = gate();
  endpoint.routes.set('/bg', { gate: answer.promise, body: '{"n":7}' });
  const tool = await makeTool(app, { name: 'Count', url: `${endpoint.url}/bg`, execution_mode: 'background', timeout_seconds: 200 });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please count.');
  t.equal(await caller.reply(1), 'count returned: {"status":"running in background"}', 'the agent spoke at once');
  t.notOk(caller.toolEvents().some((e) => e.type === 'tool.completed'), 'while the request was still running');
  answer.open();
  t.equal(await caller.reply(2), 'count returned: {"n":7}', 'then announced the result on its own');
  t.match(caller.toolEvents(), [{ type: 'tool.started', toolName: 'count' }, { type: 'tool.completed', toolName: 'count', output: '{"n":7}' }]);
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items[1], { type: 'tool_result', status: 'completed', output: '{"n":7}' });
});

t.test('background failures are announced too, shaped by error_handling', async (t) => {
  endpoint.routes.set('/failbg', { status: 503, body: 'later' });
  const tool = await makeTool(app, { name: 'Sync', url: `${endpoint.url}/failbg`, execution_mode: 'background', error_handling: 'hide' });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please sync.');
  await caller.reply(1);
  t.equal(await caller.reply(2), 'sync returned: {"error":"The tool call failed."}');
});

t.test('error_handling passthrough shows the model the error response; hide says only that it failed', async (t) => {
  endpoint.routes.set('/err', { status: 500, body: 'out of stock' });
  const pass = await makeTool(app, { name: 'Reserve', url: `${endpoint.url}/err`, error_handling: 'passthrough' });
  const hide = await makeTool(app, { name: 'Hold', url: `${endpoint.url}/err`, error_handling: 'hide' });
  const caller = await join(app, await toolAgent(app, [pass, hide]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please reserve.', false);
  t.equal(await caller.reply(1), 'reserve returned: {"error":"The endpoint answered HTTP 500","response":"out of stock"}');
  caller.say('Please hold.', false);
  t.equal(await caller.reply(2), 'hold returned: {"error":"The tool call failed."}');
  const failed = caller.toolEvents().filter((e) => e.type === 'tool.failed');
  t.match(failed, [{ toolName: 'reserve', error: 'The endpoint answered HTTP 500' }, { toolName: 'hold', error: 'The endpoint answered HTTP 500' }], 'the client and the history keep the reason either way');
});

t.test('timeout_seconds bounds a call: it fails as a timeout and the agent says so', async (t) => {
  endpoint.routes.set('/slow', 'hang');
  const tool = await makeTool(app, { name: 'Slow', url: `${endpoint.url}/slow`, timeout_seconds: 1 });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please slow.', false);
  const reply = await caller.reply(1);
  t.match(reply, /^slow returned: \{"error":"Outbound request timed out after 1000 ms \(timeout\)"\}$/);
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items[1], { status: 'failed', error: /timed out/ });
  const [hit] = await endpoint.waitFor(1, '/slow');
  await hit!.closed;
  t.pass('the request was abandoned (connection closed)');
});

t.test('text-only runs (audio:false) execute every webhook tool as blocking', async (t) => {
  endpoint.routes.set('/txt', { delayMs: 300, body: '{"v":1}' });
  const bg = await makeTool(app, { name: 'Fetch', url: `${endpoint.url}/txt`, execution_mode: 'background' });
  const ff = await makeTool(app, { name: 'Ping', url: `${endpoint.url}/txt`, execution_mode: 'fire_and_forget' });
  const caller = await join(app, await toolAgent(app, [bg, ff]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please fetch.', false);
  t.equal(await caller.reply(1), 'fetch returned: {"v":1}', 'background waited for the response');
  caller.say('Please ping.', false);
  t.equal(await caller.reply(2), 'ping returned: {"v":1}', 'fire_and_forget waited for the response');
});

t.test('tool events: payloads cut at 4 KB with *Truncated; tool_events false sends none while the history keeps them', async (t) => {
  const big = JSON.stringify({ data: 'x'.repeat(6000) });
  endpoint.routes.set('/big', { body: big });
  const tool = await makeTool(app, { name: 'Big', url: `${endpoint.url}/big`, arguments: [{ name: 'q' }] });
  const agent = await toolAgent(app, [tool]);

  const on = await join(app, agent);
  t.teardown(() => on.convo.hangup().catch(() => {}));
  on.say(`Please big, q is "${'y'.repeat(5000)}".`, false);
  await on.reply(1);
  const [started, done] = on.toolEvents();
  t.equal(Buffer.byteLength(started!.input), 4096);
  t.equal(started!.inputTruncated, true);
  t.equal(done!.output, big.slice(0, 4096));
  t.equal(done!.outputTruncated, true);
  const items = await toolItems(app, on.sessionId, (i) => i.length === 2);
  t.equal(items[1].output, big, 'the history keeps the whole response (under 256 KB)');
  t.equal(items[0].input.length, JSON.stringify({ q: 'y'.repeat(5000) }).length, 'and the whole input');

  const off = await join(app, agent, { tool_events: false });
  t.teardown(() => off.convo.hangup().catch(() => {}));
  off.say('Please big, q is 1.', false);
  await off.reply(1);
  t.same(off.toolEvents(), [], 'no tool events');
  const offItems = await toolItems(app, off.sessionId, (i) => i.length === 2);
  t.match(offItems, [{ type: 'tool_call' }, { type: 'tool_result', status: 'completed' }]);
});

t.test('secret__ variables render into the tool request (url, body, header values) and never reach the model', async (t) => {
  endpoint.routes.set('/secret/', { body: '{"ok":1}' });
  const tool = await makeTool(app, {
    name: 'Vault',
    url: `${endpoint.url}/secret/{{secret__account}}`,
    body_template: '{"token":"{{secret__token}}"}',
    headers: [{ name: 'X-Token', value: 'T {{secret__token}}' }],
  });
  const caller = await join(app, await toolAgent(app, [tool]), { dynamic_variables: { secret__token: 'sk "1"', secret__account: 'acc/7' } });
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please vault.', false);
  t.equal(await caller.reply(1), 'vault returned: {"ok":1}');
  const [hit] = await endpoint.waitFor(1, '/secret/');
  t.equal(hit!.url, '/secret/acc%2F7');
  t.same(JSON.parse(hit!.body), { token: 'sk "1"' });
  t.equal(hit!.headers['x-token'], 'T sk "1"');
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.notOk(JSON.stringify(items).includes('sk "1"') || JSON.stringify(items).includes('sk \\"1\\"'), 'not in the history');
});

t.test('history payloads are cut at 256 KB with output_truncated; the response is read no further', async (t) => {
  endpoint.routes.set('/huge', { body: 'z'.repeat(300 * 1024), contentType: 'text/plain' });
  const tool = await makeTool(app, { name: 'Huge', method: 'GET', url: `${endpoint.url}/huge` });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please huge.', false);
  await caller.reply(1);
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.equal(items[1].output.length, 256 * 1024);
  t.equal(items[1].output_truncated, true);
  t.match(caller.toolEvents()[1], { type: 'tool.completed', outputTruncated: true });
});
