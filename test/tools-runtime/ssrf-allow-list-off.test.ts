// Issue 8 acceptance: "A tool whose host name resolves to 127.0.0.1 (test resolver) is refused
// when the allow-list is off." A platform with no PARLEY_OUTBOUND_ALLOW at all.
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { join, makeTool, startEndpoint, toolAgent, toolItems } from './helpers.ts';

const endpoint = await startEndpoint();
const saved = process.env.PARLEY_OUTBOUND_ALLOW;
delete process.env.PARLEY_OUTBOUND_ALLOW;
const app = await startTestServer({ backend: 'synthetic', config: { outboundAllow: [] } });
t.teardown(async () => {
  await app.close();
  await endpoint.close();
  if (saved !== undefined) process.env.PARLEY_OUTBOUND_ALLOW = saved;
});

t.test('allow-list off: a tool host name that resolves to 127.0.0.1 is refused at connect time, nothing reaches it', async (t) => {
  const runtime = app.runtime;
  runtime.toolLookup = async () => [{ address: '127.0.0.1', family: 4 }];
  const tool = await makeTool(app, { name: 'Rebind', url: `http://tools.example.test:${endpoint.port}/rebind` });
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please rebind.', false);
  const reply = await caller.reply(1);
  t.match(reply, /ssrf_blocked/, 'the model is told the call was blocked');
  t.equal(endpoint.hits.length, 0, 'nothing reached the loopback endpoint');
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items[1], { status: 'failed', error: /non-public address/ });
});
