// The console's sign-in and Agents page, in Chromium against a real platform.
import t from 'tap';
import { browserSkip, startConsole } from './harness.ts';

t.test('sign in, the Agents list: create, search, pages, delete with confirmation, sign out', { skip: browserSkip }, async (t) => {
  const rig = await startConsole(t);
  const { page, app } = rig;

  // A wrong key says so; the right one signs in and stays in session storage only.
  await page.goto(app.url + '/');
  await rig.check('sign-in');
  await page.getByLabel('API key').fill('pk_wrong_key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'not accepted' }).waitFor();
  // With the keyboard alone: type the key, Enter.
  await page.getByLabel('API key').fill('');
  await page.getByLabel('API key').focus();
  await page.keyboard.type(app.key);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
  t.equal(new URL(page.url()).pathname, '/agents');
  const stored = await page.evaluate(() => ({ session: sessionStorage.getItem('parley.apiKey'), local: localStorage.length, url: location.href }));
  t.equal(stored.session, app.key, 'the key is in the tab\'s session storage');
  t.equal(stored.local, 0, 'nothing in local storage');
  t.notOk(stored.url.includes(app.key), 'never in the URL');
  // The list loads after the heading: wait for its empty state rather than sample it once.
  await page.getByText('No agents yet').waitFor({ timeout: 10_000 });
  t.ok(await page.getByText('No agents yet').isVisible(), 'an empty team sees the empty state');

  // New agent, reached with Tab and opened with Enter: the Name field takes the keyboard; an
  // empty name's 422 sits next to it.
  for (let i = 0; i < 30 && (await page.evaluate(() => document.activeElement?.textContent)) !== 'New agent'; i++) await page.keyboard.press('Tab');
  await page.keyboard.press('Enter');
  await page.getByRole('form', { name: 'New agent' }).waitFor();
  await page.waitForFunction(() => (document.activeElement as HTMLInputElement | null)?.name === 'name');
  t.equal(await page.evaluate(() => (document.activeElement as HTMLInputElement | null)?.name), 'name', 'the form opens with the keyboard in Name');
  await page.keyboard.press('Enter');
  const nameError = page.locator('.field', { has: page.getByLabel('Name', { exact: true }) }).locator('.field-error');
  await nameError.waitFor();
  t.match(await nameError.textContent(), /character|least/i, 'the API\'s message sits next to Name');
  await page.getByLabel('Name', { exact: true }).fill('Front desk');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await page.waitForURL(/\/agents\/agent_/);
  const agentId = new URL(page.url()).pathname.split('/')[2]!;
  t.ok((await app.req('GET', `/v1/agent/agents/${agentId}`)).status === 200, 'the agent exists');

  // More agents through the API: search and pages.
  for (let i = 0; i < 21; i++) await app.req('POST', '/v1/agent/agents', { name: `Bulk ${String(i).padStart(2, '0')}` });
  await page.goto(app.url + '/agents');
  await page.getByText('Page 1 of 2').waitFor();
  await rig.check('agents');
  await page.getByRole('button', { name: 'Next page' }).click();
  await page.getByText('Page 2 of 2').waitFor();
  await page.waitForFunction(() => document.querySelectorAll('tbody tr').length < 20);
  t.equal(await page.getByRole('row').count(), 1 + 2, 'the second page holds the other two');
  await page.getByLabel('Search by name').fill('front');
  await page.getByRole('button', { name: 'Search' }).click();
  await page.getByText('Page 1 of 1').waitFor();
  t.same(await page.locator('tbody tr td:first-child a').allTextContents(), ['Front desk']);

  // Delete asks first; Cancel keeps it, Delete removes it.
  await page.getByRole('button', { name: 'Delete Front desk' }).click();
  await page.getByRole('button', { name: 'Cancel' }).click();
  t.equal((await app.req('GET', `/v1/agent/agents/${agentId}`)).status, 200, 'cancel kept it');
  await page.getByRole('button', { name: 'Delete Front desk' }).click();
  await page.getByRole('group', { name: /Delete Front desk with its draft/ }).getByRole('button', { name: 'Delete' }).click();
  await page.getByText('No agent\'s name matches').waitFor();
  t.equal((await app.req('GET', `/v1/agent/agents/${agentId}`)).status, 404, 'deleted');

  // Sign out forgets the key.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('API key').waitFor();
  t.equal(await page.evaluate(() => sessionStorage.getItem('parley.apiKey')), null);
  rig.noScriptErrors();
});
