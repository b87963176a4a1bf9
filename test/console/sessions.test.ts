// The console's Sessions list and a session's page: filters, the timeline, the recording
// playable per speaker, analysis, latency, metadata, and a webhook delivery redelivered.
import t from 'tap';
import { connect, createSession, sessionRecord } from '../e2e/session-helpers.ts';
import { browserSkip, startConsole, startEndpoint } from './harness.ts';

t.test('sessions: filter, open one, play its recording, redeliver its webhook', { skip: browserSkip }, async (t) => {
  const hook = await startEndpoint(t);
  const rig = await startConsole(t, { allow: [hook] });
  const { page, app } = rig;
  const mk = async (name: string, extra: Record<string, unknown> = {}) => {
    const a = (await app.req('POST', '/v1/agent/agents', { name, config: { prompt: { first_message_mode: 'off' }, ...extra } })).body;
    t.equal((await app.req('POST', `/v1/agent/agents/${a.agent_id}/publish`)).status, 200);
    return a.agent_id as string;
  };
  const desk = await mk('Front desk', { webhooks: { post_call: [{ url: `${hook.url}/calls` }] }, analysis: { data_fields: [{ name: 'city', type: 'text' }] } });
  const other = await mk('Night line');
  const talk = async (agentId: string, text: string) => {
    const s = await createSession(app, agentId, { metadata: { order: 7 } });
    const caller = await connect(s);
    caller.convo.sendUserMessage(text);
    await caller.waitFor(() => caller.finals('agent').length > 0, 15_000, 'the answer');
    await caller.convo.hangup();
    await sessionRecord(app, s.session_id);
    return s.session_id as string;
  };
  const mine = await talk(desk, 'hello there, my city is Lyon');
  await talk(other, 'good night');

  await rig.open('/sessions');
  await page.getByRole('heading', { name: 'Sessions' }).waitFor();
  await page.getByRole('link', { name: mine }).waitFor();
  t.equal(await page.locator('tbody tr').count(), 2);
  await rig.check('sessions');
  await page.getByLabel('Agent').selectOption({ label: 'Front desk' });
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.waitForFunction(() => document.querySelectorAll('tbody tr').length === 1);
  t.same(await page.locator('tbody td:nth-child(2)').allTextContents(), ['Front desk'], 'filtered by agent');
  await page.getByLabel('Status').selectOption('failed');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.getByText('No sessions match these filters.').waitFor();
  await page.getByLabel('Status').selectOption('');
  const tomorrow = new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10);
  await page.getByLabel('From date').fill(tomorrow);
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.getByText('No sessions match these filters.').waitFor();
  await page.getByLabel('From date').fill('');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.getByRole('link', { name: mine }).click();

  // The session's page.
  await page.getByRole('heading', { name: 'Session', exact: true }).waitFor();
  const timeline = page.getByRole('list', { name: 'Timeline' });
  await timeline.getByText('User:hello there, my city is Lyon').waitFor();
  await timeline.getByText('Agent:You said: hello there, my city is Lyon').waitFor();
  await page.getByRole('img', { name: /Latency of each turn/ }).waitFor();
  t.ok(await page.getByRole('table', { name: 'Latency per turn' }).isVisible());
  t.match(await page.locator('pre').textContent(), /"order": 7/, 'metadata shown');
  const agentTrack = page.getByLabel(/^Agent track/);
  await agentTrack.waitFor();
  await page.waitForFunction(() => {
    const a = document.querySelector('audio[aria-labelledby="track-agent"]') as HTMLAudioElement | null;
    return !!a && a.readyState >= 1 && a.duration > 0;
  }, undefined, { timeout: 15_000 });
  t.pass('the agent\'s track loads in the player');
  t.ok(await page.getByLabel(/^Caller track/).count() === 1, 'a player per speaker');

  // The delivery arrives; Redeliver sends it again.
  const deadline = Date.now() + 20_000;
  while (!hook.requests.some((r) => r.body.includes('"call.ended"')) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const endedBefore = hook.requests.filter((r) => r.body.includes('"call.ended"')).length;
  t.equal(endedBefore, 1, 'call.ended delivered once');
  await page.getByRole('button', { name: 'Refresh deliveries' }).click();
  const row = page.getByRole('row', { name: /call\.ended/ });
  await row.getByText('delivered').waitFor();
  t.match(await row.textContent(), /1 of \d+/);
  await rig.check('session');
  await row.getByRole('button', { name: /Redeliver/ }).click();
  while (hook.requests.filter((r) => r.body.includes('"call.ended"')).length < 2 && Date.now() < deadline + 10_000) await new Promise((r) => setTimeout(r, 100));
  t.equal(hook.requests.filter((r) => r.body.includes('"call.ended"')).length, 2, 'redelivered');
  rig.noScriptErrors();
});
