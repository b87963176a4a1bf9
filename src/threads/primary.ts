/**
 * A node of several event loops (`PARLEY_WORKERS` > 1, D-SCALE-2): the main thread claims the
 * port alone once (so a second Parley given the same `PORT` still fails to start), launches the
 * native backend once, then starts one worker thread per loop; each runs a whole platform
 * (`src/threads/worker.ts`) and listens on the port with SO_REUSEPORT, and the kernel spreads
 * new connections over them. The workers are linked pairwise (`siblings.ts`) and share one
 * session count, so `PARLEY_MAX_SESSIONS` caps the node. Closing asks every worker to drain and
 * close, then stops the native backend.
 */
import net from 'node:net';
import os from 'node:os';
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { inheritedEnvironment, loadConfig, type Config, type ConfigOverrides } from '../config.ts';
import type { NativeProcess } from '../inference/index.ts';
import { launchNativeBackend } from '../inference/module.ts';
import { createLogger, type Logger } from '../log.ts';
import type { WorkerCommand, WorkerReport } from './worker.ts';

export interface ParleyNode {
  config: Config;
  log: Logger;
  port: number;
  workers: number;
  /** The bootstrap key when this start created or registered one. */
  bootstrapKey?: string;
  teamId: string;
  nativeBackend?: NativeProcess;
  /** Each worker's Linux thread id (null off Linux), by index: bench/sessions.ts reads their CPU. */
  threads: (number | null)[];
  /** Resolves when a worker stopped without being asked (the node should exit). */
  failed: Promise<string>;
  /** Drains and closes every worker, then the native backend. */
  close(): Promise<void>;
}

const ENTRY = new URL('./worker-entry.mjs', import.meta.url);

/** Claims `host:port` alone for a moment (no SO_REUSEPORT): fails when anything holds it. */
function claimPort(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err) => reject(new Error(`could not listen on ${host}:${port}: ${(err as NodeJS.ErrnoException).code ?? err.message}`)));
    server.listen({ host, port, exclusive: true }, () => {
      const taken = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(taken));
    });
  });
}

export interface StartNodeOptions {
  config?: ConfigOverrides;
  env?: NodeJS.ProcessEnv;
  log?: Logger;
  /** Postgres schema and shared-state key prefix of every worker (tests, benchmarks). */
  dbSchema?: string;
  statePrefix?: string;
}

export async function startNode(opts: StartNodeOptions = {}): Promise<ParleyNode> {
  const config = loadConfig(opts.env, opts.config);
  const log = opts.log ?? createLogger({ level: config.logLevel, pii: config.logPii });
  const count = config.workers;
  const port = await claimPort(config.host, config.port);
  const nativeBackend = config.startNativeBackend ? await launchNativeBackend(config, log, () => {}) : undefined;
  const capacity = new SharedArrayBuffer(4);
  // The native backend's state for the workers' /health: running (1/0) and restarts, kept fresh.
  const backendState = new Int32Array(new SharedArrayBuffer(8));
  const backendWatch = nativeBackend
    ? setInterval(() => {
      const st = nativeBackend.status();
      Atomics.store(backendState, 0, st.running ? 1 : 0);
      Atomics.store(backendState, 1, st.restarts);
    }, 500)
    : undefined;
  backendWatch?.unref();
  if (nativeBackend) Atomics.store(backendState, 0, 1);
  // One channel per pair of workers.
  const ports: Record<number, MessagePort>[] = Array.from({ length: count }, () => ({}));
  for (let i = 0; i < count; i++) {
    for (let j = i + 1; j < count; j++) {
      const { port1, port2 } = new MessageChannel();
      ports[i]![j] = port1;
      ports[j]![i] = port2;
    }
  }
  const overrides: ConfigOverrides = {
    ...opts.config,
    port,
    startNativeBackend: false,
    ...(nativeBackend ? { backendAddress: nativeBackend.address } : {}),
  };
  let onFailure: (why: string) => void = () => {};
  const failed = new Promise<string>((resolve) => (onFailure = resolve));
  let closing = false;
  const workers = ports.map((own, index) => {
    const w = new Worker(ENTRY, {
      workerData: { index, count, port, capacity, ports: own, overrides, dbSchema: opts.dbSchema, statePrefix: opts.statePrefix, backend: nativeBackend ? { address: nativeBackend.address, state: backendState.buffer } : undefined },
      transferList: Object.values(own),
      env: opts.env ?? inheritedEnvironment(),
    });
    const exited = new Promise<number>((resolve) => w.once('exit', resolve));
    w.on('error', (err) => log.error({ err, worker: index }, 'worker failed'));
    void exited.then((code) => {
      if (!closing) onFailure(`worker ${index} stopped (exit code ${code})`);
    });
    return { w, index, exited, reports: [] as WorkerReport[], waiters: [] as (() => void)[] };
  });
  for (const x of workers) {
    x.w.on('message', (r: WorkerReport) => {
      x.reports.push(r);
      for (const f of x.waiters.splice(0)) f();
    });
  }
  const next = (x: (typeof workers)[number], kinds: WorkerReport['kind'][]) =>
    new Promise<WorkerReport | undefined>((resolve) => {
      const look = () => {
        const r = x.reports.find((r) => kinds.includes(r.kind));
        if (r) return resolve(r);
        x.waiters.push(look);
      };
      look();
      void x.exited.then(() => resolve(x.reports.find((r) => kinds.includes(r.kind))));
    });

  const close = async () => {
    if (closing) return;
    closing = true;
    for (const x of workers) x.w.postMessage({ kind: 'close' } satisfies WorkerCommand);
    await Promise.all(workers.map(async (x) => {
      await next(x, ['closed', 'failed']);
      // Its listen socket is closed: a worker still held by a handle after that is ended.
      const timer = setTimeout(() => void x.w.terminate(), 2_000);
      await x.exited;
      clearTimeout(timer);
    }));
    if (backendWatch) clearInterval(backendWatch);
    await nativeBackend?.stop();
  };

  const started = await Promise.all(workers.map((x) => next(x, ['ready', 'failed'])));
  const bad = started.find((r) => r?.kind !== 'ready');
  if (bad) {
    await close();
    throw new Error(bad?.kind === 'failed' ? bad.message : 'a worker stopped while starting');
  }
  const ready = started as Extract<WorkerReport, { kind: 'ready' }>[];
  log.info({ port, workers: count, cores: os.availableParallelism(), reason: config.workersReason }, 'parley node ready');
  return {
    config, log, port, workers: count, nativeBackend, failed, close,
    bootstrapKey: ready.find((r) => r.bootstrapKey)?.bootstrapKey,
    threads: ready.map((r) => r.tid),
    teamId: ready[0]!.teamId,
  };
}
