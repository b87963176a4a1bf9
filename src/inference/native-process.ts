/**
 * Runs the native backend (native/server.ts) as a supervised child process, as the
 * embedded default does: start on loopback, wait until it says it is ready, restart it
 * with backoff when it dies (on the same address, so clients reconnect), stop it on exit.
 *
 * Command: `node --import tsx native/server.ts`, env BACKEND_ADDRESS and
 * PARLEY_SPEECH_ENGINE (plus the caller's env). Readiness: the child prints one line
 * `{"ready":true,"address":"127.0.0.1:PORT"}` on stdout once it listens, or
 * `{"ready":false,"error":"…"}` when it cannot (an address in use, an engine that fails).
 */
import { inheritedEnvironment } from '../config.ts';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('../../native/server.ts', import.meta.url));
// Resolved here so the child finds tsx whatever its working directory.
const TSX = import.meta.resolve('tsx');

export interface NativeProcessOptions {
  /** Where it listens; port 0 picks one on first start (kept across restarts). Default 127.0.0.1:0. */
  address?: string;
  /** PARLEY_SPEECH_ENGINE for the child (default: inherited, else espeak). */
  engine?: 'espeak' | 'synthetic';
  /** Extra environment for the child. */
  env?: Record<string, string>;
  /**
   * How long to wait for the ready line (default 60 s: espeak compiles its WASM at start, and on a
   * busy 2-core machine the child's TypeScript load alone was measured at ~40 s).
   */
  readyTimeoutMs?: number;
  /** Restart when it dies (default true); delays grow 250 ms → 10 s. */
  restart?: boolean;
  /** Called on every change: running, exited (with code/signal), restarting. */
  onEvent?: (e: NativeProcessEvent) => void;
  /**
   * The program to run instead of native/server.ts (bench/light-backend.ts): it must listen on
   * BACKEND_ADDRESS and print the same ready line.
   */
  entry?: string;
  /** Child's stderr goes here (default: the parent's stderr). */
  stderr?: 'inherit' | 'ignore';
}

export type NativeProcessEvent =
  | { type: 'running'; address: string; pid: number }
  | { type: 'exited'; code: number | null; signal: NodeJS.Signals | null; /** true when `stop()` asked for it */ stopped: boolean }
  | { type: 'restarting'; inMs: number };

export interface NativeProcess {
  /** The address it listens on (stable across restarts). */
  readonly address: string;
  /** Whether the child is up right now, its pid, and how often it was restarted. */
  status(): { running: boolean; pid: number | null; restarts: number; lastExit: { code: number | null; signal: string | null } | null };
  /** Stops supervising and terminates the child (SIGTERM, then SIGKILL after 3 s). */
  stop(): Promise<void>;
}

function startChild(address: string, o: NativeProcessOptions): { child: ChildProcess; ready: Promise<string> } {
  const child = spawn(process.execPath, ['--import', TSX, o.entry ?? SERVER], {
    env: {
      ...inheritedEnvironment(),
      ...o.env,
      BACKEND_ADDRESS: address,
      // Its stdin is a pipe this process never writes: the child stops when it ends
      // (`parentPipe`, native/config.ts), so a platform killed outright leaves no backend behind.
      PARLEY_BACKEND_PARENT_PIPE: '1',
      ...(o.engine ? { PARLEY_SPEECH_ENGINE: o.engine } : {}),
    },
    stdio: ['pipe', 'pipe', o.stderr ?? 'inherit'],
  });
  const ready = new Promise<string>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('native backend did not become ready in time'));
    }, o.readyTimeoutMs ?? 60_000);
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const nl = buf.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      try {
        const line = JSON.parse(buf.slice(0, nl)) as { ready?: boolean; address?: string; error?: string };
        if (line.ready && line.address) resolve(line.address);
        else reject(new Error(`native backend failed to start${line.error ? `: ${line.error}` : ''}`));
      } catch {
        reject(new Error('native backend printed an unexpected line'));
      }
      child.stdout!.removeAllListeners('data');
      child.stdout!.resume();
    });
    // 'close' (after its output ended), not 'exit': a failure line it printed is read first.
    child.once('close', (code) => {
      clearTimeout(timer);
      reject(new Error(`native backend exited during start-up (code ${code})`));
    });
  });
  return { child, ready };
}

/** Starts the native backend as a child process; resolves once it is ready. */
export async function spawnNativeBackend(o: NativeProcessOptions = {}): Promise<NativeProcess> {
  let { child, ready } = startChild(o.address ?? '127.0.0.1:0', o);
  const address = await ready;
  let running = true;
  let stopped = false;
  let restarts = 0;
  let crashesInARow = 0;
  let upSince = performance.now();
  let lastExit: { code: number | null; signal: string | null } | null = null;
  let timer: NodeJS.Timeout | null = null;
  o.onEvent?.({ type: 'running', address, pid: child.pid! });

  const watch = (c: ChildProcess) => {
    c.once('exit', (code, signal) => {
      running = false;
      lastExit = { code, signal };
      o.onEvent?.({ type: 'exited', code, signal, stopped });
      if (stopped || o.restart === false) return;
      // Backoff grows with crashes in a row; a child that ran for a minute starts the count over.
      if (performance.now() - upSince > 60_000) crashesInARow = 0;
      const inMs = Math.min(10_000, 100 * 2 ** Math.min(crashesInARow++, 7));
      o.onEvent?.({ type: 'restarting', inMs });
      timer = setTimeout(() => {
        timer = null;
        if (stopped) return;
        restarts++;
        ({ child, ready } = startChild(address, o));
        watch(child);
        ready.then(
          () => {
            running = true;
            upSince = performance.now();
            o.onEvent?.({ type: 'running', address, pid: child.pid! });
          },
          () => {}, // its exit handler schedules the next attempt
        );
      }, inMs);
    });
  };
  watch(child);

  return {
    address,
    status: () => ({ running, pid: running ? child.pid ?? null : null, restarts, lastExit }),
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (child.exitCode !== null || child.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        const kill = setTimeout(() => child.kill('SIGKILL'), 3000);
        child.once('exit', () => {
          clearTimeout(kill);
          resolve();
        });
        child.kill('SIGTERM');
      });
    },
  };
}
