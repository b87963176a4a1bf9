// The console's Usage page: credit, usage by day and kind, the ledger, a bad range's 422.
import t from 'tap';
import { browserSkip, startConsole } from './harness.ts';

t.test('credit, usage by day and kind, ledger', { skip: browserSkip }, async (t) => {
  const rig = await startConsole(t);
  const { page, app } = rig;
  t.equal((await app.req('POST', '/v1/tts', { text: 'hello there', format: 'wav' })).status, 200);
  // Synthesis usage lands in batches (up to 200 ms later): read until it shows, as a user would.
  for (let i = 0; i < 50 && !(await app.req('GET', '/v1/usage')).body.days.some((d: { kind: string }) => d.kind === 'tts_characters'); i++) await new Promise((r) => setTimeout(r, 100));
  const available = (await app.req('GET', '/v1/agent/available-phone-numbers')).body.available_phone_numbers;
  t.equal((await app.req('POST', '/v1/agent/phone-numbers', { phone_number: available[0].phone_number, provider: 'sandbox' })).status, 201);
  const credit = (await app.req('GET', '/v1/team')).body.credit as number;

  await rig.open('/usage');
  await page.getByRole('heading', { name: 'Usage', exact: true }).waitFor();
  const shown = await page.getByLabel('Credit left').textContent();
  t.equal(shown!.replace(/[^\d.]/g, ''), String(credit), 'the credit, to the micro-unit');
  const totals = page.getByRole('table', { name: 'Totals' });
  await totals.waitFor();
  t.match(await totals.getByRole('row', { name: /Speech synthesis/ }).textContent(), /11 characters/);
  t.match(await totals.getByRole('row', { name: /Phone numbers/ }).textContent(), /1 days/);
  const today = new Date().toISOString().slice(0, 10);
  t.ok(await page.getByRole('table', { name: 'By day' }).getByRole('cell', { name: today }).first().isVisible(), 'today\'s usage by day');
  await page.getByRole('table', { name: 'Every change of credit, newest first' }).getByRole('cell', { name: 'Credit added' }).waitFor();
  const reasons = await page.getByRole('table', { name: 'Every change of credit, newest first' }).locator('tbody td:nth-child(2)').allTextContents();
  t.same(reasons, ['Number rental', 'Speech', 'Credit added'], 'the ledger, newest first');
  await rig.check('usage');

  // A range that ends before it starts: the API's 422 sits next to To.
  await page.getByLabel('From', { exact: true }).fill('2026-05-02');
  await page.getByLabel('To', { exact: true }).fill('2026-05-01');
  await page.getByRole('button', { name: 'Show usage' }).click();
  const toError = page.locator('.field', { has: page.getByLabel('To', { exact: true }) }).locator('.field-error');
  await toError.waitFor();
  t.match(await toError.textContent(), /before from/);
  rig.noScriptErrors();
});
