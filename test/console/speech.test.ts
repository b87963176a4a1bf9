// The console's Speech page: synthesis played and downloadable, a voice created from an
// uploaded sample and played, deleted; a file transcribed with word timings.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { decodeAudio } from '../../native/engines/synthetic/modem.ts';
import { parseWav } from '../../src/audio/index.ts';
import { browserSkip, speechWav, startConsole } from './harness.ts';

/** Waits until the page's player labelled `label` has loaded audio of some length. */
const playable = (page: import('playwright-core').Page, label: string) =>
  page.waitForFunction((l) => { const a = document.querySelector(`audio[aria-label="${l}"]`) as HTMLAudioElement | null; return !!a && a.duration > 0; }, label);

t.test('synthesize, create and play a voice, transcribe', { skip: browserSkip }, async (t) => {
  const rig = await startConsole(t);
  const { page, app } = rig;
  const dir = mkdtempSync(join(os.tmpdir(), 'parley-speech-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sample = join(dir, 'sample.wav');
  writeFileSync(sample, speechWav('this is my voice sample for the library'));
  const question = join(dir, 'question.wav');
  writeFileSync(question, speechWav('what time does breakfast start'));

  await rig.open('/speech');
  await page.getByText('No voices yet.').waitFor();

  // A voice from an uploaded sample; it plays.
  await page.getByRole('button', { name: 'Create voice' }).click();
  await page.locator('.field', { has: page.getByLabel('Samples', { exact: true }) }).locator('.field-error').waitFor();
  await page.getByLabel('Voice name').fill('Lobby voice');
  await page.getByLabel('Samples', { exact: true }).setInputFiles(sample);
  await page.getByRole('button', { name: 'Create voice' }).click();
  await page.getByRole('heading', { name: 'Lobby voice' }).waitFor();
  const [voice] = (await app.req('GET', '/model?self=true')).body.items;
  t.equal(voice.title, 'Lobby voice');
  await page.getByRole('button', { name: 'Play Lobby voice' }).click();
  await playable(page, 'Sample of Lobby voice');
  t.pass('the voice\'s sample plays');

  // Synthesis with that voice, as WAV: played, and the download is the same audio.
  await page.getByLabel('Text', { exact: true }).fill('Breakfast starts at seven');
  await page.getByLabel('Voice', { exact: true }).selectOption({ label: 'Lobby voice' });
  await page.getByLabel('Format', { exact: true }).selectOption('wav');
  await page.getByLabel('Speed', { exact: true }).fill('1.2');
  await page.getByRole('button', { name: 'Synthesize and play' }).click();
  await playable(page, 'Synthesized speech');
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download' }).click()]);
  t.equal(download.suggestedFilename(), 'speech.wav');
  const bytes = await new Promise<Buffer>((resolve, reject) => {
    download.createReadStream().then((s) => { const parts: Buffer[] = []; s.on('data', (c: Buffer) => parts.push(c)); s.on('end', () => resolve(Buffer.concat(parts))); s.on('error', reject); }, reject);
  });
  const wav = parseWav(new Uint8Array(bytes));
  t.ok(wav, 'a WAV file');
  const pcm = new Int16Array(bytes.buffer.slice(bytes.byteOffset + wav!.dataOffset, bytes.byteOffset + wav!.dataOffset + wav!.dataBytes - (wav!.dataBytes % 2)));
  t.equal(decodeAudio(pcm, wav!.sampleRateHz)?.text, 'Breakfast starts at seven', 'the synthetic engine spoke the text');
  await rig.check('speech');

  // Transcription with word timings.
  await page.getByLabel('Audio file', { exact: true }).setInputFiles(question);
  await page.getByRole('button', { name: 'Transcribe' }).click();
  await page.getByLabel('Transcribed text').filter({ hasText: 'what time does breakfast start' }).waitFor();
  const words = page.getByRole('table', { name: 'Word timings' });
  await words.waitFor();
  t.same(await words.locator('tbody td:first-child').allTextContents(), ['what', 'time', 'does', 'breakfast', 'start']);

  // Delete the voice.
  await page.getByRole('button', { name: 'Delete Lobby voice' }).click();
  await page.getByRole('group', { name: /Delete the voice/ }).getByRole('button', { name: 'Delete' }).click();
  await page.getByText('No voices yet.').waitFor();
  t.equal((await app.req('GET', `/model/${voice._id}`)).status, 404, 'deleted');
  rig.noScriptErrors();
});
