import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';

/** Starts `parley serve` on `port` (0: a free one); resolves with its port, or with its exit code if it stops first. */
function serve(t: { teardown(fn: () => void): void }, port: number) {
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli.ts', 'serve'], {
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', PARLEY_DATA_DIR: 'memory', DATABASE_URL: '', REDIS_URL: '', PARLEY_NATIVE_BACKEND: 'false', LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stderr!.resume();
  return new Promise<{ port: number } | { exit: number | null }>((resolve) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) resolve({ port: Number(m[1]) });
    });
    child.once('exit', (code) => resolve({ exit: code }));
  }).then(async (r) => {
    if ('port' in r) t.teardown(async () => { if (child.exitCode === null) { child.kill('SIGTERM'); await once(child, 'exit'); } });
    return r;
  });
}

/** A port the kernel just gave out and took back. (A first server on port 0 would not show the
 * bug: the kernel does not let an ephemeral port be shared; a configured PORT can be.) */
async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

// uWebSockets.js's default listen sets SO_REUSEPORT: a second server given the same PORT used
// to start and take a share of the first one's connections without a word.
t.test('a second server on a port another one holds fails to start (it does not share the port)', async (t) => {
  const first = await serve(t, await freePort());
  if (!('port' in first)) return t.fail(`the first server did not start (exit ${first.exit})`);
  const second = await serve(t, first.port);
  t.ok('exit' in second, 'the second server stopped instead of listening');
  if ('exit' in second) t.not(second.exit, 0, 'with a failure exit code');
  const res = await fetch(`http://127.0.0.1:${first.port}/health`);
  t.equal(res.status, 200, 'the first server still answers');
});
