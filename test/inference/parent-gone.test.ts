// A backend launched by the platform stops when the platform is gone, however it went: a
// platform killed with SIGKILL must not leave its backend running (native/server.ts,
// `stopWhenAsked`). The same for the bench's light backend, which the bench launches alike.
import t from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createInferenceClient } from '../../src/inference/index.ts';

const LAUNCHER = fileURLToPath(new URL('../fixtures/backend-launcher.ts', import.meta.url));
const LIGHT = fileURLToPath(new URL('../../bench/light-backend.ts', import.meta.url));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function launch(entry?: string): Promise<{ parent: ReturnType<typeof spawn>; pid: number; address: string }> {
  const parent = spawn(process.execPath, ['--import', 'tsx', LAUNCHER, ...(entry ? [entry] : [])], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, BENCH_PHRASE: 'What time is it?', BENCH_PHRASE_MS: '1800' },
  });
  const line = await new Promise<string>((resolve, reject) => {
    let buf = '';
    parent.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (buf.includes('\n')) resolve(buf.slice(0, buf.indexOf('\n')));
    });
    parent.once('exit', (code) => reject(new Error(`the launcher exited (${code})`)));
  });
  const { pid, address } = JSON.parse(line) as { pid: number; address: string };
  return { parent, pid, address };
}

for (const [name, entry] of [['the native backend', undefined], ['the light bench backend', LIGHT]] as const) {
  t.test(`${name} stops when the process that launched it is killed`, async (t) => {
    const { parent, pid, address } = await launch(entry);
    t.teardown(() => {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    });
    t.ok(alive(pid), 'the backend runs');
    const client = createInferenceClient({ nativeAddress: address, backends: '' });
    const caps = await client.capabilities();
    await client.close();
    t.ok(caps.models.length > 0, 'and answers');

    parent.kill('SIGKILL');
    // Bounded: a backend still running after ~30 s of polling is left behind.
    let polls = 0;
    while (alive(pid) && polls < 600) {
      await new Promise((r) => setTimeout(r, 50));
      polls++;
    }
    t.notOk(alive(pid), 'the backend is gone after its launcher was killed');
  });
}
