/**
 * Browser tests: Debian's Chromium (`apt-get install -y chromium`, /usr/bin/chromium) driven by
 * playwright-core. Where it is missing, `browserSkip` is the reason a suite reports itself
 * skipped with (`t.test(name, { skip: browserSkip }, …)`); the rest of `npm test` runs.
 *
 * Screenshots go to `test-screenshots/` (git-ignored) so a reader can see what users see.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { wavHeader } from '../../src/audio/wav.ts';

const require = createRequire(import.meta.url);

/** The Chromium binary: `PARLEY_CHROMIUM` or Debian's. */
export const CHROMIUM = process.env.PARLEY_CHROMIUM || '/usr/bin/chromium';

/** Why browser tests cannot run here, or false when they can. */
export const browserSkip: string | false = existsSync(CHROMIUM)
  ? false
  : `Chromium is not installed at ${CHROMIUM}: apt-get install -y chromium (or set PARLEY_CHROMIUM)`;

export const SCREENSHOTS_DIR = fileURLToPath(new URL('../../test-screenshots', import.meta.url));

/** The two sizes every page is checked and photographed at. */
export const VIEWPORTS = { desktop: { width: 1280, height: 800 }, phone: { width: 390, height: 844 } } as const;

export interface LaunchOptions {
  /**
   * A WAV file (mono 48 kHz is the safe format) that the fake microphone plays once. Chromium
   * reads it for the browser's whole life: one browser per audio file.
   */
  fakeMicrophone?: string;
}

/**
 * Starts headless Chromium with the flags this machine needs (no sandbox as root, no background
 * network: the machine's closed network refuses it), and optionally a fake microphone.
 */
export async function launchBrowser(opts: LaunchOptions = {}): Promise<Browser> {
  const args = [
    '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--autoplay-policy=no-user-gesture-required',
  ];
  if (opts.fakeMicrophone) {
    args.push('--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream', `--use-file-for-fake-audio-capture=${opts.fakeMicrophone}%noloop`);
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args });
}

/** A new context (isolated storage) with the microphone allowed for `origin`. */
export async function newContext(browser: Browser, origin: string, viewport: { width: number; height: number } = VIEWPORTS.desktop): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport });
  // Tests run through tsx, which names functions with a `__name` helper; functions passed to
  // page.evaluate carry those calls into the page, which has no such helper.
  await context.addInitScript('globalThis.__name = (f) => f;');
  await context.grantPermissions(['microphone'], { origin });
  return context;
}

/**
 * Saves `page` as `test-screenshots/<name>-<width>x<height>.png` at both sizes and returns, per
 * size, whether the page overflows horizontally (its scroll width past the viewport's).
 */
export async function screenshotBoth(page: Page, name: string): Promise<Record<keyof typeof VIEWPORTS, { overflow: number; file: string }>> {
  mkdirSync(SCREENSHOTS_DIR, { recursive: true });
  const out = {} as Record<keyof typeof VIEWPORTS, { overflow: number; file: string }>;
  const original = page.viewportSize();
  for (const [key, size] of Object.entries(VIEWPORTS) as [keyof typeof VIEWPORTS, { width: number; height: number }][]) {
    await page.setViewportSize(size);
    await page.waitForTimeout(50); // one frame for layout after the resize
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    const file = join(SCREENSHOTS_DIR, `${name}-${size.width}x${size.height}.png`);
    await page.screenshot({ path: file, fullPage: true });
    out[key] = { overflow, file };
  }
  if (original) await page.setViewportSize(original);
  return out;
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** Runs axe-core in the page; returns the violations of impact serious or critical. */
export async function seriousA11yViolations(page: Page): Promise<AxeViolation[]> {
  const source = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  // Evaluated, not added as a <script>: the page's CSP forbids inline scripts, not evaluation by the driver.
  await page.evaluate(source);
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run(ctx: Document): Promise<{ violations: AxeViolation[] }> } }).axe;
    const r = await axe.run(document);
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** The sample rate Chromium's fake capture device takes safely. */
export const FAKE_MIC_RATE = 48_000;

/**
 * Writes `file`: a mono 48 kHz WAV for Chromium's fake microphone (`launch({ fakeMicrophone })`):
 * `leadMs` of silence, the synthetic engine's speech of `text` (its recognizer reads it back
 * exactly), `tailMs` of silence. Returns `file`.
 */
export function fakeMicrophoneWav(file: string, text: string, leadMs: number, tailMs: number): string {
  const rate = FAKE_MIC_RATE;
  const speech = encodeText(text, { sampleRateHz: rate }).pcm;
  const pcm = new Int16Array((leadMs * rate) / 1000 + speech.length + (tailMs * rate) / 1000);
  pcm.set(speech, (leadMs * rate) / 1000);
  const data = new Uint8Array(pcm.buffer);
  writeFileSync(file, Buffer.concat([wavHeader(rate, data.length), data]));
  return file;
}

