// The client SDK's client tools over the real websocket transport: a real platform (native
// backend, scripted chat model), an agent with client tools the scripted model calls, and
// `start()` from `parley/client`.
//
// Rules (docs/api/sessions.md): `client_tool.call` reaches the SDK as the `clientToolCall` event
// ({callId, toolName, params, expectsResponse}); the SDK answers with `client_tool.result`
// ({callId, result} or {callId, isError:true}), by hand (`sendClientToolResult`) or through
// the `clientTools` handlers; fire-and-forget calls get no answer.
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { start, type ClientToolCall, type Conversation, type StartOptions, type WebSocketFactory } from '../../src/client/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { createSession } from '../e2e/session-helpers.ts';
import { makeTool, toolAgent, until } from '../tools-runtime/helpers.ts';

const app: TestServer = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());

interface Joined {
  convo: Conversation;
  calls: ClientToolCall[];
  /** The agent's n-th final reply. */
  reply(n: number): Promise<string>;
}

/** An agent with one client tool, and a conversation with it through the SDK. */
async function join(t: Test, tool: Record<string, unknown>, options: StartOptions = {}, listen = true): Promise<Joined> {
  const toolId = await makeTool(app, { tool_type: 'client', ...tool });
  const session = await createSession(app, await toolAgent(app, [toolId]));
  const convo = await start(session as never, { reconnect: false, ...options });
  t.teardown(() => convo.hangup().catch(() => {}));
  const calls: ClientToolCall[] = [];
  if (listen) convo.on('clientToolCall', (c) => calls.push(c));
  const replies: string[] = [];
  convo.on('transcript', (tr) => {
    if (tr.role === 'agent' && tr.final) replies.push(tr.text);
  });
  return {
    convo,
    calls,
    async reply(n) {
      await until(() => replies.length >= n, `agent reply ${n}`, 20_000);
      return replies[n - 1]!;
    },
  };
}

t.test('clientToolCall carries the call; sendClientToolResult answers it', async (t) => {
  const c = await join(t, { name: 'showProduct', description: 'Shows a product on screen', arguments: [{ name: 'sku' }] });
  c.convo.sendUserMessage('Please showProduct, sku is K-9.', { audio: false });
  await until(() => c.calls.length === 1, 'the call');
  const call = c.calls[0]!;
  t.match(call, { toolName: 'showProduct', params: { sku: 'K-9' }, expectsResponse: true }, 'the event has the tool, its params and expectsResponse');
  t.type(call.callId, 'string');
  c.convo.sendClientToolResult(call.callId, { shown: true });
  t.equal(await c.reply(1), 'showProduct returned: {"shown":true}', 'the model got the result');
});

t.test('sendClientToolResult with isError reports a failure', async (t) => {
  const c = await join(t, { name: 'payNow', arguments: [] });
  c.convo.sendUserMessage('Please payNow.', { audio: false });
  await until(() => c.calls.length === 1, 'the call');
  c.convo.sendClientToolResult(c.calls[0]!.callId, 'card declined', { isError: true });
  t.equal(await c.reply(1), 'payNow returned: {"error":"The client reported an error","response":"card declined"}');
});

t.test('clientTools handlers answer automatically: the returned value, or the thrown error', async (t) => {
  const seen: unknown[] = [];
  const ok = await join(t, { name: 'mapView', arguments: [{ name: 'city' }] }, {
    clientTools: { mapView: async (params) => { seen.push(params); return { zoom: 12 }; } },
  });
  ok.convo.sendUserMessage('Please mapView, city is Oslo.', { audio: false });
  t.equal(await ok.reply(1), 'mapView returned: {"zoom":12}', 'the handler result reaches the model');
  t.same(seen, [{ city: 'Oslo' }], 'the handler got the params');
  t.equal(ok.calls.length, 1, 'the clientToolCall event is still emitted');

  const failing = await join(t, { name: 'signForm', arguments: [] }, {
    clientTools: { signForm: () => { throw new Error('user refused'); } },
  });
  failing.convo.sendUserMessage('Please signForm.', { audio: false });
  t.equal(await failing.reply(1), 'signForm returned: {"error":"The client reported an error","response":"user refused"}', 'a throw becomes an error result');
});

t.test('a call nobody handles is answered with an error at once (no wait for the timeout)', async (t) => {
  const c = await join(t, { name: 'askUser', arguments: [], timeout_seconds: 120 }, { clientTools: {} }, false);
  c.convo.sendUserMessage('Please askUser.', { audio: false });
  t.equal(await c.reply(1), 'askUser returned: {"error":"The client reported an error","response":"Client tool askUser is not defined on the client"}');
});

t.test('fire-and-forget calls run the handler and send nothing', async (t) => {
  let ran = 0;
  const sent: string[] = [];
  class Tapped extends WebSocket {
    override send(data: unknown, ...rest: never[]) {
      if (typeof data === 'string') sent.push(data);
      return super.send(data as string, ...rest);
    }
  }
  const c = await join(t, { name: 'confetti', expects_response: false }, {
    clientTools: { confetti: () => { ran++; return 'ignored'; } },
    WebSocket: Tapped as unknown as WebSocketFactory,
  });
  c.convo.sendUserMessage('Please confetti.', { audio: false });
  t.equal(await c.reply(1), 'confetti returned: {"status":"dispatched"}');
  t.equal(ran, 1, 'the handler ran once');
  t.match(c.calls, [{ toolName: 'confetti', expectsResponse: false }]);
  t.same(sent.map((m) => JSON.parse(m).type), ['user.message'], 'no client_tool.result was sent');
});
