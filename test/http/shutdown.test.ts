import t from 'tap';
import { spawn } from 'node:child_process';
import { slowUpload } from '../fixtures/slow-upload.ts';
import { once } from 'node:events';

/** Runs `parley serve` as a child process on a free port; resolves once it listens. */
async function serve(t: { teardown(fn: () => void): void }, env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import=tsx', 'src/cli.ts', 'serve'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', PARLEY_DATA_DIR: 'memory', DATABASE_URL: '', REDIS_URL: '', PARLEY_NATIVE_BACKEND: 'false', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`exited early with ${code}: ${out}`)));
  });
  return { child, port, out: () => out };
}

/**
 * Graceful shutdown, as an operator sees it: a real `parley serve` process gets SIGTERM
 * while a request is still uploading; the request still gets its answer, new connections
 * are refused, and the process exits 0.
 */
t.test('SIGTERM finishes an in-flight request, then exits 0', async (t) => {
  const key = 'pk_shutdown_test_key_0123456789abcdef0123456789';
  const { child, port } = await serve(t, { PARLEY_BOOTSTRAP_KEY: key, LOG_LEVEL: 'warn' });

  const body = JSON.stringify({ name: 'made during shutdown' });
  const upload = slowUpload(port, '/v1/agent/agents', { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body); // now in flight
  await new Promise((r) => setTimeout(r, 300));
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  const refused = await fetch(`http://127.0.0.1:${port}/health`).then(() => false, () => true);
  t.ok(refused, 'no new connections once draining');
  const res = await upload.finish();
  t.equal(res.status, 201, 'the in-flight request completed');
  t.equal(JSON.parse(res.text).name, 'made during shutdown');
  const [code] = await exited;
  t.equal(code, 0, 'exit code 0');
});

/**
 * The trufflesuite build silently falls back to a slow ws-based imitation when its binary
 * cannot load. UWS_USE_FALLBACK forces that path: the server must say so in its log and
 * report `degraded` in /health.
 */
t.test('a uWebSockets.js fallback is logged as an error and reported degraded in /health', async (t) => {
  const { child, port, out } = await serve(t, { UWS_USE_FALLBACK: 'true', LOG_LEVEL: 'error' });
  t.match(out(), /"level":50[^\n]*native binding missing/, 'an error line in the log');
  const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as { status: string; components: { http: { status: string; detail: string } } };
  t.equal(health.components.http.status, 'degraded');
  t.match(health.components.http.detail, /fallback/);
  t.not(health.status, 'ok');
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  await exited;
});

/**
 * With the native backend as its child (the embedded default), a clean stop is not an
 * incident: the backend's exit is logged at info, and no error line appears.
 */
t.test('a clean SIGTERM stops the native backend child without an error line in the log', async (t) => {
  const { child, out } = await serve(t, { PARLEY_NATIVE_BACKEND: 'true', PARLEY_SPEECH_ENGINE: 'synthetic', BACKEND_ADDRESS: '127.0.0.1:0', LOG_LEVEL: 'info' });
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = await exited;
  t.equal(code, 0, 'exit code 0');
  t.match(out(), /"level":30[^\n]*native backend stopped/, 'the backend stop is logged at info');
  t.notMatch(out(), /"level":50/, 'no error line');
});
