import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from './log.ts';

const SERVER = fileURLToPath(new URL('../native/server.ts', import.meta.url));

export interface NativeBackendProcess {
  readonly address: string;
  /** Whether the child is up (it printed ready and has not exited since). */
  readonly running: boolean;
  readonly restarts: number;
  lastError?: string;
  stop(): Promise<void>;
}

/**
 * Runs the native inference backend as a child process on loopback (the embedded default of
 * `npm start`): waits until it says it is ready, restarts it with backoff when it dies, and
 * stops it when the platform stops. The platform reaches it only over gRPC.
 */
export async function startNativeBackend(opts: { address: string; engine: string; log: Logger; readyTimeoutMs?: number }): Promise<NativeBackendProcess> {
  let child: ChildProcess | null = null;
  let running = false;
  let stopping = false;
  let restarts = 0;
  let timer: NodeJS.Timeout | null = null;
  const state: NativeBackendProcess = {
    address: opts.address,
    get running() {
      return running;
    },
    get restarts() {
      return restarts;
    },
    stop: async () => {
      stopping = true;
      if (timer) clearTimeout(timer);
      const c = child;
      if (!c || c.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        const kill = setTimeout(() => c.kill('SIGKILL'), 3000);
        c.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        c.kill('SIGTERM');
      });
    },
  };

  const launch = () =>
    new Promise<void>((resolve, reject) => {
      const c = spawn(process.execPath, ['--import=tsx', SERVER], {
        env: { ...process.env, BACKEND_ADDRESS: opts.address, PARLEY_SPEECH_ENGINE: opts.engine },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = c;
      let out = '';
      const ready = setTimeout(() => reject(new Error(`native backend not ready within ${opts.readyTimeoutMs ?? 30_000} ms`)), opts.readyTimeoutMs ?? 30_000);
      c.stdout!.on('data', (d) => {
        if (running) return;
        out += d;
        if (out.includes('"ready":true')) {
          running = true;
          clearTimeout(ready);
          opts.log.info({ address: opts.address, engine: opts.engine, pid: c.pid }, 'native backend ready');
          resolve();
        }
      });
      c.stderr!.on('data', (d) => {
        state.lastError = String(d).trim().slice(-500);
      });
      c.once('exit', (code, signal) => {
        const wasRunning = running;
        running = false;
        clearTimeout(ready);
        if (!wasRunning) reject(new Error(`native backend exited before ready (${code ?? signal}): ${state.lastError ?? ''}`));
        if (stopping) return;
        opts.log.error({ code, signal, error: state.lastError }, 'native backend exited; restarting');
        const delay = Math.min(10_000, 500 * 2 ** Math.min(restarts, 5));
        timer = setTimeout(() => {
          restarts++;
          launch().catch((err) => opts.log.error({ err: err.message }, 'native backend restart failed'));
        }, delay);
      });
    });

  await launch();
  return state;
}
