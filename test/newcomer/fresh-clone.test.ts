// The README's two commands on a fresh clone, as a newcomer runs them: `npm ci` (what CI runs for
// `npm install`), then `npm test -- <file>` and `npm start`, with nothing else in between. This
// failed for everyone once while CI was green (tap's runner needed a build step only CI ran).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ROOT, untilReady } from '../helpers/process.ts';

/**
 * A newcomer's environment: only what a shell gives. This test runs under tap, which adds
 * loaders (NODE_OPTIONS) and node_modules/.bin folders to every child it spawns, so commands go
 * through `env -i` with a PATH free of those folders.
 */
const PATH = (process.env.PATH ?? '').split(':').filter((p) => !p.includes('node_modules')).join(':');
const newcomer = (extra: Record<string, string> = {}): string[] =>
  Object.entries({ PATH, HOME: process.env.HOME ?? '/root', LANG: process.env.LANG ?? 'C.UTF-8', ...extra }).map(([k, v]) => `${k}=${v}`);

function spawnClean(cmd: string, args: string[], cwd: string, extra: Record<string, string> = {}, detached = false) {
  return spawn('env', ['-i', ...newcomer(extra), cmd, ...args], { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached });
}

function run(cmd: string, args: string[], cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawnClean(cmd, args, cwd);
    let output = '';
    child.stdout!.on('data', (d) => (output += d));
    child.stderr!.on('data', (d) => (output += d));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

// A clone and an install take minutes on a busy machine: past the suite's 300 s per file.
t.setTimeout(15 * 60_000);

const skip = existsSync(join(ROOT, '.git')) ? false : 'not a git checkout: nothing to clone';

t.test('a fresh clone: npm ci, then npm test -- <file> and npm start work with no other step', { skip }, async (t) => {
  const dir = mkdtempSync(join(os.tmpdir(), 'parley-clone-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const clone = await run('git', ['clone', '--quiet', '--depth', '1', `file://${ROOT}`, dir], ROOT);
  t.equal(clone.code, 0, `git clone: ${clone.output}`);
  const install = await run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], dir);
  t.equal(install.code, 0, `npm ci: ${install.output.slice(-2000)}`);

  const test = await run('npm', ['test', '--', 'test/web/static.test.ts'], dir);
  t.equal(test.code, 0, `npm test -- test/web/static.test.ts: ${test.output.slice(-3000)}`);
  t.match(test.output, /# \{ total: \d+, pass: \d+ \}/, 'the file ran and passed');

  // npm start: the platform comes up on its embedded defaults and serves what npm ci built.
  const start = spawnClean('npm', ['start'], dir, { PORT: '0', HOST: '127.0.0.1', PARLEY_SPEECH_ENGINE: 'synthetic', LOG_LEVEL: 'warn' }, true);
  t.teardown(() => {
    try {
      process.kill(-start.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  });
  let out = '';
  start.stderr!.on('data', (d) => (out += d));
  const port = await new Promise<number>((resolve, reject) => {
    start.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on http:\/\/[^\s:]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    start.once('exit', (code) => reject(new Error(`npm start exited with ${code}: ${out}`)));
  });
  await untilReady(`http://127.0.0.1:${port}`);
  t.match(out, /Parley API key for team team_\S+ \(shown once/, 'the first start prints the first API key');
  const sdk = await fetch(`http://127.0.0.1:${port}/sdk/parley-client.js`);
  t.equal(sdk.status, 200, 'the SDK bundle npm ci built is served');
  process.kill(-start.pid!, 'SIGTERM');
});
