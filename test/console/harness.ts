/**
 * Browser tests of the console: a real platform (embedded store, synthetic backend) serving a
 * console built for this test file, Debian's Chromium driving it as a person would (controls
 * found by their labels), screenshots at both sizes and an axe pass on every page checked.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Test } from 'tap';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { int16ToPcmBytes, wavHeader } from '../../src/audio/index.ts';
import { launchBrowser, newContext, screenshotBoth, seriousA11yViolations, type LaunchOptions } from '../helpers/browser.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

export { browserSkip } from '../helpers/browser.ts';

const BUILD = fileURLToPath(new URL('../../scripts/build.mjs', import.meta.url));

export interface ConsoleRig {
  app: TestServer;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** Opens `path` signed in (the key pasted into the sign-in form once per context). */
  open(path: string): Promise<Page>;
  /** Asserts the page logged no script error so far (call at the end of a test). */
  noScriptErrors(): void;
  /** Screenshots at 1280×800 and 390×844, no horizontal overflow, no serious axe violation. */
  check(name: string, target?: Page): Promise<void>;
}

/** Builds the console into a folder of this test file's own and starts the platform on it. */
export async function startConsole(t: Test, opts: { launch?: LaunchOptions; server?: Parameters<typeof startTestServer>[0]; allow?: Endpoint[] } = {}): Promise<ConsoleRig> {
  // Local endpoints (tools, webhooks) pass the SSRF guard: at write time it reads the
  // environment, at call time the platform's configuration.
  const allow = (opts.allow ?? []).map((e) => `127.0.0.1:${e.port}`);
  if (allow.length) {
    const saved = process.env.PARLEY_OUTBOUND_ALLOW;
    process.env.PARLEY_OUTBOUND_ALLOW = allow.join(',');
    t.teardown(() => {
      if (saved === undefined) delete process.env.PARLEY_OUTBOUND_ALLOW;
      else process.env.PARLEY_OUTBOUND_ALLOW = saved;
    });
  }
  const webDir = mkdtempSync(join(os.tmpdir(), 'parley-console-'));
  t.teardown(() => rmSync(webDir, { recursive: true, force: true }));
  const built = spawnSync(process.execPath, [BUILD, '--out', webDir], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`console build failed: ${built.stderr}`);
  const app = await startTestServer({ backend: 'synthetic', ...opts.server, config: { outboundAllow: allow, ...opts.server?.config }, webDir });
  t.teardown(() => app.close());
  const browser = await launchBrowser(opts.launch);
  t.teardown(() => browser.close());
  const context = await newContext(browser, app.url);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of (4\d\d)/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });
  let signedIn = false;
  const rig: ConsoleRig = {
    app, browser, context, page,
    noScriptErrors: () => t.same(problems, [], 'no script errors in the page'),
    async open(path) {
      if (!signedIn) {
        await page.goto(app.url + '/');
        await page.getByLabel('API key').fill(app.key);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByRole('navigation', { name: 'Main' }).waitFor();
        signedIn = true;
      }
      await page.goto(app.url + path);
      return page;
    },
    async check(name, target = page) {
      const shots = await screenshotBoth(target, name);
      t.equal(shots.desktop.overflow, 0, `${name}: no horizontal overflow at 1280×800`);
      t.equal(shots.phone.overflow, 0, `${name}: no horizontal overflow at 390×844`);
      const violations = await seriousA11yViolations(target);
      t.same(violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`), [], `${name}: no serious or critical axe violations`);
    },
  };
  return rig;
}

/** A mono 16-bit WAV of the synthetic engine speaking `text` (its recognizer reads it back exactly). */
export function speechWav(text: string, rateHz = 24_000, silenceMs = 0): Uint8Array<ArrayBuffer> {
  const speech = encodeText(text, { sampleRateHz: rateHz }).pcm;
  const pcm = new Int16Array(speech.length + Math.round((silenceMs * rateHz) / 1000));
  pcm.set(speech);
  const data = int16ToPcmBytes(pcm);
  const out = new Uint8Array(44 + data.byteLength);
  out.set(wavHeader(rateHz, data.byteLength));
  out.set(data, 44);
  return out;
}

/** Creates a voice in the team's library from one synthetic sample; returns its id. */
export async function makeVoice(app: TestServer, title: string): Promise<string> {
  const form = new FormData();
  form.set('type', 'tts');
  form.set('title', title);
  form.set('train_mode', 'fast');
  form.set('voices', new Blob([speechWav('this is my voice sample for the library')], { type: 'audio/wav' }), 'sample.wav');
  const r = await fetch(`${app.url}/model`, { method: 'POST', headers: app.auth, body: form });
  if (r.status !== 201) throw new Error(`voice: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { _id: string })._id;
}

export interface Endpoint {
  url: string;
  port: number;
  requests: { method: string; path: string; headers: Record<string, string | string[] | undefined>; body: string }[];
  /** What the next requests get (default 200 `{"ok":true}`). */
  reply: { status: number; body: string };
}

/** A local HTTP endpoint standing in for a customer's tool or webhook receiver; closed in teardown. */
export async function startEndpoint(t: Test): Promise<Endpoint> {
  const { createServer } = await import('node:http');
  const ep: Endpoint = { url: '', port: 0, requests: [], reply: { status: 200, body: '{"ok":true}' } };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      ep.requests.push({ method: req.method!, path: req.url!, headers: req.headers, body });
      res.writeHead(ep.reply.status, { 'Content-Type': 'application/json' }).end(ep.reply.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  ep.port = (server.address() as { port: number }).port;
  ep.url = `http://127.0.0.1:${ep.port}`;
  t.teardown(() => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }));
  return ep;
}
