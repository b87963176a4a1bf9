// The console's Test call by microphone: Chromium's fake capture device plays a WAV of the
// synthetic engine asking a question; the question appears as the caller's transcript, the
// agent's answer is transcribed and its audio played (the SDK's browser audio helpers).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { fakeMicrophoneWav } from '../helpers/browser.ts';
import { browserSkip, startConsole } from './harness.ts';

const QUESTION = 'what is the weather in paris';

/** A second of silence, the question, four seconds of silence, for the fake microphone (its folder removed at teardown). */
const questionWav = (t: Test) => {
  const dir = mkdtempSync(join(os.tmpdir(), 'parley-mic-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return fakeMicrophoneWav(join(dir, 'question.wav'), QUESTION, 1000, 4000);
};

t.test('a test call by microphone: the question transcribed, the answer heard', { skip: browserSkip }, async (t) => {
  const rig = await startConsole(t, { launch: { fakeMicrophone: questionWav(t) }, server: { backendOptions: { pacing: 'realtime' } } });
  const { page, app } = rig;
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'Weather line', config: { prompt: { first_message_mode: 'off' } } })).body;
  t.equal((await app.req('POST', `/v1/agent/agents/${agent.agent_id}/publish`)).status, 200);

  await rig.open(`/agents/${agent.agent_id}/test`);
  await page.getByLabel('The published version').check();
  await page.getByRole('button', { name: 'Start call with microphone' }).click();
  const transcript = page.getByRole('list', { name: 'Transcript' });
  await transcript.getByText(`You:${QUESTION}`).waitFor({ timeout: 30_000 });
  await transcript.getByText(`Agent:You said: ${QUESTION}`).waitFor({ timeout: 30_000 });
  const heard = page.getByLabel('Agent audio heard');
  await page.waitForFunction(() => {
    const s = document.querySelector('[aria-label="Agent audio heard"]')?.textContent ?? '';
    return Number(/Heard ([\d.]+) s/.exec(s)?.[1] ?? 0) >= 1;
  }, undefined, { timeout: 30_000 });
  t.match(await heard.textContent(), /Heard [1-9][\d.]* s of the agent/, 'the agent\'s audio was played');
  const latency = page.getByRole('table', { name: 'Per turn, as it happened' });
  await latency.waitFor();
  t.notMatch(await latency.getByRole('row').nth(1).locator('td').first().textContent(), /—/, 'a spoken turn has its recognition time');
  await rig.check('test-call-microphone');

  await page.getByRole('button', { name: 'End call' }).click();
  const href = await page.getByRole('link', { name: 'Open the call\'s record' }).getAttribute('href');
  const record = (await app.req('GET', `/v1/agent/sessions/${href!.split('/')[2]}`)).body;
  t.same(record.items.filter((i: any) => i.type === 'message').map((i: any) => [i.role, i.content]), [['user', QUESTION], ['assistant', `You said: ${QUESTION}`]], 'the record has the spoken turn and the answer');
  rig.noScriptErrors();
});
