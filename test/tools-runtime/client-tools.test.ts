import t from 'tap';
import { join, makeTool, sleep, startToolsPlatform, toolAgent, toolItems, until, type ToolCaller } from './helpers.ts';

const { app } = await startToolsPlatform(t);

const clientTool = (body: Record<string, unknown>) => makeTool(app, { tool_type: 'client', ...body });
const calls = (c: ToolCaller) => c.events.filter((e) => e.type === 'client_tool.call');

t.test('a client tool that expects a response: client_tool.call goes to the client, its result comes back to the model', async (t) => {
  const tool = await clientTool({ name: 'showProduct', description: 'Shows a product on screen', arguments: [{ name: 'sku' }] });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please showProduct, sku is K-9.', false);
  await until(() => calls(caller).length === 1, 'the call');
  const call = calls(caller)[0]!;
  t.match(call, { topic: 'agent-event', type: 'client_tool.call', toolName: 'showProduct', params: { sku: 'K-9' }, expectsResponse: true });
  t.equal(caller.finals('agent').length, 0, 'the agent waits for the answer');
  caller.sendRaw({ type: 'client_tool.result', callId: 'call_unknown', result: { shown: false } });
  caller.sendRaw({ type: 'client_tool.result', callId: call.callId, result: { shown: true } });
  t.equal(await caller.reply(1), 'showProduct returned: {"shown":true}');
  caller.sendRaw({ type: 'client_tool.result', callId: call.callId, result: { shown: 'again' } });
  await sleep(300);
  t.match(caller.toolEvents(), [
    { type: 'tool.started', callId: call.callId, toolName: 'showProduct', toolSource: 'client', input: '{"sku":"K-9"}' },
    { type: 'tool.completed', callId: call.callId, output: '{"shown":true}' },
  ], 'unknown and already settled ids are ignored: one terminal event');
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items, [{ type: 'tool_call', tool_source: 'client', call_id: call.callId }, { type: 'tool_result', status: 'completed', output: '{"shown":true}' }]);
});

t.test('a client tool answering isError: the model sees the failure (passthrough)', async (t) => {
  const tool = await clientTool({ name: 'payNow', arguments: [] });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please payNow.', false);
  await until(() => calls(caller).length === 1, 'the call');
  caller.sendRaw({ type: 'client_tool.result', callId: calls(caller)[0]!.callId, isError: true, result: 'card declined' });
  t.equal(await caller.reply(1), 'payNow returned: {"error":"The client reported an error","response":"card declined"}');
  t.match(caller.toolEvents()[1], { type: 'tool.failed', error: 'The client reported an error' });
});

t.test('a client tool that never answers fails after timeout_seconds', async (t) => {
  const tool = await clientTool({ name: 'askUser', timeout_seconds: 1 });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please askUser.', false);
  t.equal(await caller.reply(1), 'askUser returned: {"error":"The client did not answer within 1 s"}');
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items[1], { status: 'failed', error: 'The client did not answer within 1 s' });
});

t.test('a client tool with expects_response false is fire-and-forget', async (t) => {
  const tool = await clientTool({ name: 'confetti', expects_response: false });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please confetti.', false);
  t.equal(await caller.reply(1), 'confetti returned: {"status":"dispatched"}');
  t.match(calls(caller), [{ toolName: 'confetti', params: {}, expectsResponse: false }]);
  t.match(caller.toolEvents(), [{ type: 'tool.started' }, { type: 'tool.completed', toolSource: 'client' }]);
});

t.test('client_tool.call is sent with tool_events false; lifecycle events are not', async (t) => {
  const tool = await clientTool({ name: 'mapView', arguments: [{ name: 'city' }] });
  const caller = await join(app, await toolAgent(app, [tool]), { tool_events: false });
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please mapView, city is Oslo.', false);
  await until(() => calls(caller).length === 1, 'the call');
  caller.sendRaw({ type: 'client_tool.result', callId: calls(caller)[0]!.callId, result: 'ok' });
  t.equal(await caller.reply(1), 'mapView returned: "ok"');
  t.same(caller.toolEvents(), []);
});

t.test('ending the session cancels a client call that waits', async (t) => {
  const tool = await clientTool({ name: 'signForm', timeout_seconds: 120 });
  const caller = await join(app, await toolAgent(app, [tool]));
  caller.say('Please signForm.', false);
  await until(() => calls(caller).length === 1, 'the call');
  await caller.convo.hangup();
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items[1], { type: 'tool_result', status: 'cancelled' });
});
