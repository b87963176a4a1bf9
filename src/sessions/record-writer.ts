/**
 * A live session's record in the store: its items as the conversation goes, then its end.
 * Writes run in order, one at a time, each item with an id (`ref`) so that a batch written again
 * after a lost answer skips what was stored. When the store cannot be reached (a Postgres restart,
 * `isConnectionError`), the session keeps talking: items wait in memory (bounded per session)
 * and are retried with backoff until stored, in order; an end that cannot be written is retried
 * after them for a bounded time (docs/reliability.md, "Faults"). A write the store refuses for
 * another reason is logged and dropped, as it would be refused again.
 */
import { randomBytes } from 'node:crypto';
import { isConnectionError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Sql } from '../store/db.ts';
import { markSessionEnded } from './store.ts';

export interface SessionEndRecord {
  status: 'completed' | 'failed';
  reason: string;
  metrics?: unknown;
}

export interface RecordWriterOptions {
  sql: Sql;
  sessionId: string;
  log: Logger;
  /** How items reach the store: the runtime's `ItemBatcher` (item-batch.ts), with every live session's. */
  append: (sessionId: string, items: { type: string; payload: unknown; ref: string }[]) => Promise<void>;
  /** Items kept while the store is unreachable, at most; later ones are dropped (and counted). Default 2,000. */
  maxPendingItems?: number;
  /** How long after the session ended its record is retried, default 10 minutes. */
  endRetryMs?: number;
  /** First and longest wait between attempts, default 250 ms and 5 s (doubling). */
  backoffMs?: { first: number; max: number };
}

/** How `finish` left the record: written, still being retried (the store is unreachable), or given up. */
export type RecordOutcome = 'stored' | 'deferred' | 'failed';

const BATCH = 200;

export class SessionRecordWriter {
  private readonly pending: { type: string; payload: unknown; ref: string }[] = [];
  /** Each item's `ref` (this writer's prefix and a count): a retried batch skips what was stored. */
  private readonly refPrefix = randomBytes(6).toString('base64url');
  private refs = 0;
  private dropped = 0;
  private end: (SessionEndRecord & { at: Date }) | null = null;
  private running: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private wake: (() => void) | null = null;
  private stopped = false;
  private failures = 0;
  /** The end was delayed by the store (it is then dated when the session ended). */
  private late = false;
  private settle: ((o: RecordOutcome) => void) | null = null;
  private finished: Promise<void> | null = null;
  private resolveFinished: (() => void) | null = null;

  constructor(private readonly o: RecordWriterOptions) {}

  /** Queues items (in order) and writes them as soon as the store takes them. */
  add(items: { type: string; payload: unknown }[]): void {
    if (this.stopped || this.end || items.length === 0) return;
    const max = this.o.maxPendingItems ?? 2000;
    const room = Math.max(0, max - this.pending.length);
    if (room < items.length) {
      if (this.dropped === 0) this.o.log.error({ kept: max }, 'session items dropped: too many waiting for the store');
      this.dropped += items.length - room;
    }
    for (const i of items.slice(0, room)) this.pending.push({ type: i.type, payload: i.payload, ref: `${this.refPrefix}:${this.refs++}` });
    this.kick();
  }

  /**
   * Writes the end after the items. Resolves `stored` once written, `deferred` as soon as the
   * store is found unreachable (the writer goes on retrying: `done` resolves when it stops),
   * `failed` when the store refused it.
   */
  finish(end: SessionEndRecord): Promise<RecordOutcome> {
    this.end = { ...end, at: new Date() };
    this.finished = new Promise<void>((r) => (this.resolveFinished = r));
    const outcome = new Promise<RecordOutcome>((r) => (this.settle = r));
    if (this.failures > 0) {
      this.late = true;
      this.resolveOutcome('deferred');
    }
    this.kick();
    return outcome;
  }

  /** Resolves when the record is written or given up (after `finish`). */
  get done(): Promise<void> {
    return this.finished ?? Promise.resolve();
  }

  /** Whether items or an end still wait for the store. */
  get waiting(): boolean {
    return this.pending.length > 0 || this.resolveFinished !== null;
  }

  /** Stops retrying (shutdown): what is still waiting is logged and given up. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    if (this.pending.length || this.resolveFinished) {
      this.o.log.error({ items: this.pending.length, end: this.end !== null }, 'session record not stored: the store stayed unreachable until shutdown');
    }
    this.pending.length = 0;
    this.complete('failed');
  }

  private kick(): void {
    this.running ??= this.drain().finally(() => {
      this.running = null;
      if (!this.stopped && (this.pending.length || this.resolveFinished)) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (!this.stopped && this.pending.length) {
      const batch = this.pending.slice(0, BATCH);
      try {
        await this.o.append(this.o.sessionId, batch);
        this.pending.splice(0, batch.length);
        this.recovered();
      } catch (err) {
        if (!isConnectionError(err)) {
          this.o.log.error({ err, items: batch.length }, 'session items not stored');
          this.pending.splice(0, batch.length);
          continue;
        }
        if (this.givenUp()) return;
        await this.backoff(err);
      }
    }
    if (this.stopped || !this.end || !this.resolveFinished) return;
    const end = this.end;
    while (!this.stopped) {
      try {
        // A retried end is dated when the session ended, not when the store came back.
        await markSessionEnded(this.o.sql, this.o.sessionId, { status: end.status, reason: end.reason, metrics: end.metrics, ...(this.late ? { at: end.at } : {}) });
        this.recovered();
        return this.complete('stored');
      } catch (err) {
        if (!isConnectionError(err)) {
          this.o.log.error({ err }, 'session end not stored');
          return this.complete('failed');
        }
        if (this.givenUp()) return;
        await this.backoff(err);
      }
    }
  }

  /** After the end, retrying stops `endRetryMs` after the session ended. */
  private givenUp(): boolean {
    if (!this.end || Date.now() - this.end.at.getTime() < (this.o.endRetryMs ?? 600_000)) return false;
    this.o.log.error({ items: this.pending.length, endedAt: this.end.at.toISOString() }, 'session record not stored: the store stayed unreachable');
    this.pending.length = 0;
    this.complete('failed');
    return true;
  }

  private backoff(err: unknown): Promise<void> {
    if (this.failures === 0) this.o.log.warn({ err: String(err) }, 'session record waits for the store');
    this.failures++;
    if (this.end) this.late = true;
    this.resolveOutcome('deferred');
    const { first, max } = this.o.backoffMs ?? { first: 250, max: 5000 };
    const ms = Math.min(max, first * 2 ** Math.min(this.failures - 1, 16));
    return new Promise<void>((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, ms);
      this.timer.unref();
    });
  }

  private recovered(): void {
    if (this.failures > 0) this.o.log.info({ attempts: this.failures }, 'session record written after the store came back');
    this.failures = 0;
  }

  private resolveOutcome(o: RecordOutcome): void {
    this.settle?.(o);
    this.settle = null;
  }

  private complete(o: RecordOutcome): void {
    this.resolveOutcome(o);
    this.resolveFinished?.();
    this.resolveFinished = null;
  }
}
