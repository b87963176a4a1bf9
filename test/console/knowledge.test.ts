// The console's Knowledge page: upload a text file, the list, the agents using it, delete (409 explained).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { browserSkip, startConsole } from './harness.ts';

t.test('upload, list, used by, delete', { skip: browserSkip }, async (t) => {
  const rig = await startConsole(t);
  const { page, app } = rig;
  const dir = mkdtempSync(join(os.tmpdir(), 'parley-kb-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'hours.md');
  writeFileSync(file, '# Opening hours\n\nThe hotel desk is open from 7 am to 11 pm every day.\n\nBreakfast is served from 7 to 10.\n');

  await rig.open('/knowledge');
  await page.getByText('No knowledge sources yet.').waitFor();
  await page.getByRole('button', { name: 'Upload', exact: true }).click();
  const fileError = page.locator('.field', { has: page.getByLabel('Text file', { exact: true }) }).locator('.field-error');
  await fileError.waitFor();
  await page.getByLabel('Text file', { exact: true }).setInputFiles(file);
  await page.getByLabel('Name').fill('Hotel hours');
  await page.getByRole('button', { name: 'Upload', exact: true }).click();
  await page.getByRole('status').filter({ hasText: /Uploaded Hotel hours: \d+ passages indexed/ }).waitFor();
  await page.getByRole('heading', { name: 'Hotel hours' }).waitFor();
  const [source] = (await app.req('GET', '/v1/agent/knowledge-sources')).body.knowledge_sources;
  t.equal(source.name, 'Hotel hours');
  t.equal(source.file_name, 'hours.md');
  const content = (await app.req('GET', `/v1/agent/knowledge-sources/${source.knowledge_source_id}`)).body;
  t.match(JSON.stringify(content), /open from 7 am to 11 pm/, 'the file\'s text is stored');
  await page.getByText('Used by: no agent').waitFor();

  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'Desk', config: { knowledge_base: { enabled: true, knowledge_source_ids: [source.knowledge_source_id] } } })).body;
  await page.reload();
  await page.getByRole('link', { name: 'Desk' }).waitFor();
  await rig.check('knowledge');
  await page.getByRole('button', { name: 'Delete Hotel hours' }).click();
  await page.getByRole('group', { name: 'Delete Hotel hours?' }).getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('alert').filter({ hasText: 'attached to 1 agent' }).filter({ hasText: 'Remove it from the Knowledge section' }).waitFor();
  await app.req('PATCH', `/v1/agent/agents/${agent.agent_id}/config`, { knowledge_base: { knowledge_source_ids: [] } });
  await page.getByRole('button', { name: 'Delete Hotel hours' }).click();
  await page.getByRole('group', { name: 'Delete Hotel hours?' }).getByRole('button', { name: 'Delete' }).click();
  await page.getByText('No knowledge sources yet.').waitFor();
  t.equal((await app.req('GET', `/v1/agent/knowledge-sources/${source.knowledge_source_id}`)).status, 404, 'deleted');
  rig.noScriptErrors();
});
