// A small pool of worker threads running one kind of job, so CPU-heavy engine work never
// blocks the gRPC event loop. Protocol: the worker posts `{ready: true}` once loaded, then
// answers each `{id, ...job}` with `{id, ...result}` or `{id, error}`.
import { Worker } from 'node:worker_threads';

interface Job {
  id: number;
  resolve: (r: Record<string, unknown>) => void;
  reject: (e: Error) => void;
}

interface Slot {
  w: Worker;
  busy: Job | null;
  ready: Promise<void>;
}

export class WorkerPool {
  private slots: Slot[] = [];
  private queue: { msg: object; job: Job }[] = [];
  private nextId = 1;
  private closed = false;

  /** `entry` is a worker script; `.ts` entries are booted through tsx by ts-worker.mjs. */
  constructor(
    private readonly entry: URL,
    private readonly size: number,
  ) {
    for (let i = 0; i < size; i++) this.spawn();
  }

  private spawn() {
    const ts = this.entry.pathname.endsWith('.ts');
    // execArgv []: workers do not inherit the parent's loaders (a test runner's, tsx's);
    // ts-worker.mjs registers tsx itself.
    const w = ts
      ? new Worker(new URL('./ts-worker.mjs', import.meta.url), { workerData: { entry: this.entry.href }, execArgv: [] })
      : new Worker(this.entry, { execArgv: [] });
    w.unref();
    const slot: Slot = { w, busy: null, ready: new Promise<void>((r) => w.once('message', () => r())) };
    w.on('message', (m: { id?: number; error?: string }) => {
      const job = slot.busy;
      if (!job || m.id !== job.id) return;
      slot.busy = null;
      if (m.error) job.reject(new Error(m.error));
      else job.resolve(m as Record<string, unknown>);
      this.pump();
    });
    w.on('error', (err) => {
      slot.busy?.reject(err);
      this.slots = this.slots.filter((s) => s !== slot);
      if (!this.closed) this.spawn();
    });
    this.slots.push(slot);
  }

  /** Resolves when every worker has loaded. */
  async ready(): Promise<void> {
    await Promise.all(this.slots.map((s) => s.ready));
  }

  run<R>(msg: object): Promise<R> {
    if (this.closed) return Promise.reject(new Error('engine closed'));
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ msg, job: { id: this.nextId++, resolve: resolve as (r: Record<string, unknown>) => void, reject } });
      this.pump();
    });
  }

  private pump() {
    for (const slot of this.slots) {
      if (slot.busy || this.queue.length === 0) continue;
      const { msg, job } = this.queue.shift()!;
      slot.busy = job;
      slot.ready.then(() => slot.w.postMessage({ ...msg, id: job.id }));
    }
  }

  async close() {
    this.closed = true;
    const slots = this.slots;
    this.slots = [];
    for (const q of this.queue) q.job.reject(new Error('engine closed'));
    this.queue = [];
    for (const s of slots) s.busy?.reject(new Error('engine closed'));
    await Promise.all(slots.map((s) => s.w.terminate()));
  }
}

