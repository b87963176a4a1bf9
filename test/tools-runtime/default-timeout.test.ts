// docs/api/tools.md, webhook tools: `timeout_seconds` defaults to 30, and the default bounds a call
// at run time (not only in the stored tool). This file waits the full 30 s, so it stands alone
// and runs beside the others.
import t from 'tap';
import { join, makeTool, startToolsPlatform, toolAgent, toolItems } from './helpers.ts';

const { app, endpoint } = await startToolsPlatform(t);

t.test('a tool created without timeout_seconds gives up on a silent endpoint after the default 30 s', async (t) => {
  endpoint.routes.set('/silent', 'hang');
  const tool = await makeTool(app, { name: 'Silent', url: `${endpoint.url}/silent` });
  t.match((await app.req('GET', `/v1/agent/tools/${tool}`)).body, { timeout_seconds: 30 }, 'stored with the default');
  const caller = await join(app, await toolAgent(app, [tool]));
  t.teardown(() => caller.convo.hangup().catch(() => {}));
  caller.say('Please silent.', false);
  const reply = await caller.reply(1, 60_000);
  t.equal(reply, 'silent returned: {"error":"Outbound request timed out after 30000 ms (timeout)"}', 'the call failed as a timeout of the default length');
  const items = await toolItems(app, caller.sessionId, (i) => i.length === 2);
  t.match(items[1], { type: 'tool_result', status: 'failed', error: 'Outbound request timed out after 30000 ms (timeout)' });
  const [hit] = await endpoint.waitFor(1, '/silent');
  await hit!.closed;
  t.pass('the request was abandoned (connection closed)');
});
