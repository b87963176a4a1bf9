// The console's Phone numbers page: search, buy with the price, bind to an agent, place an
// outbound call, the number's calls, release.
import t from 'tap';
import { browserSkip, startConsole } from './harness.ts';

t.test('search, buy, bind, call, calls list, release', { skip: browserSkip }, async (t) => {
  const rig = await startConsole(t);
  const { page, app } = rig;
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'Reception' })).body;
  await app.req('POST', `/v1/agent/agents/${agent.agent_id}/publish`);
  const creditBefore = (await app.req('GET', '/v1/team')).body.credit;

  await rig.open('/phone-numbers');
  await page.getByText('You have no numbers yet').waitFor();
  await page.getByLabel('Area code').fill('41');
  await page.getByRole('button', { name: 'Search numbers' }).click();
  const areaError = page.locator('.field', { has: page.getByLabel('Area code') }).locator('.field-error');
  await areaError.waitFor();
  t.match(await areaError.textContent(), /three digits/, 'the 422 sits next to Area code');
  await page.getByLabel('Area code').fill('');
  await page.getByRole('button', { name: 'Search numbers' }).click();
  const buy = page.getByRole('button', { name: /^Buy \+1\d+ for \$[\d.]+ a day$/ }).first();
  await buy.waitFor();
  const label = (await buy.textContent())!;
  const number = /\+1\d+/.exec(label)![0];
  await rig.check('phone-numbers-search');
  await buy.click();
  await page.getByRole('status').filter({ hasText: `You bought ${number}.` }).waitFor();
  await page.getByRole('heading', { name: number }).waitFor();
  const [owned] = (await app.req('GET', '/v1/agent/phone-numbers')).body.phone_numbers;
  t.equal(owned.phone_number, number);
  t.ok((await app.req('GET', '/v1/team')).body.credit < creditBefore, 'the first day was charged');

  // Bind to the agent.
  await page.getByLabel(`Agent for ${number}`).selectOption({ label: 'Reception' });
  await page.getByRole('button', { name: `Save ${number}` }).click();
  await page.getByText('Answers with: Reception').waitFor();
  t.equal((await app.req('GET', `/v1/agent/phone-numbers/${owned.phone_number_id}`)).body.agent_id, agent.agent_id, 'bound');

  // An outbound call from it, then its calls.
  await page.getByLabel('To number').fill('+14155550199');
  await page.getByRole('button', { name: 'Call', exact: true }).click();
  const follow = page.getByRole('link', { name: 'follow the call' });
  await follow.waitFor();
  const sessionId = (await follow.getAttribute('href'))!.split('/')[2]!;
  const s = (await app.req('GET', `/v1/agent/sessions/${sessionId}`)).body;
  t.same([s.source, s.direction, s.caller_number, s.dialed_number], ['phone', 'outbound', '+14155550199', number], 'on our side the number, the person dialed as caller_number');
  await page.getByRole('button', { name: `Calls of ${number}` }).click();
  await page.getByRole('link', { name: 'To +14155550199' }).waitFor();
  await rig.check('phone-numbers');

  // Release asks first.
  await page.getByRole('button', { name: `Release ${number}` }).click();
  await page.getByRole('group', { name: /You cannot get it back/ }).getByRole('button', { name: 'Release' }).click();
  await page.getByText('You have no numbers yet').waitFor();
  t.equal((await app.req('GET', `/v1/agent/phone-numbers/${owned.phone_number_id}`)).status, 404, 'released');
  rig.noScriptErrors();
});
