// The console's Tools pages: create with a write-only credential header, Test against a local
// endpoint (the request sent and the response), edit, the agents using it, delete (409 explained).
import t from 'tap';
import { browserSkip, startConsole, startEndpoint } from './harness.ts';

t.test('create, test, edit and delete a webhook tool', { skip: browserSkip }, async (t) => {
  const ep = await startEndpoint(t);
  ep.reply = { status: 200, body: '{"in_stock":3}' };
  const rig = await startConsole(t, { allow: [ep] });
  const { page, app } = rig;

  await rig.open('/tools');
  await page.getByText('No tools yet').waitFor();
  await page.getByRole('link', { name: 'New tool' }).click();
  await page.getByLabel('Name', { exact: true }).fill('check_stock');
  await page.getByLabel('Description').fill('Stock of a product');
  await page.getByLabel('Method').selectOption('GET');
  await page.getByLabel('URL', { exact: true }).fill(`${ep.url}/stock/{{sku}}`);
  await page.getByRole('button', { name: 'Add argument' }).click();
  await page.getByLabel('Argument 1 name').fill('sku');
  await page.getByRole('button', { name: 'Add header' }).click();
  await page.getByLabel('Header 1 name').fill('Authorization');
  await page.getByLabel('Header 1 kind').selectOption('authorization_bearer');
  await page.getByLabel('Header 1 value').fill('Bearer s3cret-token');
  await rig.check('tool-new');
  await page.getByRole('button', { name: 'Create tool' }).click();
  await page.waitForURL(/\/tools\/tool_/);
  const toolId = new URL(page.url()).pathname.split('/')[2]!;
  const stored = (await app.req('GET', `/v1/agent/tools/${toolId}`)).body;
  t.same(stored.headers, [{ name: 'Authorization', kind: 'authorization_bearer', value: null, has_secret: true }], 'the credential is write-only');
  t.notOk(JSON.stringify(await page.content()).includes('s3cret-token'), 'the secret is not in the page');

  // Test: the request that was sent and the response.
  await page.getByLabel('Argument sku').fill('A-1');
  await page.getByRole('button', { name: 'Test', exact: true }).click();
  const sent = page.getByLabel('Request sent');
  await sent.waitFor();
  t.match(await sent.textContent(), new RegExp(`^GET ${ep.url}/stock/A-1\\nAuthorization: \\(secret\\)`));
  t.match(await page.getByLabel('Response', { exact: true }).textContent(), /^200 \(\d+ ms\)[\s\S]*\{"in_stock":3\}/);
  t.equal(ep.requests.at(-1)!.headers.authorization, 'Bearer s3cret-token', 'the endpoint got the real credential');
  await rig.check('tool');

  // A 422 next to its field; then an edit that leaves the headers (and their secret) alone.
  await page.getByLabel('URL', { exact: true }).fill('not a url');
  await page.getByRole('button', { name: 'Save' }).click();
  const urlError = page.locator('.field', { has: page.getByLabel('URL', { exact: true }) }).locator('.field-error');
  await urlError.waitFor();
  t.ok((await urlError.textContent())!.length > 0, 'the URL\'s error sits next to it');
  await page.getByLabel('URL', { exact: true }).fill(`${ep.url}/v2/stock/{{sku}}`);
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Saved.').waitFor();
  await page.getByRole('button', { name: 'Test', exact: true }).click();
  await page.getByLabel('Request sent').filter({ hasText: '/v2/stock/A-1' }).waitFor();
  t.equal(ep.requests.at(-1)!.headers.authorization, 'Bearer s3cret-token', 'the secret survived an edit of other fields');

  // Used by an agent: listed, and delete explains the 409; detached, it deletes.
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'Stock bot', config: { tools: { tool_ids: [toolId] } } })).body;
  await page.reload();
  await page.getByRole('link', { name: 'Stock bot' }).waitFor();
  await page.getByRole('button', { name: 'Delete tool' }).click();
  await page.getByRole('group', { name: /Delete the tool/ }).getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('alert').filter({ hasText: 'attached to 1 agent' }).filter({ hasText: 'remove it from their Tools section' }).waitFor();
  t.equal((await app.req('GET', `/v1/agent/tools/${toolId}`)).status, 200, 'still there');
  await app.req('PATCH', `/v1/agent/agents/${agent.agent_id}/config`, { tools: { tool_ids: [] } });
  await page.getByRole('button', { name: 'Delete tool' }).click();
  await page.getByRole('group', { name: /Delete the tool/ }).getByRole('button', { name: 'Delete' }).click();
  await page.waitForURL(/\/tools$/);
  t.equal((await app.req('GET', `/v1/agent/tools/${toolId}`)).status, 404, 'deleted');
  rig.noScriptErrors();
});
