// The SDK's browser bundle as pages use it, in Chromium against a real platform (synthetic
// backend): served at /sdk/parley-client.js and imported by a page on another origin for a
// public agent (allowed and refused origins, the visitor's time zone); and the audio helpers in
// a page under the platform's own CSP, with a fake microphone playing a WAV of a question
// spoken by the synthetic engine over the agent's opener (barge-in), and the speaker's stop.
// (`options.microphone`, which start() opens itself, is the same helper: test/client/speaker.test.ts.)
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Browser, Page } from 'playwright-core';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { browserSkip, fakeMicrophoneWav, launchBrowser, VIEWPORTS } from '../helpers/browser.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { assertBuilt, DIST } from './sdk-build.ts';

/** The SDK's interface, for the code the pages run (it imports the served bundle by URL). */
type Sdk = typeof import('../../src/client/index.ts');
const SDK_PATH = '/sdk/parley-client.js';

const QUESTION = 'What is the capital of France?';
const OPENER = 'Welcome to the Parley test line. I am going to talk for quite a while now, so that you have plenty of time to interrupt me whenever you like.';

/** A page server on its own origin (a shop embedding the SDK): every path answers one blank page. */
async function pageServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><html lang="en"><title>Shop</title><h1>Shop</h1></html>');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port };
}

const skip = browserSkip;
if (skip) {
  t.test('the SDK in a browser', { skip }, () => {});
} else {
  assertBuilt();
  const tmp = mkdtempSync(join(os.tmpdir(), 'parley-sdk-browser-'));
  // The platform serves a blank page at / (where the console lives) under its console CSP, and
  // the SDK files the build made: the audio pages run exactly where the console will.
  const web = join(tmp, 'web');
  mkdirSync(join(web, 'console'), { recursive: true });
  writeFileSync(join(web, 'console/index.html'), '<!doctype html><html lang="en"><title>Parley</title><h1>Parley</h1></html>');
  mkdirSync(join(web, 'sdk'));
  for (const name of readdirSync(join(DIST, 'sdk'))) copyFileSync(join(DIST, 'sdk', name), join(web, 'sdk', name));
  const wav = join(tmp, 'question.wav');
  fakeMicrophoneWav(wav, QUESTION, 1000, 4000);

  const app: TestServer = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' }, webDir: web });
  const shop = await pageServer();
  const browser: Browser = await launchBrowser({ fakeMicrophone: wav });
  t.teardown(async () => {
    await browser.close();
    await new Promise((r) => shop.server.close(r));
    await app.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  async function open(origin: string, timezoneId?: string): Promise<{ page: Page; requests: string[]; errors: string[] }> {
    const ctx = await browser.newContext({ viewport: VIEWPORTS.desktop, ...(timezoneId ? { timezoneId } : {}) });
    await ctx.grantPermissions(['microphone'], { origin });
    // tsx names the functions of this file with a `__name` helper that the page does not have.
    await ctx.addInitScript('globalThis.__name = (f) => f;');
    t.teardown(() => ctx.close());
    const page = await ctx.newPage();
    const requests: string[] = [];
    const errors: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('requestfailed', (r) => errors.push(`${r.url()}: ${r.failure()?.errorText}`));
    // Failed loads by URL (the console's own line names none); the browser's own favicon probe aside.
    page.on('response', (r) => { if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) errors.push(`${r.url()}: ${r.status()}`); });
    await page.goto(`${origin}/`);
    return { page, requests, errors };
  }

  t.test('a page on another origin imports /sdk/parley-client.js and talks to a public agent', async (t) => {
    const origin = `http://localhost:${shop.port}`;
    const agentId = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } }, public_enabled: true, allowed_origins: [origin] });
    const { page, requests, errors } = await open(origin, 'Asia/Tokyo');
    const result = await page.evaluate(async ({ sdkUrl, baseUrl, agentId }) => {
      const sdk: Sdk = await import(sdkUrl);
      const convo = await sdk.startPublic({ baseUrl, agentId, metadata: { from: 'page' } });
      const replies: string[] = [];
      convo.on('transcript', (x: { role: string; final: boolean; text: string }) => {
        if (x.role === 'agent' && x.final) replies.push(x.text);
      });
      convo.sendUserMessage('Hello from the shop page', { audio: false });
      for (let i = 0; i < 500 && replies.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      const end = await convo.hangup();
      return { sessionId: convo.sessionId as string, replies, end, zone: Intl.DateTimeFormat().resolvedOptions().timeZone };
    }, { sdkUrl: `${app.url}${SDK_PATH}`, baseUrl: app.url, agentId });
    t.same(errors, [], 'no page errors');
    t.equal(result.zone, 'Asia/Tokyo', 'the page runs in the time zone the test gave it');
    t.same(result.replies, ['You said: Hello from the shop page'], 'a message typed at once waits for the agent to be live, and is answered');
    t.equal(result.end.reason, 'user_hangup');
    const rec = await app.req('GET', `/v1/agent/sessions/${result.sessionId}`);
    t.equal(rec.status, 200);
    t.equal(rec.body.client_timezone, 'Asia/Tokyo', 'the SDK filled client_timezone from the browser');
    t.same(rec.body.metadata, { from: 'page' });
    t.notOk(requests.some((u) => u.includes('livekit')), 'the livekit-client chunk is never fetched by a websocket session');
    t.ok(requests.includes(`${app.url}${SDK_PATH}`));
  });

  t.test('a refused origin, and an agent that is not public, reject as session_refused with the platform message', async (t) => {
    const allowed = `http://localhost:${shop.port}`;
    const refused = `http://127.0.0.1:${shop.port}`; // the same server under another origin
    const agentId = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } }, public_enabled: true, allowed_origins: [allowed] });
    const privateAgent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } }, public_enabled: false, allowed_origins: [refused] });
    const { page } = await open(refused);
    const outcomes = await page.evaluate(async ({ sdkUrl, baseUrl, ids }) => {
      const sdk: Sdk = await import(sdkUrl);
      const out = [];
      for (const agentId of ids) {
        try {
          await sdk.startPublic({ baseUrl, agentId });
          out.push({ ok: true });
        } catch (e) {
          const err = e as { name: string; code: string; status: number; message: string };
          out.push({ name: err.name, code: err.code, status: err.status, message: err.message, isClientError: e instanceof sdk.ClientError });
        }
      }
      return out;
    }, { sdkUrl: `${app.url}${SDK_PATH}`, baseUrl: app.url, ids: [agentId, privateAgent] });
    t.same(outcomes, [
      { name: 'ClientError', code: 'session_refused', status: 403, message: 'Session refused (403): Origin not allowed', isClientError: true },
      { name: 'ClientError', code: 'session_refused', status: 403, message: 'Session refused (403): Agent is not public', isClientError: true },
    ]);
  });

  t.test('microphone and speaker: the question spoken over the opener interrupts it, is recognized and answered', async (t) => {
    const agentId = await makeAgent(app, {
      config: { prompt: { first_message_mode: 'fixed', first_message: OPENER }, conversation: { eagerness: 'eager', interruptible: true, interruption_sensitivity: 'high' } },
      public_enabled: true,
      allowed_origins: [app.url],
    });
    const { page, errors } = await open(app.url);
    const csp = await page.evaluate(async () => (await fetch('/')).headers.get('content-security-policy'));
    t.match(csp, /script-src 'self'/, 'the page runs under the console CSP');
    const r = await page.evaluate(async ({ agentId, sdkUrl }) => {
      const sdk: Sdk = await import(sdkUrl);
      const microphone = sdk.browserMicrophone();
      const speaker = sdk.browserSpeaker();
      const log: { state?: string; role?: string; text?: string; final?: boolean; playedMs: number }[] = [];
      const convo = await sdk.startPublic({ baseUrl: location.origin, agentId }, { speaker });
      let stoppedAt: number | null = null;
      let playedAtAnswer: number | null = null;
      let receivedAtAnswer: number | null = null;
      let receivedMs = 0;
      convo.on('audio', (pcm: Int16Array) => { receivedMs += pcm.length / 16; });
      let before: string = convo.state;
      convo.on('state', (state: string) => {
        log.push({ state, playedMs: speaker.playedMs });
        if (before === 'speaking' && state === 'listening' && stoppedAt === null) {
          // The worklet acknowledges the stop with the exact count of what it had played.
          setTimeout(() => { stoppedAt = speaker.playedMs; }, 300);
        }
        if (state === 'speaking' && stoppedAt !== null && playedAtAnswer === null) {
          playedAtAnswer = speaker.playedMs;
          receivedAtAnswer = receivedMs;
        }
        before = state;
      });
      const finals: { role: string; text: string }[] = [];
      convo.on('transcript', (x: { role: string; text: string; final: boolean }) => { if (x.final) finals.push({ role: x.role, text: x.text }); });
      // The caller unmutes while the agent speaks (the fake device plays its file from then on),
      // however long the opener took to start.
      for (let i = 0; i < 1000 && convo.state !== 'speaking'; i++) await new Promise((r) => setTimeout(r, 20));
      const frameSamples = new Set<number>();
      const stopMicrophone = await microphone.start((pcm: Int16Array) => {
        frameSamples.add(pcm.length);
        convo.sendAudio(pcm);
      });
      for (let i = 0; i < 1500 && finals.filter((f) => f.role === 'agent').length < 2; i++) await new Promise((r) => setTimeout(r, 20));
      for (let i = 0; i < 500 && convo.state !== 'idle'; i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300)); // the worklet's last position report
      const playedAtEnd = speaker.playedMs;
      stopMicrophone();
      const end = await convo.hangup();
      const deviceRateHz = new AudioContext().sampleRate;
      return { finals, log, stoppedAt, playedAtAnswer, receivedAtAnswer, playedAtEnd, end, captureRateHz: microphone.sampleRateHz, deviceRateHz, frameSamples: [...frameSamples], sessionId: convo.sessionId };
    }, { agentId, sdkUrl: SDK_PATH });
    t.same(errors, [], 'no page errors');
    t.ok(r.deviceRateHz > 16_000 && r.captureRateHz === r.deviceRateHz, `captured at the device's rate (${r.captureRateHz} Hz), sent at 16 kHz`);
    t.same(r.frameSamples, [640], 'every frame the microphone sent was 40 ms (640 samples at 16 kHz), the default');
    const agent = r.finals.filter((f) => f.role === 'agent').map((f) => f.text);
    const user = r.finals.filter((f) => f.role === 'user').map((f) => f.text);
    t.same(user, [QUESTION], 'the question was recognized from the microphone');
    t.equal(agent.length, 2, `the opener and the answer: ${JSON.stringify(agent)}`);
    t.ok(agent[0]!.length > 0 && agent[0]!.length < OPENER.length && OPENER.startsWith(agent[0]!), `the opener was cut short: ${JSON.stringify(agent[0])}`);
    t.equal(agent[1], `You said: ${QUESTION}`, 'the question was answered');
    t.ok(r.log.some((e, i) => i > 0 && r.log[i - 1]!.state === 'speaking' && e.state === 'listening'), 'barge-in: speaking → listening');
    t.ok(r.stoppedAt !== null && r.stoppedAt > 0, `some of the opener played before the barge-in (${r.stoppedAt} ms)`);
    t.ok(r.stoppedAt! < (OPENER.length * 60) / 2, 'and far from all of it');
    t.equal(r.playedAtAnswer, r.stoppedAt, 'nothing played between the barge-in and the answer');
    // The speaker plays all it is given unless stopped: what arrived and never played was dropped.
    t.ok(r.receivedAtAnswer! - r.playedAtAnswer! > 5, `the opener's queued audio was dropped at the barge-in (${(r.receivedAtAnswer! - r.playedAtAnswer!).toFixed(1)} ms)`);
    t.ok(r.playedAtEnd > r.playedAtAnswer! + 1000, `the answer played (${r.playedAtEnd - r.playedAtAnswer!} ms)`);
    t.equal(r.end.reason, 'user_hangup');
  });

  t.test('the speaker: stop() silences queued audio at once and plays what comes after', async (t) => {
    const { page, errors } = await open(app.url);
    const r = await page.evaluate(async (sdkUrl) => {
      const sdk: Sdk = await import(sdkUrl);
      const speaker = sdk.browserSpeaker();
      await speaker.ready;
      const tone = (ms: number) => {
        const pcm = new Int16Array(16 * ms);
        for (let i = 0; i < pcm.length; i++) pcm[i] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 16_000));
        return pcm;
      };
      const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
      for (let k = 0; k < 150; k++) speaker.play(tone(20)); // 3 s queued
      for (let i = 0; i < 500 && speaker.playedMs < 500; i++) await sleep(10);
      const bufferedBefore = speaker.bufferedMs;
      speaker.stop();
      const bufferedAfter = speaker.bufferedMs;
      await sleep(400);
      const a = speaker.playedMs;
      await sleep(400);
      const b = speaker.playedMs;
      speaker.play(tone(1000));
      for (let i = 0; i < 500 && speaker.playedMs < b + 1000; i++) await sleep(10);
      const c = speaker.playedMs;
      speaker.close();
      return { bufferedBefore, bufferedAfter, a, b, c };
    }, SDK_PATH);
    t.same(errors, [], 'no page errors');
    t.ok(r.bufferedBefore > 100, `audio was queued when stopped (${r.bufferedBefore} ms)`);
    t.equal(r.bufferedAfter, 0);
    t.ok(r.a >= 500 && r.a < 2900, `played ${r.a} ms of 3000, then stopped`);
    t.equal(r.b, r.a, 'nothing more played after the stop');
    // In full but for the resampling filter's half-width (0.5 ms), held until more audio comes.
    t.ok(r.c - r.b > 999 && r.c - r.b <= 1000, `audio played after the stop plays in full (${r.c - r.b} ms)`);
  });
}
