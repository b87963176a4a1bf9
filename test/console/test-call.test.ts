// The console's Test call page: typed conversations with the published version and with the
// draft (a preview), the live transcript, tool events, the latency split, End call, and after it
// the link to the call's record (or, for a preview, its analysis).
import t from 'tap';
import { browserSkip, startConsole, startEndpoint } from './harness.ts';

t.test('a typed test call with the published version, then with the draft', { skip: browserSkip }, async (t) => {
  const tool = await startEndpoint(t);
  tool.reply = { status: 200, body: '{"status":"shipped"}' };
  const rig = await startConsole(t, { allow: [tool] });
  const { page, app } = rig;
  const toolId = (await app.req('POST', '/v1/agent/tools', { name: 'lookup_order', url: `${tool.url}/orders/{{order_id}}`, method: 'GET', arguments: [{ name: 'order_id' }] })).body.tool_id;
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'Order desk', config: { prompt: { first_message_mode: 'fixed', first_message: 'Welcome to the order desk.' }, tools: { tool_ids: [toolId] } } })).body;
  t.equal((await app.req('POST', `/v1/agent/agents/${agent.agent_id}/publish`)).status, 200);

  await rig.open(`/agents/${agent.agent_id}/test`);
  await page.getByRole('heading', { name: 'Test call: Order desk' }).waitFor();
  await page.getByLabel('The published version').check();
  await page.getByRole('button', { name: 'Start call by typing' }).click();
  const transcript = page.getByRole('list', { name: 'Transcript' });
  await transcript.getByText('Agent:Welcome to the order desk.').waitFor({ timeout: 20_000 });

  await page.getByLabel('Message').fill('Please lookup order, order_id is 42.');
  await page.getByRole('button', { name: 'Send' }).click();
  await transcript.getByText('You:Please lookup order, order_id is 42.').waitFor({ timeout: 20_000 });
  await transcript.getByText(/Tool lookup_order started/).waitFor({ timeout: 20_000 });
  await transcript.getByText(/Tool lookup_order completed: \{"status":"shipped"\}/).waitFor({ timeout: 20_000 });
  await transcript.getByText('Agent:lookup_order returned: {"status":"shipped"}').waitFor({ timeout: 20_000 });
  t.same(tool.requests.map((r) => r.path), ['/orders/42'], 'the tool was really called');
  const latency = page.getByRole('table', { name: 'Per turn, as it happened' });
  await latency.waitFor();
  t.ok(await latency.getByRole('row').count() >= 2, 'a row per answered turn');
  t.match(await latency.textContent(), /\d+ ms/);
  await rig.check('test-call');

  await page.getByRole('button', { name: 'End call' }).click();
  await page.getByRole('heading', { name: 'Call ended' }).waitFor();
  const link = page.getByRole('link', { name: 'Open the call\'s record' });
  const href = await link.getAttribute('href');
  t.match(href, /^\/sessions\/sess_/);
  const record = (await app.req('GET', `/v1/agent/sessions/${href!.split('/')[2]}`)).body;
  t.equal(record.agent_id, agent.agent_id);
  t.ok(record.items.some((i: any) => i.type === 'message' && i.role === 'user' && /order_id is 42/.test(i.content ?? i.text ?? JSON.stringify(i))), 'the typed turn is in the record');

  // The draft: a preview, not kept in Sessions; its analysis shows once ready.
  await app.req('PATCH', `/v1/agent/agents/${agent.agent_id}/config`, { prompt: { first_message: 'Draft greeting.' } });
  await page.getByLabel('The draft').check();
  await page.getByRole('button', { name: 'Start call by typing' }).click();
  await transcript.getByText('Agent:Draft greeting.').waitFor({ timeout: 20_000 });
  await page.getByLabel('Message').fill('say "hello from the preview"');
  await page.getByRole('button', { name: 'Send' }).click();
  await transcript.getByText('Agent:hello from the preview').waitFor({ timeout: 20_000 });
  await page.getByRole('button', { name: 'End call' }).click();
  await page.getByText('Preview calls are not kept in Sessions').waitFor();
  await page.getByText(/Summary:.*hello from the preview/).waitFor({ timeout: 20_000 });
  rig.noScriptErrors();
});
