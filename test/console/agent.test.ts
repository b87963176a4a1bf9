// The console's Agent page: the draft as a form, Save with exactly the changed fields, a 422
// next to its field, the unsaved-changes warning, Publish, versions, a version and the diff.
import t from 'tap';
import { browserSkip, makeVoice, startConsole } from './harness.ts';

t.test('edit, save, 422, publish, versions and the diff', { skip: browserSkip }, async (t) => {
  const rig = await startConsole(t);
  const { page, app } = rig;
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'Concierge' })).body;
  const tool = (await app.req('POST', '/v1/agent/tools', { name: 'lookup_order', url: 'https://tools.example.com/orders', arguments: [{ name: 'order_id' }] })).body;
  const voiceId = await makeVoice(app, 'Warm voice');

  await rig.open(`/agents/${agent.agent_id}`);
  await page.getByRole('heading', { name: 'Concierge' }).waitFor();
  await rig.check('agent');

  // Editing shows the warning; Save sends exactly what changed.
  await page.getByLabel('System prompt').fill('You are the concierge of Hotel Parley.');
  await page.getByRole('status').filter({ hasText: 'unsaved changes' }).waitFor();
  await page.getByLabel('Voice', { exact: true }).selectOption(voiceId);
  await page.getByRole('checkbox', { name: 'lookup_order' }).check();
  await page.getByLabel('Allowed origins').fill('https://hotel.example.com');
  const patches: { url: string; body: unknown }[] = [];
  page.on('request', (r) => { if (r.method() === 'PATCH') patches.push({ url: new URL(r.url()).pathname, body: r.postDataJSON() }); });
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Saved.').waitFor();
  t.same(patches, [
    { url: `/v1/agent/agents/${agent.agent_id}`, body: { allowed_origins: ['https://hotel.example.com'] } },
    { url: `/v1/agent/agents/${agent.agent_id}/config`, body: { prompt: { system_prompt: 'You are the concierge of Hotel Parley.' }, voice: { voice_id: voiceId }, tools: { tool_ids: [tool.tool_id] } } },
  ], 'PATCH carries exactly the changed fields');
  const stored = (await app.req('GET', `/v1/agent/agents/${agent.agent_id}/config`)).body;
  t.equal(stored.prompt.system_prompt, 'You are the concierge of Hotel Parley.');
  t.same(stored.tools.tool_ids, [tool.tool_id]);

  // The voice's sample plays.
  await page.getByRole('button', { name: 'Play voice sample' }).click();
  const player = page.getByLabel('Voice sample');
  await player.waitFor();
  await page.waitForFunction(() => { const a = document.querySelector('audio[aria-label="Voice sample"]') as HTMLAudioElement | null; return !!a && a.duration > 0; });

  // A 422 sits next to the field its loc names, and nothing is stored.
  await page.getByLabel('Maximum duration (seconds)').fill('5');
  await page.getByRole('button', { name: 'Save' }).click();
  const durationError = page.locator('.field', { has: page.getByLabel('Maximum duration (seconds)') }).locator('.field-error');
  await durationError.waitFor();
  t.match(await durationError.textContent(), /60/, 'the API\'s limit, next to the field');
  t.equal((await app.req('GET', `/v1/agent/agents/${agent.agent_id}/config`)).body.conversation.max_duration_seconds, 1800, 'nothing stored');
  await rig.check('agent-422');
  await page.getByLabel('Maximum duration (seconds)').fill('600');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Saved.').waitFor();

  // Publish with a title; the versions list shows it.
  await page.getByLabel('Version title').fill('Launch');
  await page.getByLabel('Version description').fill('First version for the front desk');
  await page.getByRole('button', { name: 'Publish', exact: true }).click();
  await page.getByRole('cell', { name: /Launch/ }).waitFor();
  const versions = (await app.req('GET', `/v1/agent/agents/${agent.agent_id}/versions`)).body.versions;
  t.same(versions.map((v: any) => [v.version_number, v.version_title]), [[1, 'Launch']]);

  // Change the draft, then compare: the changed setting is listed with both values.
  await page.getByLabel('First message', { exact: true }).fill('Welcome to Hotel Parley!');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Saved.').waitFor();
  await page.getByRole('button', { name: 'Compare version 1 with the draft' }).click();
  const row = page.getByRole('row', { name: /prompt\.first_message\b/ });
  await row.waitFor();
  t.match(await row.textContent(), /Hi! Thanks for calling.*Welcome to Hotel Parley!/);
  t.equal(await page.getByRole('row', { name: /conversation\.max_duration_seconds/ }).count(), 0, 'settings saved before publishing are not differences');
  await rig.check('agent-diff');
  await page.getByRole('button', { name: 'View version 1' }).click();
  await page.getByText('"system_prompt": "You are the concierge of Hotel Parley."').waitFor();
  rig.noScriptErrors();
});
