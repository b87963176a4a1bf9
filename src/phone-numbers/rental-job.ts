import type { Logger } from '../log.ts';
import type { Sql } from '../store/db.ts';
import { failStaleProvisioning, settleNextRentalDay, type RentalOutcome } from './store.ts';

export interface PhoneRentalJobOptions {
  sql: Sql;
  log: Logger;
  /** How often a node looks for due rental days. */
  intervalMs?: number;
  /** Unpaid rental this long past `paid_through` suspends the number. */
  graceMs?: number;
  /** While a team cannot pay, its number is retried this often. */
  retryMs?: number;
  /** A purchase still `provisioning` after this long failed (its node died): error + refund. */
  provisioningTimeoutMs?: number;
  /** Rental days settled per tick at most (a backlog continues on the next tick). */
  batch?: number;
  /** Wall clock; tests inject their own `now` into `tick` instead. */
  now?: () => Date;
}

export interface TickReport {
  charged: number;
  unpaid: number;
  suspended: number;
  staleFailed: number;
}

export const RENTAL_DEFAULTS = {
  intervalMs: 60_000,
  graceMs: 3 * 24 * 3600_000,
  retryMs: 3600_000,
  provisioningTimeoutMs: 10 * 60_000,
  batch: 500,
};

/**
 * The durable daily rental of phone numbers. The state lives in Postgres (`paid_through` and
 * `next_charge_at` on each number); every node runs this job and each settlement locks one
 * due number with `FOR UPDATE SKIP LOCKED`, so several nodes share the work and no day is
 * charged twice. A node that was down catches up: a number owed several days is charged day
 * by day, each in its own statement.
 */
export class PhoneRentalJob {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private readonly o: Required<Omit<PhoneRentalJobOptions, 'now'>> & { now: () => Date };

  constructor(opts: PhoneRentalJobOptions) {
    this.o = { ...RENTAL_DEFAULTS, now: () => new Date(), ...opts } as typeof this.o;
  }

  /** One pass at `now`: fails stale purchases, then settles every due rental day (up to `batch`). */
  async tick(now: Date = this.o.now()): Promise<TickReport> {
    const report: TickReport = { charged: 0, unpaid: 0, suspended: 0, staleFailed: 0 };
    report.staleFailed = await failStaleProvisioning(this.o.sql, new Date(now.getTime() - this.o.provisioningTimeoutMs));
    for (let i = 0; i < this.o.batch; i++) {
      const r: RentalOutcome | undefined = await settleNextRentalDay(this.o.sql, now, { graceMs: this.o.graceMs, retryMs: this.o.retryMs });
      if (!r) break;
      if (r.paid) report.charged++;
      else report.unpaid++;
      if (r.status === 'suspended') report.suspended++;
    }
    if (report.charged || report.unpaid || report.staleFailed) this.o.log.info({ ...report }, 'phone number rental settled');
    return report;
  }

  /** Runs `tick` every `intervalMs` (the timer does not keep the process alive). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (this.running) return; // the previous pass is still going
      this.running = this.tick()
        .catch((err) => this.o.log.error({ err }, 'phone number rental pass failed'))
        .finally(() => (this.running = undefined));
    }, this.o.intervalMs);
    this.timer.unref();
  }

  /** Stops the timer and waits for a pass in progress. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
