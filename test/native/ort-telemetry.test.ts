// onnxruntime (the speech detector's runtime) sends usage telemetry to Microsoft from Linux since
// 1.30 and leaves a device id, an event cache and a debug file behind, unless
// ORT_DISABLE_TELEMETRY=1 is set when it starts. The native backend sets it unless the operator
// did (docs/providers.md, "The speech detector"). A process that loads the detector's model, with a
// home folder and a TMPDIR of its own: by default nothing of onnxruntime's appears; with the
// operator's ORT_DISABLE_TELEMETRY=0, its files do (so the check can see them), and go with the
// folders. onnxruntime also stays silent when a CI variable is set (CI=true, GITHUB_ACTIONS, ...):
// both runs go without those, so the test means the same on a CI runner as on a laptop.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';

const run = promisify(execFile);
const fixture = new URL('../fixtures/vad-warm.ts', import.meta.url).pathname;
// The variables onnxruntime reads as "running in CI" (the names are in its library's strings).
const CI_VARIABLES = ['CI', 'TF_BUILD', 'GITHUB_ACTIONS', 'GITLAB_CI', 'CIRCLECI', 'TRAVIS', 'JENKINS_URL',
  'CODEBUILD_BUILD_ID', 'BUILDKITE', 'TEAMCITY_VERSION', 'APPVEYOR', 'BITBUCKET_BUILD_NUMBER',
  'SYSTEM_TEAMFOUNDATIONCOLLECTIONURI', 'ORT_RUNNING_UNIT_TESTS'];

async function warm(env: Record<string, string>): Promise<{ home: string; tmp: string; pid: string }> {
  const home = mkdtempSync(path.join(os.tmpdir(), 'parley-ort-home-'));
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'parley-ort-tmp-'));
  const base = { ...process.env };
  delete base.XDG_CACHE_HOME;
  delete base.ORT_DISABLE_TELEMETRY;
  for (const name of CI_VARIABLES) delete base[name];
  const { stdout } = await run(process.execPath, ['--import', 'tsx', fixture], { env: { ...base, HOME: home, TMPDIR: tmp, ...env }, timeout: 60_000 });
  return { home, tmp, pid: stdout.trim() };
}

const cache = (home: string) => path.join(home, '.cache', 'Microsoft', 'DeveloperTools', '.onnxruntime');
const removeAll = (...dirs: string[]) => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); };

t.test('by default onnxruntime keeps nothing behind (its telemetry is off)', async (t) => {
  const { home, tmp, pid } = await warm({});
  t.teardown(() => removeAll(home, tmp));
  t.match(pid, /^\d+$/, 'the model loaded');
  t.notOk(existsSync(path.join(home, '.cache', 'Microsoft')), 'no device id or event cache in the home folder');
  t.notOk(existsSync(path.join(tmp, `mat-debug-${pid}.log`)) || existsSync(path.join(tmp, '.ses')), 'no debug or session file in TMPDIR');
});

t.test("the operator's ORT_DISABLE_TELEMETRY=0 wins (and the check sees onnxruntime's files)", async (t) => {
  const { home, tmp, pid } = await warm({ ORT_DISABLE_TELEMETRY: '0' });
  t.teardown(() => removeAll(home, tmp));
  t.ok(existsSync(path.join(cache(home), 'deviceid')), 'onnxruntime kept a device id');
  t.ok(existsSync(path.join(tmp, `mat-debug-${pid}.log`)), 'and its debug file in TMPDIR');
});
