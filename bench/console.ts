/**
 * The console's first load: bytes transferred (compressed, as the browser received them) and
 * time to interactive, in Debian's Chromium against `parley serve` on the embedded defaults.
 * Each run is a new browser context (empty cache). Prints one JSON object.
 *
 *   npx tsx bench/console.ts [--runs 7]
 *
 * Two first loads: the sign-in page (what a new visitor gets at /), and /agents opened with a
 * key already in the tab's session storage (the app frame, the Agents page's chunk and its API
 * call). Time to interactive: navigation start → the page's first control ready for input
 * (the API key field, or the New agent button), on the page's own clock.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { CHROMIUM } from '../test/helpers/browser.ts';
import { percentile, round, startChild } from './lib.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '7' } } });
const runs = Number(values.runs);
const children: ChildProcess[] = [];
const key = 'pk_bench_console_0123456789abcdef0123456789ab';

interface Load { transferred_bytes: number; body_bytes: number; decoded_bytes: number; requests: number; interactive_ms: number; dom_content_loaded_ms: number; load_ms: number }

async function firstLoad(browser: import('playwright-core').Browser, base: string, path: string, ready: string, signedIn: boolean): Promise<Load> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  if (signedIn) await context.addInitScript((k) => sessionStorage.setItem('parley.apiKey', k), key);
  const page = await context.newPage();
  await page.goto(base + path);
  const interactive = await page.waitForFunction((label) => {
    const el = [...document.querySelectorAll('input, button')].find((e) => (e as HTMLElement).innerText === label || document.querySelector(`label[for="${e.id}"]`)?.textContent === label) as HTMLInputElement | undefined;
    return el && !el.disabled ? performance.now() : false;
  }, ready, { polling: 'raf' });
  const interactiveMs = (await interactive.jsonValue()) as number;
  await page.waitForLoadState('networkidle');
  const m = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
    const res = performance.getEntriesByType('resource') as PerformanceResourceTiming[];
    const all = [nav, ...res];
    return {
      transferred: all.reduce((n, e) => n + e.transferSize, 0),
      body: all.reduce((n, e) => n + e.encodedBodySize, 0),
      decoded: all.reduce((n, e) => n + e.decodedBodySize, 0),
      requests: all.length,
      dcl: nav.domContentLoadedEventEnd,
      load: nav.loadEventEnd,
    };
  });
  await context.close();
  return { transferred_bytes: m.transferred, body_bytes: m.body, decoded_bytes: m.decoded, requests: m.requests, interactive_ms: round(interactiveMs, 1), dom_content_loaded_ms: round(m.dcl, 1), load_ms: round(m.load, 1) };
}

function summary(loads: Load[]) {
  const med = (k: keyof Load) => percentile(loads.map((l) => l[k]).sort((a, b) => a - b), 50);
  const max = (k: keyof Load) => Math.max(...loads.map((l) => l[k]));
  return {
    transferred_bytes: med('transferred_bytes'), body_bytes_compressed: med('body_bytes'), body_bytes_uncompressed: med('decoded_bytes'), requests: med('requests'),
    interactive_ms: { p50: med('interactive_ms'), max: max('interactive_ms') },
    dom_content_loaded_ms_p50: med('dom_content_loaded_ms'), load_ms_p50: med('load_ms'),
  };
}

try {
  const built = spawnSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { stdio: 'inherit' });
  if (built.status !== 0) throw new Error('build failed');
  const base = await startChild(['src/cli.ts', 'serve'], { PORT: '0', HOST: '127.0.0.1', PARLEY_DATA_DIR: 'memory', PARLEY_BOOTSTRAP_KEY: key, LOG_LEVEL: 'warn' }, children);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  const signIn: Load[] = [];
  const agents: Load[] = [];
  await firstLoad(browser, base, '/', 'API key', false); // warm the server's caches and the browser process once
  for (let i = 0; i < runs; i++) {
    signIn.push(await firstLoad(browser, base, '/', 'API key', false));
    agents.push(await firstLoad(browser, base, '/agents', 'New agent', true));
  }
  await browser.close();
  console.log(JSON.stringify({
    bench: 'console-first-load',
    date: new Date().toISOString(),
    runs,
    goal: { transferred_bytes: 300 * 1024, interactive_ms: 1000 },
    sign_in_page: summary(signIn),
    agents_page_signed_in: summary(agents),
  }, null, 2));
} finally {
  for (const c of children) c.kill('SIGTERM');
}
