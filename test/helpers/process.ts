/**
 * Parley as an operator runs it: `parley serve` and other `parley` commands as child processes
 * (bin/parley.js, as `npx parley` runs it), for tests about processes: the CLI beside a running
 * server, several instances on one host, shutdown.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/parley.js', import.meta.url));

/** An environment without the test run's own DATABASE_URL / REDIS_URL unless given. */
export function baseEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return { ...process.env, HOST: '127.0.0.1', PORT: '0', DATABASE_URL: '', REDIS_URL: '', LOG_LEVEL: 'warn', ...env };
}

export interface Served {
  child: ChildProcess;
  port: number;
  url: string;
  output(): string;
  /** SIGTERM, and the exit code once it exited. */
  stop(): Promise<number | null>;
}

/** Starts `parley serve`; resolves once it listens (not yet ready). */
export async function serve(t: { teardown(fn: () => void | Promise<void>): void }, env: Record<string, string>): Promise<Served> {
  const child = spawn(process.execPath, [BIN, 'serve'], { cwd: ROOT, env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  const port = await new Promise<number>((resolve, reject) => {
    const onData = () => {
      const m = /listening on http:\/\/[^\s:]+:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    };
    child.stdout!.on('data', onData);
    void exited.then((code) => reject(new Error(`parley serve exited early with ${code}:\n${out}`)));
  });
  return {
    child, port, url: `http://127.0.0.1:${port}`, output: () => out,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Runs `parley serve` expecting it to fail; resolves with its exit code and output. */
export function serveFailing(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return run(['serve'], env, 60_000);
}

/** Runs a `parley` command to its end. */
export function parley(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string; stdout: string }> {
  return run(args, env, 60_000);
}

function run(args: string[], env: Record<string, string>, timeoutMs: number): Promise<{ code: number | null; output: string; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: baseEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    let stdout = '';
    child.stdout!.on('data', (d) => ((output += d), (stdout += d)));
    child.stderr!.on('data', (d) => (output += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`parley ${args.join(' ')} did not finish in ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output, stdout });
    });
  });
}

/** Polls GET /ready until 200. */
export async function untilReady(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await fetch(`${url}/ready`).then((r) => r.status === 200, () => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`${url} not ready in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
