// onnxruntime (the speech detector's runtime) sends usage telemetry to Microsoft from Linux since
// 1.30 and leaves a device id, an event cache and a debug file behind, unless
// ORT_DISABLE_TELEMETRY=1 is set when it starts. The native backend sets it unless the operator
// did (docs/inference.md, "The native backend"). A process that loads the detector's model, with a
// home folder of its own: by default nothing of onnxruntime's appears; with the operator's
// ORT_DISABLE_TELEMETRY=0, its files do (so the check can see them).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';

const run = promisify(execFile);
const fixture = new URL('../fixtures/vad-warm.ts', import.meta.url).pathname;

async function warm(env: Record<string, string>): Promise<{ home: string; pid: string }> {
  const home = mkdtempSync(path.join(os.tmpdir(), 'parley-ort-home-'));
  const base = { ...process.env };
  delete base.XDG_CACHE_HOME;
  delete base.ORT_DISABLE_TELEMETRY;
  const { stdout } = await run(process.execPath, ['--import', 'tsx', fixture], { env: { ...base, HOME: home, ...env }, timeout: 60_000 });
  return { home, pid: stdout.trim() };
}

const cache = (home: string) => path.join(home, '.cache', 'Microsoft', 'DeveloperTools', '.onnxruntime');
const debugFile = (pid: string) => path.join('/tmp', `mat-debug-${pid}.log`);

t.test('by default onnxruntime keeps nothing behind (its telemetry is off)', async (t) => {
  const { home, pid } = await warm({});
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  t.match(pid, /^\d+$/, 'the model loaded');
  t.notOk(existsSync(path.join(home, '.cache', 'Microsoft')), 'no device id or event cache in the home folder');
  t.notOk(existsSync(debugFile(pid)), 'no debug file in /tmp');
});

t.test("the operator's ORT_DISABLE_TELEMETRY=0 wins (and the check sees onnxruntime's files)", async (t) => {
  const { home, pid } = await warm({ ORT_DISABLE_TELEMETRY: '0' });
  t.teardown(() => {
    rmSync(home, { recursive: true, force: true });
    rmSync(debugFile(pid), { force: true });
  });
  t.ok(existsSync(path.join(cache(home), 'deviceid')), 'onnxruntime kept a device id');
});
