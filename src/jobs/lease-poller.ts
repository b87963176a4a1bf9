/**
 * The loop shared by the durable queue workers (post-call webhooks, post-call analysis): poll
 * the table, claim due rows under a lease (the claim query is the worker's), run each claimed
 * row with its own abort signal, keep at most `concurrency` in flight, and on close stop
 * polling, abort what runs and wait for it (each worker's run hands its row back on abort).
 */
import { isConnectionError } from '../errors.ts';
import type { Logger } from '../log.ts';

export interface LeasePollerOptions<Row> {
  /** Names the queue in the log line of a failed poll. */
  name: string;
  log: Logger;
  pollMs: number;
  concurrency: number;
  /** Claims at most `limit` due rows under this node's lease. */
  claim(limit: number): Promise<Row[]>;
  key(row: Row): string;
  /** Works one claimed row; a rejection is logged with `failure`, never thrown further. */
  run(row: Row, signal: AbortSignal): Promise<void>;
  /** Log message and fields of a run that rejected (its outcome was not recorded). */
  failure(row: Row): { fields: Record<string, unknown>; msg: string };
}

export class LeasePoller<Row> {
  private readonly inFlight = new Map<string, { ac: AbortController; done: Promise<void> }>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private stopped = true;
  /** Polls failed in a row. */
  private failing = 0;

  constructor(private readonly o: LeasePollerOptions<Row>) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule(0);
  }

  /** Claims and starts what is due now; resolves once claimed (not once worked). */
  async tick(): Promise<number> {
    if (this.stopped) return 0;
    const rows = await this.o.claim(this.o.concurrency - this.inFlight.size);
    for (const row of rows) {
      const ac = new AbortController();
      const key = this.o.key(row);
      const done = this.o
        .run(row, ac.signal)
        .catch((err) => {
          const { fields, msg } = this.o.failure(row);
          this.o.log.error({ err, ...fields }, msg);
        })
        .finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, { ac, done });
    }
    return rows.length;
  }

  /** Stops polling, aborts the rows in flight and waits for them to hand their rows back. */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    for (const f of this.inFlight.values()) f.ac.abort();
    await Promise.all([...this.inFlight.values()].map((f) => f.done));
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .then(
          () => {
            if (this.failing) this.o.log.info({ failedPolls: this.failing }, `${this.o.name} queue poll resumed`);
            this.failing = 0;
          },
          (err) => {
            if (this.stopped) return;
            // A store outage fails every poll until it ends: one warning, then the count at resume.
            if (this.failing++ === 0 || !isConnectionError(err)) this.o.log.warn({ err: isConnectionError(err) ? String(err) : err }, `${this.o.name} queue poll failed`);
          },
        )
        .finally(() => {
          this.ticking = undefined;
          this.schedule(this.o.pollMs);
        });
    }, ms);
  }
}
