/**
 * One worker of a node of several (`PARLEY_WORKERS`): a whole platform (its HTTP app, runtime,
 * background workers) in a worker thread, listening on the port the main thread claimed
 * (`src/threads/primary.ts`). It tells the main thread when it is ready (or failed), and closes
 * when asked: the HTTP server stops accepting, the sessions drain, the modules close, and the
 * listen socket is closed before the thread ends (a uWS app's open handle would abort Node).
 */
import { readlinkSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import type { ConfigOverrides } from '../config.ts';
import { startPlatform, type Platform } from '../platform.ts';
import { Siblings, type WorkerSetup } from './siblings.ts';

/** What a worker tells the main thread. */
export type WorkerReport =
  | { kind: 'ready'; index: number; bootstrapKey?: string; teamId: string; tid: number | null }
  | { kind: 'failed'; index: number; message: string }
  | { kind: 'closed'; index: number };

/** What the main thread tells a worker. */
export type WorkerCommand = { kind: 'close' };

const setup = workerData as WorkerSetup & {
  overrides: ConfigOverrides;
  dbSchema?: string;
  statePrefix?: string;
  /** The native backend the main thread launched: its address and state (running, restarts). */
  backend?: { address: string; state: SharedArrayBuffer };
};
const port = parentPort!;
const siblings = new Siblings(setup.index, setup.count, setup.ports);
const report = (r: WorkerReport) => port.postMessage(r);

let platform: Platform | undefined;
let closing: Promise<void> | undefined;
const close = () =>
  (closing ??= (async () => {
    try {
      await platform?.close();
    } finally {
      siblings.close();
      report({ kind: 'closed', index: setup.index });
      port.close();
    }
  })());

port.on('message', (m: WorkerCommand) => {
  if (m.kind === 'close') void close();
});

/** This thread's Linux id (`/proc/thread-self`), for per-worker CPU figures; null elsewhere. */
function threadId(): number | null {
  try {
    return Number(readlinkSync('/proc/thread-self').split('/').pop()) || null;
  } catch {
    return null;
  }
}

try {
  platform = await startPlatform({
    config: { ...setup.overrides, port: setup.port },
    dbSchema: setup.dbSchema,
    statePrefix: setup.statePrefix,
    worker: { index: setup.index, count: setup.count, siblings, capacity: new Int32Array(setup.capacity) },
  });
  const backend = setup.backend;
  if (backend) {
    // The main thread supervises the native backend; /health reports it as a single loop does.
    const state = new Int32Array(backend.state);
    platform.health.register('native_backend', async () => {
      const restarts = Atomics.load(state, 1);
      return Atomics.load(state, 0) ? { status: 'ok', detail: `${backend.address}, restarts ${restarts}` } : { status: 'down', detail: `restarting (restarts ${restarts})` };
    }, { requiredForReady: false });
  }
  platform.log.info({ worker: setup.index }, 'worker ready');
  report({ kind: 'ready', index: setup.index, bootstrapKey: platform.bootstrapKey, teamId: platform.teamId, tid: threadId() });
} catch (err) {
  report({ kind: 'failed', index: setup.index, message: err instanceof Error ? err.message : String(err) });
  siblings.close();
  port.close();
}
