// The embeddable widget in Chromium: `<parley-agent>` loaded by one script tag from the platform
// (`/widget.js`) on a shop page served from another origin, under a strict CSP, against a real
// platform (synthetic backend: recognition and answers are deterministic). Public agents from
// an allowed origin end to end (typed turns, a client tool, the session in the owner's history),
// a refused origin's 403 state, a private agent through sessionTokenProvider, the fake
// microphone, attributes and theming; screenshots at desktop and phone widths.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { browserSkip, fakeMicrophoneWav, launchBrowser, screenshotBoth, seriousA11yViolations, VIEWPORTS } from '../helpers/browser.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { DIST, ROOT } from '../client/sdk-build.ts';

const QUESTION = 'What is the capital of France?';

/** What the shop's own page script does: records the widget's events, gives it client tools and a token provider. */
const PAGE_JS = `
window.__events = [];
for (const type of ['parley:connect', 'parley:message', 'parley:tool-call', 'parley:end', 'parley:error', 'parley:state'])
  document.addEventListener(type, (e) => window.__events.push({ type, detail: e.detail }));
const el = document.querySelector('parley-agent');
el.clientTools = { showProduct: (params) => ({ shown: params.sku }) };
if (el.dataset.provider) el.sessionTokenProvider = async () => {
  const res = await fetch(el.dataset.provider, { method: 'POST' });
  if (!res.ok) throw new Error('the shop could not start a call');
  return res.json();
};
`;
const PAGE_CSS = 'body { font-family: Georgia, serif; margin: 2rem; } parley-agent.themed { --parley-accent: rgb(0, 110, 60); }';

function newest(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((n) => newest(join(path, n))));
}

/** Throws unless dist/embed/widget.js is at least as new as its sources (npm test rebuilds it; a file run by hand may not). */
function assertWidgetBuilt(): void {
  const file = join(DIST, 'embed/widget.js');
  if (!existsSync(file)) throw new Error('dist/embed/widget.js is missing: run npm install (or node scripts/build.mjs)');
  const source = Math.max(...['src/widget', 'src/client', 'scripts/build.mjs'].map((p) => newest(join(ROOT, p))));
  if (source > statSync(file).mtimeMs) throw new Error('dist/embed/widget.js is older than its sources: run node scripts/build.mjs (npm test does)');
}

interface Shop {
  server: Server;
  port: number;
  /** Page HTML by path. */
  pages: Map<string, string>;
}

/**
 * The shop: pages by path under a CSP that allows scripts only from itself and the platform, no
 * inline script or style; `POST /session/{agent}` is the shop's backend creating a private
 * agent's session with its API key (the key never reaches the page).
 */
async function shopServer(app: TestServer): Promise<Shop> {
  const pages = new Map<string, string>();
  const platformWs = app.url.replace(/^http/, 'ws');
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://shop');
    if (req.method === 'POST' && url.pathname.startsWith('/session/')) {
      const r = await fetch(`${app.url}/v1/agent/sessions`, {
        method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' },
        body: JSON.stringify({ agent_id: url.pathname.slice('/session/'.length), end_user_id: 'customer-7', metadata: { via: 'shop-backend' } }),
      });
      res.writeHead(r.status, { 'Content-Type': 'application/json' });
      res.end(await r.text());
      return;
    }
    if (url.pathname === '/page.js') {
      res.writeHead(200, { 'Content-Type': 'text/javascript' });
      res.end(PAGE_JS);
      return;
    }
    if (url.pathname === '/page.css') {
      res.writeHead(200, { 'Content-Type': 'text/css' });
      res.end(PAGE_CSS);
      return;
    }
    const html = pages.get(url.pathname);
    if (!html) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, {
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Security-Policy': `default-src 'self'; script-src 'self' ${app.url}; style-src 'self'; connect-src 'self' ${app.url} ${platformWs}; img-src 'self' data:`,
    });
    res.end(html);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, port: (server.address() as AddressInfo).port, pages };
}

/** A shop page embedding the widget with `attrs` (attribute values escaped for HTML). */
function shopPage(app: TestServer, attrs: Record<string, string>, load: 'async' | 'defer'): string {
  const esc = (v: string) => v.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  const a = Object.entries(attrs).map(([k, v]) => ` ${k}="${esc(v)}"`).join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Shop</title><link rel="stylesheet" href="/page.css"></head>
<body><main><h1>Shop</h1><p>Lamps, chairs and tables.</p></main>
<parley-agent${a}></parley-agent>
<script src="/page.js"></script>
<script src="${app.url}/widget.js" ${load}></script>
</body></html>`;
}

interface Opened {
  page: Page;
  context: BrowserContext;
  requests: string[];
  errors: string[];
}

const skip = browserSkip;
if (skip) {
  t.test('the widget in a browser', { skip }, () => {});
} else {
  assertWidgetBuilt();
  const tmp = mkdtempSync(join(os.tmpdir(), 'parley-widget-'));
  // The platform serves the built widget and SDK files (dist/embed, dist/sdk) from a copy.
  const web = join(tmp, 'web');
  for (const dir of ['sdk', 'embed']) {
    mkdirSync(join(web, dir), { recursive: true });
    for (const name of readdirSync(join(DIST, dir))) copyFileSync(join(DIST, dir, name), join(web, dir, name));
  }
  const wav = join(tmp, 'question.wav');
  fakeMicrophoneWav(wav, QUESTION, 1500, 4000);

  const app: TestServer = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' }, webDir: web });
  const shop = await shopServer(app);
  const shopOrigin = `http://localhost:${shop.port}`;
  // No fake device: getUserMedia finds no microphone, and the widget goes on in text.
  const browser: Browser = await launchBrowser();
  const voiceBrowser: Browser = await launchBrowser({ fakeMicrophone: wav });
  t.teardown(async () => {
    await browser.close();
    await voiceBrowser.close();
    await new Promise((r) => shop.server.close(r));
    await app.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  let pageCount = 0;
  // `load`: the usual snippet loads /widget.js async; the pages that give properties from a page
  // script load it deferred, so the property is there before the element asks for its config.
  async function open(attrs: Record<string, string>, o: { origin?: string; viewport?: { width: number; height: number }; browser?: Browser; load?: 'async' | 'defer' } = {}): Promise<Opened> {
    const origin = o.origin ?? shopOrigin;
    const path = `/p${++pageCount}`;
    shop.pages.set(path, shopPage(app, attrs, o.load ?? 'defer'));
    const context = await (o.browser ?? browser).newContext({ viewport: o.viewport ?? VIEWPORTS.desktop });
    await context.grantPermissions(['microphone'], { origin });
    await context.addInitScript('globalThis.__name = (f) => f;');
    t.teardown(() => context.close());
    const page = await context.newPage();
    const requests: string[] = [];
    const errors: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    page.on('pageerror', (e) => errors.push(String(e)));
    // Failed loads by URL (the console's own line names none); the browser's favicon probe aside.
    page.on('response', (r) => { if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) errors.push(`${r.url()}: ${r.status()}`); });
    await page.goto(`${origin}${path}`);
    return { page, context, requests, errors };
  }
  const events = (page: Page) => page.evaluate(() => (window as unknown as { __events: { type: string; detail: any }[] }).__events);
  const widget = (page: Page) => page.locator('parley-agent');
  const named = async (name: string, o: Record<string, unknown> = {}) => {
    const id = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager', record_audio: false } }, ...o });
    await app.req('PATCH', `/v1/agent/agents/${id}`, { name });
    await app.req('POST', `/v1/agent/agents/${id}/publish`);
    return id;
  };

  t.test('an allowed origin: the launcher starts a call, typed turns are answered, a client tool runs, the session is the owner\'s', async (t) => {
    const tool = await app.req('POST', '/v1/agent/tools', { tool_type: 'client', name: 'showProduct', description: 'Shows a product on screen', arguments: [{ name: 'sku' }] });
    t.equal(tool.status, 201);
    const agentId = await named('Boutique helper', { public_enabled: true, allowed_origins: [shopOrigin], config: { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager', record_audio: false }, tools: { tool_ids: [tool.body.tool_id] } } });
    const { page, requests, errors } = await open({ 'agent-id': agentId, 'user-id': 'visitor-42', greeting: 'Questions about an order? Ask away.', 'dynamic-variables': '{"customer":"Ada","orders":3}', language: 'en-GB' }, { load: 'async' });
    const w = widget(page);
    const launcher = w.getByRole('button', { name: 'Talk to Boutique helper' });
    await launcher.waitFor();
    t.equal(await launcher.getAttribute('aria-expanded'), 'false');
    await screenshotBoth(page, 'widget-launcher');

    await launcher.click();
    const dialog = w.getByRole('dialog', { name: 'Boutique helper' });
    await dialog.waitFor();
    await w.getByText('The microphone is unavailable: type your messages instead.').waitFor();
    const input = w.getByRole('textbox', { name: 'Message' });
    await input.fill('Hello from the widget');
    await input.press('Enter');
    await w.getByRole('log').getByText('You said: Hello from the widget').waitFor();
    await input.fill('Please showProduct, sku is K-9.');
    await w.getByRole('button', { name: 'Send' }).click();
    await w.getByText('Used showProduct').waitFor();
    await w.getByText('showProduct returned: {"shown":"K-9"}').waitFor();
    t.same(await seriousA11yViolations(page), [], 'no serious accessibility violations (the shadow root included)');
    const shots = await screenshotBoth(page, 'widget-call');
    t.equal(shots.desktop.overflow, 0, 'no horizontal overflow at 1280 px');
    t.equal(shots.phone.overflow, 0, 'no horizontal overflow at 390 px');
    const box = await dialog.boundingBox();
    t.ok(box && box.x >= 0 && box.x + box.width <= VIEWPORTS.desktop.width, 'the card fits the viewport');

    await w.getByRole('button', { name: 'End call' }).click();
    await w.getByText('You ended the call').waitFor();
    await w.getByRole('button', { name: 'New call' }).waitFor();

    const ev = await events(page);
    const connect = ev.find((e) => e.type === 'parley:connect');
    t.ok(connect, 'parley:connect');
    const sessionId = connect!.detail.sessionId as string;
    t.match(sessionId, /^sess_/);
    const messages = ev.filter((e) => e.type === 'parley:message' && e.detail.final).map((e) => [e.detail.role, e.detail.text, e.detail.typed]);
    t.same(messages, [
      ['user', 'Hello from the widget', true],
      ['agent', 'You said: Hello from the widget', false],
      ['user', 'Please showProduct, sku is K-9.', true],
      ['agent', 'showProduct returned: {"shown":"K-9"}', false],
    ]);
    const tools = ev.filter((e) => e.type === 'parley:tool-call').map((e) => [e.detail.toolName, e.detail.status]);
    t.same(tools, [['showProduct', 'started'], ['showProduct', 'requested'], ['showProduct', 'completed']], 'tool activity as page events (the platform announces the call, then asks the page)');
    t.same(ev.filter((e) => e.type === 'parley:end').map((e) => e.detail), [{ sessionId, reason: 'user_hangup' }]);
    t.match(ev.find((e) => e.type === 'parley:error')?.detail, { code: 'audio_unavailable' }, 'the missing microphone is reported, the call goes on');

    const rec = await app.req('GET', `/v1/agent/sessions/${sessionId}`);
    t.equal(rec.status, 200, 'the session is in the owner\'s history');
    t.equal(rec.body.end_user_id, 'visitor-42', 'user-id became end_user_id');
    t.match(rec.body.dynamic_variables, { customer: 'Ada', orders: 3 }, 'dynamic-variables reached the session');
    t.same(rec.body.overrides, {}, 'language is no override for an agent that does not take it from visitors');
    t.equal(await dialog.getAttribute('lang'), 'en-GB', 'but it is the card\'s language');
    t.equal(rec.body.agent_id, agentId);
    const list = await app.req('GET', `/v1/agent/sessions?agent_id=${agentId}`);
    t.same(list.body.sessions.map((s: { session_id: string }) => s.session_id), [sessionId]);

    t.same(errors, [], 'no page errors');
    const foreign = requests.filter((u) => !u.startsWith(shopOrigin) && !u.startsWith(app.url) && !u.startsWith(app.url.replace(/^http/, 'ws')));
    t.same(foreign, [], 'no network beyond the shop and the platform');
    t.ok(requests.includes(`${app.url}/widget.js`));
    t.notOk(requests.some((u) => u.includes('livekit')), 'a websocket session fetches no livekit code');
  });

  t.test('a refused origin sees the 403 state; an agent that is not public too', async (t) => {
    const agentId = await named('Boutique helper', { public_enabled: true, allowed_origins: [shopOrigin] });
    const refusedOrigin = `http://127.0.0.1:${shop.port}`; // the same server under another origin
    const { page } = await open({ 'agent-id': agentId }, { origin: refusedOrigin });
    const w = widget(page);
    await w.getByRole('button', { name: 'Talk to Assistant' }).click();
    await w.getByRole('alert').getByText('Something went wrong: Origin not allowed').waitFor();
    t.equal(await w.getByRole('button', { name: 'Start a call' }).isDisabled(), true, 'no call can start');
    const ev = await events(page);
    t.same(ev.filter((e) => e.type === 'parley:error').map((e) => e.detail), [{ code: 'config_refused', status: 403, message: 'Origin not allowed' }]);
    t.notOk(ev.some((e) => e.type === 'parley:connect'));
    await screenshotBoth(page, 'widget-refused');

    const privateAgent = await named('Back office', { public_enabled: false, allowed_origins: [shopOrigin] });
    const second = await open({ 'agent-id': privateAgent });
    await widget(second.page).getByRole('button', { name: 'Talk to Assistant' }).click();
    await widget(second.page).getByRole('alert').getByText('Something went wrong: Agent is not public').waitFor();
    t.pass('a private agent without a token provider shows the platform\'s 403');
  });

  t.test('a private agent through sessionTokenProvider: the shop\'s backend creates the session with its key', async (t) => {
    const agentId = await named('Back office', { public_enabled: false });
    const { page, errors } = await open({ 'agent-id': agentId, 'agent-name': 'Order desk', 'data-provider': `/session/${agentId}` });
    const w = widget(page);
    await w.getByRole('button', { name: 'Talk to Order desk' }).click();
    const input = w.getByRole('textbox', { name: 'Message' });
    await input.fill('Where is my parcel?');
    await input.press('Enter');
    await w.getByText('You said: Where is my parcel?').waitFor();
    t.equal(await w.getByRole('alert').count(), 0, 'the display config\'s 403 is no error when a token provider makes the call');
    const ev = await events(page);
    const sessionId = ev.find((e) => e.type === 'parley:connect')!.detail.sessionId;
    t.notOk(ev.some((e) => e.type === 'parley:error' && e.detail.code === 'config_refused'));
    await w.getByRole('button', { name: 'End call' }).click();
    await w.getByText('You ended the call').waitFor();
    const rec = await app.req('GET', `/v1/agent/sessions/${sessionId}`);
    t.equal(rec.body.end_user_id, 'customer-7');
    t.same(rec.body.metadata, { via: 'shop-backend' });
    t.same(errors, []);
  });

  t.test('the fake microphone: the question spoken is recognized and answered; mute toggles', async (t) => {
    const agentId = await named('Boutique helper', { public_enabled: true, allowed_origins: [shopOrigin] });
    const { page, errors } = await open({ 'agent-id': agentId }, { browser: voiceBrowser });
    const w = widget(page);
    await w.getByRole('button', { name: 'Talk to Boutique helper' }).click();
    await w.getByRole('log').getByText(`You said: ${QUESTION}`).waitFor({ timeout: 30_000 });
    const ev = await events(page);
    const finals = ev.filter((e) => e.type === 'parley:message' && e.detail.final).map((e) => [e.detail.role, e.detail.text]);
    t.same(finals, [['user', QUESTION], ['agent', `You said: ${QUESTION}`]], 'heard through the microphone, not typed');
    t.notOk(ev.some((e) => e.type === 'parley:error'), 'the microphone started');
    const mute = w.getByRole('button', { name: 'Mute' });
    t.equal(await mute.getAttribute('aria-pressed'), 'false');
    await mute.click();
    t.equal(await w.getByRole('button', { name: 'Unmute' }).getAttribute('aria-pressed'), 'true');
    await w.getByRole('button', { name: 'End call' }).click();
    await w.getByText('You ended the call').waitFor();
    t.same(errors, []);
  });

  t.test('attributes and theming: texts, position, consent with its links, switches, CSS custom properties', async (t) => {
    const agentId = await named('Boutique helper', { public_enabled: true, allowed_origins: [shopOrigin], overrides_allowed: ['language'] });
    const consent = JSON.stringify({ text: 'Calls are transcribed to help us answer.', links: [{ text: 'Privacy policy', href: 'https://shop.example.com/privacy' }, { text: 'Sneaky', href: 'javascript:alert(1)' }], accept: 'I agree' });
    const attrs = { 'agent-id': agentId, class: 'themed', position: 'bottom-left', language: 'de', consent, 'text-contents': JSON.stringify({ main_label: 'Ask {name}', end_call: 'Hang up' }), 'mic-muting': 'false', transcript: 'false' };
    const { page } = await open(attrs, { viewport: VIEWPORTS.phone });
    const w = widget(page);
    const launcher = w.getByRole('button', { name: 'Ask Boutique helper' });
    await launcher.waitFor();
    t.equal(await launcher.evaluate((b) => getComputedStyle(b).backgroundColor), 'rgb(0, 110, 60)', '--parley-accent themes the launcher');
    const lb = await launcher.boundingBox();
    t.ok(lb && lb.x < VIEWPORTS.phone.width / 2, 'position bottom-left');

    await launcher.click();
    await w.getByText('Calls are transcribed to help us answer.').waitFor();
    const links = await w.getByRole('link').evaluateAll((as) => as.map((a) => [a.textContent, (a as HTMLAnchorElement).href, (a as HTMLAnchorElement).rel]));
    t.same(links, [['Privacy policy', 'https://shop.example.com/privacy', 'noopener noreferrer']], 'only http(s) links are kept');
    await screenshotBoth(page, 'widget-consent');
    t.notOk((await events(page)).some((e) => e.type === 'parley:connect'), 'no call before consent');
    await w.getByRole('button', { name: 'I agree' }).click();
    await w.getByRole('button', { name: 'Hang up' }).waitFor();
    const input = w.getByRole('textbox', { name: 'Message' });
    await input.fill('Hi');
    await input.press('Enter');
    await page.waitForFunction(() => (window as unknown as { __events: { type: string; detail: any }[] }).__events.some((e) => e.type === 'parley:message' && e.detail.role === 'agent' && e.detail.final));
    t.equal(await w.getByRole('log').isVisible(), false, 'transcript="false" shows no transcript');
    const sid = (await events(page)).find((e) => e.type === 'parley:connect')!.detail.sessionId;
    t.same((await app.req('GET', `/v1/agent/sessions/${sid}`)).body.overrides, { language: 'de' }, 'language is the session\'s override where the agent takes it');
    t.equal(await w.getByRole('button', { name: 'Mute' }).count(), 0, 'mic-muting="false" shows no mute button');
    await w.getByRole('button', { name: 'Hang up' }).click();

    // Accepted once, remembered: the next visit's launcher starts the call at once.
    const next = await open({ ...attrs, 'text-input': 'false' });
    await next.page.evaluate((k) => localStorage.setItem(k, '1'), await page.evaluate(() => Object.keys(localStorage).find((k) => k.startsWith('parley-consent:'))!));
    await next.page.reload();
    await widget(next.page).getByRole('button', { name: 'Ask Boutique helper' }).click();
    await widget(next.page).getByRole('button', { name: 'Hang up' }).waitFor();
    t.equal(await widget(next.page).getByRole('textbox', { name: 'Message' }).count(), 0, 'text-input="false" shows no text box');
    t.notOk(await widget(next.page).getByText('Calls are transcribed to help us answer.').isVisible(), 'no consent asked again');
    await widget(next.page).getByRole('button', { name: 'Hang up' }).click();
  });

  t.test('/widget.js: one script, revalidated by ETag, compressed, readable from any origin', async (t) => {
    const r = await fetch(`${app.url}/widget.js`, { headers: { 'Accept-Encoding': 'identity', Origin: shopOrigin } });
    t.equal(r.status, 200);
    t.equal(r.headers.get('content-type'), 'text/javascript; charset=utf-8');
    t.equal(r.headers.get('cache-control'), 'no-cache');
    t.equal(r.headers.get('access-control-allow-origin'), '*');
    const body = await r.text();
    t.notMatch(body, /^\s*(import|export)\s/m, 'a classic script: no import or export statements');
    t.notMatch(body, /sourceMappingURL/, 'nothing else to fetch');
    const etag = r.headers.get('etag')!;
    t.equal((await fetch(`${app.url}/widget.js`, { headers: { 'If-None-Match': etag } })).status, 304);
    const br = await fetch(`${app.url}/widget.js`, { headers: { 'Accept-Encoding': 'br' } });
    t.equal(br.headers.get('content-encoding'), 'br');
  });
}
