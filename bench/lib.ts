import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import WebSocket from 'ws';
import { createLogger } from '../src/log.ts';
import { randomSchema, startPlatform, type Platform } from '../src/platform.ts';

/** Starts `parley serve` (or another tsx entry) as a child and resolves its base URL. */
export function startChild(args: string[], env: Record<string, string>, children: ChildProcess[]): Promise<string> {
  const child = spawn(process.execPath, ['--import=tsx', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[^\s]+)/i.exec(out);
      if (m) resolve(m[1]!.replace('0.0.0.0', '127.0.0.1'));
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)));
  });
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;

/** The codec benches' test signal: a tone, a sweep and noise (codecs cannot coast on silence). */
export function testSignal(sampleRateHz: number, seconds: number): Int16Array {
  const n = Math.round(sampleRateHz * seconds);
  const x = new Int16Array(n);
  let seed = 1;
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const t = i / sampleRateHz;
    const sweep = Math.sin(2 * Math.PI * (200 + 300 * (t % 4)) * t);
    x[i] = Math.round(6000 * Math.sin(2 * Math.PI * 1000 * t) + 4000 * sweep + (seed / 0x7fffffff - 0.5) * 2000);
  }
  return x;
}

/**
 * A platform in the bench's process over `backendAddress`: the embedded store, or a fresh
 * schema on `databaseUrl`; a bootstrap key; no per-team speech cap (the benches measure the
 * platform, not the cap); silent logs.
 */
export async function startBenchPlatform(o: { backendAddress: string; databaseUrl?: string }): Promise<{ platform: Platform; key: string }> {
  const key = `pk_bench_${randomBytes(16).toString('hex')}`;
  const platform = await startPlatform({
    env: { PARLEY_SPEECH_CONCURRENCY: '100000' },
    config: { host: '127.0.0.1', port: 0, dataDir: 'memory', databaseUrl: o.databaseUrl || undefined, bootstrapKey: key, logLevel: 'silent', startNativeBackend: false, backendAddress: o.backendAddress },
    dbSchema: o.databaseUrl ? randomSchema() : undefined,
    log: createLogger({ level: 'silent' }),
  });
  return { platform, key };
}

// ------------------------------------------------------------------------------------------
// Many connections: descriptor limits, child processes, memory, and crowds of idle and slow
// clients (idle-sockets.ts, chaos.ts --fault slow-clients; docs/reliability.md, "Slow clients").

/** The shell prefix that raises a process's descriptor limit to 65,536 (or the hard limit). */
export const RAISE_FD_LIMIT = 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"';

/**
 * Re-runs this script under `RAISE_FD_LIMIT` when its descriptor limit is below `needed` (the
 * process holds the server side of every connection), and exits with the re-run's status.
 */
export function ensureFdLimit(needed: number): void {
  const limit = Number(spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout.trim());
  if (limit >= needed || process.env.BENCH_FD_REEXEC) return;
  const r = spawnSync('sh', ['-c', `${RAISE_FD_LIMIT}; exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env: { ...process.env, BENCH_FD_REEXEC: '1' } });
  process.exit(r.status ?? 1);
}

/**
 * A child process running `file` (through tsx) under `RAISE_FD_LIMIT`, with an IPC channel:
 * `next()` resolves with its messages in order.
 */
export function benchChild(file: string, env: Record<string, string>): { proc: ChildProcess; next: () => Promise<any>; send: (m: unknown) => void } {
  const proc = spawn('sh', ['-c', `${RAISE_FD_LIMIT}; exec "$0" --import=tsx "$1"`, process.execPath, file], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, ...env },
  });
  const queue: any[] = [];
  const waiters: ((m: any) => void)[] = [];
  proc.on('message', (m) => (waiters.length ? waiters.shift()!(m) : queue.push(m)));
  return { proc, next: () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiters.push(r))), send: (m) => proc.send(m as any) };
}

let gcFn: (() => void) | undefined;
/** This process's memory after two forced GCs: RSS and heap used + external (bytes). */
export function memoryAfterGc(): { rss: number; heapExternal: number } {
  if (!gcFn) {
    v8.setFlagsFromString('--expose-gc');
    gcFn = vm.runInNewContext('gc') as () => void;
  }
  gcFn();
  gcFn();
  const m = process.memoryUsage();
  return { rss: m.rss, heapExternal: m.heapUsed + m.external };
}

/**
 * A crowd's kind: `ws`, WebSockets upgraded without a key that never send their first message
 * (`…/stream-input`, whose key may come in it: closed 4408 by the platform); `headers`, plain TCP
 * connections that send half a request's headers, then a byte every 2 s (slowloris); `body`,
 * `POST /v1/tts` with a valid key whose body comes a byte every 2 s.
 */
export type CrowdMode = 'ws' | 'headers' | 'body';

export interface CrowdReport {
  mode: CrowdMode;
  /** Connections opened in all (reopened ones included), and opens that failed. */
  opened: number;
  failed: number;
  /** Each connection's life on the client's clock, from its open to its close (ms). */
  closedMs: { p50: number | null; p99: number | null; max: number | null; min: number | null };
  /** How connections ended: `4408 No first message…`, `status 408`, `closed without an answer`. */
  outcomes: Record<string, number>;
  /** When the last connection ended (ms since the epoch). */
  lastClosedAt: number;
}

const pct = (a: number[], p: number) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : null;
};

/**
 * Opens `n` connections of a crowd against `port` (in waves of 500, so the listen backlog
 * never overflows). `held` resolves once all are open (or failed); `done` once every one has
 * ended. With `sustain`, a connection the platform closes is opened again until `stop()`, so
 * `n` stay open (an attacker's crowd); without, `stop()` only stops reopening.
 */
export function openCrowd(o: { mode: CrowdMode; n: number; port: number | string; key: string; sustain?: boolean }): { held: Promise<{ held: number; failed: number }>; stop: () => void; done: Promise<CrowdReport> } {
  const lifetimes: number[] = [];
  const outcomes: Record<string, number> = {};
  let opened = 0, failed = 0, live = 0, initial = 0, stopped = false, lastClosedAt = 0;
  let heldResolve!: (v: { held: number; failed: number }) => void;
  let doneResolve!: (r: CrowdReport) => void;
  const held = new Promise<{ held: number; failed: number }>((r) => (heldResolve = r));
  const done = new Promise<CrowdReport>((r) => (doneResolve = r));
  const settledInitial = () => {
    if (++initial === o.n) heldResolve({ held: opened, failed });
  };
  const finish = () => {
    if (live > 0 || initial < o.n || (o.sustain && !stopped)) return;
    doneResolve({ mode: o.mode, opened, failed, closedMs: { p50: pct(lifetimes, 50), p99: pct(lifetimes, 99), max: pct(lifetimes, 100), min: pct(lifetimes, 0) }, outcomes, lastClosedAt });
  };
  // A sustained crowd opens a closed (or refused) connection again within a second.
  const again = () => void setTimeout(() => (stopped ? finish() : void one(false)), Math.random() * 1000);
  const ended = (at: number, what: string) => {
    lifetimes.push(performance.now() - at);
    outcomes[what] = (outcomes[what] ?? 0) + 1;
    live--;
    lastClosedAt = Date.now();
    if (o.sustain && !stopped) again();
    else finish();
  };
  const one = (first: boolean) => new Promise<void>((resolve) => {
    let settled = false;
    const opening = () => { settled = true; opened++; live++; resolve(); if (first) settledInitial(); };
    const refused = () => {
      if (settled) return;
      settled = true;
      failed++;
      resolve();
      if (first) settledInitial();
      if (o.sustain && !stopped) again();
      else finish();
    };
    if (o.mode === 'ws') {
      const ws = new WebSocket(`ws://127.0.0.1:${o.port}/compat/elevenlabs/v1/text-to-speech/default/stream-input`);
      let at = 0;
      ws.on('open', () => { at = performance.now(); opening(); });
      ws.on('error', () => {});
      ws.on('unexpected-response', (req, res) => { res.resume(); req.destroy(); refused(); });
      ws.on('close', (code, reason) => (at ? ended(at, `${code} ${reason}`) : refused()));
      return;
    }
    const s = net.connect(Number(o.port), '127.0.0.1');
    let at = 0, got = '';
    let timer: NodeJS.Timeout | undefined;
    s.on('connect', () => {
      at = performance.now();
      opening();
      if (o.mode === 'headers') s.write('GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      else s.write(`POST /v1/tts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${o.key}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"text":"`);
      timer = setInterval(() => s.write('a'), 2000);
    });
    s.on('data', (d) => (got += d.toString('latin1')));
    s.on('error', () => {});
    s.on('close', () => {
      clearInterval(timer);
      if (!at) return refused();
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      ended(at, m ? `status ${m[1]}` : 'closed without an answer');
    });
  });
  void (async () => {
    for (let i = 0; i < o.n; i += 500) await Promise.all(Array.from({ length: Math.min(500, o.n - i) }, () => one(true)));
  })();
  return { held, stop: () => { stopped = true; finish(); }, done };
}

/**
 * The young generation's flag `npm start` gives the platform (package.json's `start` script,
 * D-SCALE-12; the only Node flag it passes, and the only one read here). A bench that hosts
 * the platform in its own process runs with it too, so that it measures what `npm start` runs.
 */
export function platformNodeFlags(): string[] {
  const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../package.json', import.meta.url)), 'utf8')) as { scripts: { start: string } };
  return pkg.scripts.start.match(/--max-semi-space-size=\d+/g) ?? [];
}
