// V8's young generation for the platform (D-SCALE-12): `npm start` gives the platform's process
// `--max-semi-space-size=32`, a 64 MB new space where V8's default stops at 32 MB, so a talking
// node scavenges ~40 % less often and fewer of its short-lived objects live long enough to be
// promoted (bench/README.md, twenty-seventh pass). Counts and sizes here, not times.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import { platformNodeFlags } from '../../bench/lib.ts';

const execFileP = promisify(execFile);
const child = fileURLToPath(new URL('../fixtures/young-generation-child.ts', import.meta.url));
const run = async (flags: string[]) => {
  const { stdout } = await execFileP(process.execPath, [...flags, '--import', 'tsx', child], { timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').pop()!) as { minors: number; newSpaceMb: number; kept: number };
};

t.test('npm start runs the platform with a 32 MB semi-space, and the benches that host it read the same flag', async (t) => {
  const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8')) as { scripts: { start: string } };
  t.match(pkg.scripts.start, /tsx --max-semi-space-size=32 src\/cli\.ts serve/);
  t.same(platformNodeFlags(), ['--max-semi-space-size=32']);
});

t.test('with npm start\'s flags the new space grows to 64 MB and the same garbage takes fewer scavenges', async (t) => {
  const ours = await run(platformNodeFlags());
  const v8Default = await run([]);
  t.equal(ours.newSpaceMb, 64, 'two 32 MB semi-spaces');
  t.ok(v8Default.newSpaceMb <= 32, `V8's own new space stops at ${v8Default.newSpaceMb} MB`);
  t.ok(ours.minors * 1.4 <= v8Default.minors, `${ours.minors} scavenges against ${v8Default.minors} with V8's default`);
});
