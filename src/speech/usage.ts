/**
 * Metering of the speech API: characters synthesized and seconds transcribed, recorded per
 * team after each call and settled against the team's credit (ledger entry). Recording
 * never fails a request: errors are logged and swallowed. Before a call starts,
 * `ensureCredit` refuses a team whose credit is exhausted (402 `Out of API credit`).
 *
 * Prices are per model, in micro-units of the billing currency (D-BILL-1):
 * synthesis 15 per character ($15 per million characters; `s2.1-pro-free` is free),
 * transcription 100 per second ($0.36 per hour), voice design 10,000 per successful call ($0.01).
 */
import { dependencyUnavailable, isConnectionError, ServiceError } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Logger } from '../log.ts';
import type { Sql } from '../store/db.ts';
import { STORE_RETRY, untilStored } from '../store/retry.ts';
import { creditOf, insertUsages, type NewUsage, type UsageKind, type UsageRow } from '../usage/store.ts';

export type { UsageKind } from '../usage/store.ts';

const PRICE_MICROS: Record<UsageKind, Record<string, number>> = {
  tts_characters: { 's2.1-pro': 15, 's2.1-pro-free': 0, 's2-pro': 15, s1: 15 },
  asr_seconds: { 'transcribe-1': 100 },
  voice_designs: { 'voice-design-1': 10_000 },
};
const DEFAULT_PRICE: Record<UsageKind, number> = { tts_characters: 15, asr_seconds: 100, voice_designs: 10_000 };

/** What `amount` of `kind` on `model` costs, in micro-units (rounded up). */
export function costMicros(kind: UsageKind, model: string, amount: number): bigint {
  const unit = PRICE_MICROS[kind][model] ?? DEFAULT_PRICE[kind];
  return BigInt(Math.ceil(Math.max(0, amount) * unit));
}

/**
 * Records one call's usage and settles it against credit. Never throws: a failure is
 * logged (when `log` is given) and reported as undefined.
 *
 * Calls are written in batches, one statement per batch (`insertUsages`): calls made while
 * a statement runs go together in the next one, and a caller that does not wait for the
 * answer passes `later` (the synthesis paths: usage is recorded after the response ended):
 * its call waits up to USAGE_BATCH_MS (200 ms) for others. Callers that answer their client
 * only after the record (transcription, voice design) are written at once. At 30+
 * syntheses a second a statement per call was the platform's largest cost per synthesis
 * after the socket writes (the embedded store runs in the platform's process); a batch
 * costs little more than one row, and the credit check reads a cached answer up to 2 s old
 * anyway. A failed batch is retried row by row, so one bad row loses only itself.
 *
 * While the store is unreachable (a restart, a cut: `isConnectionError`) a batch is retried
 * with backoff (250 ms doubling to 5 s, `untilStored`) for up to 10 minutes after its oldest
 * call, and what is recorded meanwhile waits behind it; nobody waits for the answer then (the
 * call resolves undefined at once). A retry cannot bill twice: each call gets its `ref` before
 * the first attempt and `insertUsages` skips the refs already stored (a statement that
 * committed as its connection dropped). `flushUsage` writes what waits (the speech module calls
 * it at shutdown, with the drain time).
 *
 * What waits is bounded: once `PARLEY_USAGE_BACKLOG_MAX` records (50,000 by default: ~40 MB
 * at ~800 B a record, `configureUsage`) wait for the store, `CreditGate.ensure` refuses new billable
 * calls (`503` `Usage cannot be recorded now: the store is unreachable; try again shortly`,
 * `Retry-After: 2`; an error log once per episode, `usageBacklog` for the metric) until the
 * store has taken the backlog below the mark. Calls already under way when the mark was
 * reached are still queued and billed (nothing is dropped for room): the backlog stays below
 * the mark plus the calls running at that moment, which the speech concurrency caps bound.
 */
export async function recordUsage(
  sql: Sql,
  u: { teamId: string; kind: UsageKind; amount: number; model: string },
  log?: Logger,
  opts: { later?: boolean } = {},
): Promise<UsageRow | undefined> {
  if (!(u.amount > 0)) return undefined;
  return batcherOf(sql).add({ ...u, ref: newId('use'), costMicros: costMicros(u.kind, u.model, u.amount) }, log, opts.later === true);
}

/** Rows per statement at most. */
const MAX_BATCH = 200;
/** How long a recorded call waits for others before its statement starts. */
export const USAGE_BATCH_MS = 200;
/** How long a call's record is retried while the store is unreachable, from when it was recorded. */
const USAGE_RETRY_MS = STORE_RETRY.forMs;
const batchers = new WeakMap<Sql, UsageBatcher>();
/** `PARLEY_USAGE_BACKLOG_MAX` default. */
export const USAGE_BACKLOG_MAX = 50_000;

function batcherOf(sql: Sql): UsageBatcher {
  let batcher = batchers.get(sql);
  if (!batcher) batchers.set(sql, (batcher = new UsageBatcher(sql)));
  return batcher;
}

/** Sets the backlog's mark for the usage written through `sql` (`PARLEY_USAGE_BACKLOG_MAX`), and where its episodes are logged. */
export function configureUsage(sql: Sql, o: { backlogMax: number; log?: Logger }): void {
  const b = batcherOf(sql);
  b.backlogMax = o.backlogMax;
  b.log = o.log;
}

/** Records waiting to be written through `sql` (a batch being retried included), and whether new billable calls are refused for it. */
export function usageBacklog(sql: Sql): { waiting: number; full: boolean } {
  const b = batchers.get(sql);
  return { waiting: b?.waiting ?? 0, full: b?.full ?? false };
}

/**
 * Writes the usage waiting for a batch now; resolves when everything recorded so far is written
 * or, after `timeoutMs` (shutdown: the drain time), when what the store has not taken by then is
 * given up (logged as an error with its count and cost).
 */
export async function flushUsage(sql: Sql, timeoutMs = 10_000): Promise<void> {
  const batcher = batchers.get(sql);
  if (!batcher) return;
  const flushed = batcher.flush();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([flushed, new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
  clearTimeout(timer);
  batcher.stop();
  await flushed;
}

interface Pending {
  u: NewUsage;
  log?: Logger;
  /** When the call was recorded (its record is retried for USAGE_RETRY_MS from then). */
  at: number;
  resolve(row: UsageRow | undefined): void;
}

class UsageBatcher {
  private queue: Pending[] = [];
  /** The batch being written (retried while the store is unreachable). */
  private inFlight = 0;
  backlogMax = USAGE_BACKLOG_MAX;
  log: Logger | undefined;
  /** New billable calls are refused: the backlog reached `backlogMax` and has not gone below it. */
  full = false;
  private writing: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** The store was found unreachable and has taken no batch since: nobody waits for a record. */
  private unreachable = false;
  private readonly stopping = new AbortController();
  constructor(private readonly sql: Sql) {}

  get waiting(): number {
    return this.queue.length + this.inFlight;
  }

  /** Updates `full` from the backlog, logging the start and the end of an episode. */
  private checkBacklog(): void {
    const waiting = this.waiting;
    if (!this.full && this.backlogMax > 0 && waiting >= this.backlogMax) {
      this.full = true;
      const costMicros = [...this.queue].reduce((sum, p) => sum + p.u.costMicros, 0n);
      (this.log ?? this.queue[0]?.log)?.error({ waiting, max: this.backlogMax, queuedCostMicros: costMicros.toString() }, 'usage backlog full: billable calls refused (503) until the store takes it');
    } else if (this.full && waiting < this.backlogMax) {
      this.full = false;
      (this.log ?? this.queue[0]?.log)?.warn({ waiting, max: this.backlogMax }, 'usage backlog below its mark: billable calls accepted again');
    }
  }

  add(u: NewUsage, log: Logger | undefined, later: boolean): Promise<UsageRow | undefined> {
    return new Promise((resolve) => {
      this.queue.push({ u, log, at: Date.now(), resolve });
      this.checkBacklog();
      if (this.unreachable) resolve(undefined); // written once the store is back
      if (this.writing) return; // goes with the next statement
      if (!later) void this.flush();
      else this.timer ??= setTimeout(() => void this.flush(), USAGE_BATCH_MS).unref();
    });
  }

  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    while (this.writing) await this.writing;
    if (!this.queue.length) return;
    this.writing = this.write().finally(() => (this.writing = null));
    await this.writing;
  }

  /** Stops waiting for the store (shutdown): a batch it cannot take now is given up. */
  stop(): void {
    this.stopping.abort();
  }

  private async write(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue.splice(0, MAX_BATCH);
      this.inFlight = batch.length;
      try {
        const rows = await this.store(batch);
        batch.forEach((p, i) => p.resolve(rows[i]));
      } catch (err) {
        if (isConnectionError(err)) this.lost(this.stopping.signal.aborted ? batch.concat(this.queue.splice(0)) : batch, err);
        else if (batch.length === 1) this.failed(batch[0]!, err);
        else {
          for (const p of batch) {
            await this.store([p]).then((rows) => p.resolve(rows[0]), (e: unknown) => (isConnectionError(e) ? this.lost([p], e) : this.failed(p, e)));
          }
        }
      } finally {
        this.inFlight = 0;
        this.checkBacklog();
      }
    }
  }

  /**
   * One statement, retried while the store is unreachable (idempotent: each call's `ref`);
   * while it waits, the callers of its calls and of those queued behind it are answered at
   * once (undefined).
   */
  private async store(batch: Pending[]): Promise<(UsageRow | undefined)[]> {
    const log = batch.find((p) => p.log)?.log;
    const rows = await untilStored(() => insertUsages(this.sql, batch.map((p) => p.u)), {
      giveUpAt: batch[0]!.at + USAGE_RETRY_MS,
      signal: this.stopping.signal,
      onUnreachable: (err) => {
        if (!this.unreachable) log?.warn({ err: String(err) }, 'usage waits for the store');
        this.unreachable = true;
        for (const p of [...batch, ...this.queue]) p.resolve(undefined); // and what queued behind it
      },
    });
    if (this.unreachable) log?.info({ records: batch.length }, 'usage written after the store came back');
    this.unreachable = false;
    return rows;
  }

  private failed(p: Pending, err: unknown): void {
    p.log?.warn({ err, teamId: p.u.teamId, kind: p.u.kind }, 'usage recording failed');
    p.resolve(undefined);
  }

  /** The store stayed unreachable (10 minutes, or until shutdown): these calls are not billed. */
  private lost(list: Pending[], err: unknown): void {
    const costMicros = list.reduce((sum, p) => sum + p.u.costMicros, 0n);
    list.find((p) => p.log)?.log?.error({ err: String(err), records: list.length, costMicros: costMicros.toString() }, 'usage not recorded: the store stayed unreachable');
    for (const p of list) p.resolve(undefined);
  }
}

/**
 * Refuses calls from a team with no credit left (402). The answer is cached per team for
 * `cacheMs` so the hot path does not query the store on every request; a team calling past
 * half of that has its credit re-read in the background while the cached answer serves, so
 * steady traffic never waits for the store (an answer is still never older than `cacheMs`).
 */
export class CreditGate {
  private cache = new Map<string, { ok: boolean; until: number; refreshing?: boolean }>();
  constructor(private readonly sql: Sql, private readonly cacheMs = 2000) {}

  async ensure(teamId: string): Promise<void> {
    // Calls that would be billed while the usage backlog is full are refused, not served unbilled.
    if (usageBacklog(this.sql).full) throw dependencyUnavailable('Usage cannot be recorded now: the store is unreachable; try again shortly');
    const now = Date.now();
    let hit = this.cache.get(teamId);
    if (!hit || hit.until <= now) hit = await this.load(teamId, now);
    else if (!hit.refreshing && hit.until - now < this.cacheMs / 2) {
      const h = hit;
      h.refreshing = true;
      this.load(teamId, now).then(
        () => (h.refreshing = false),
        () => (h.refreshing = false), // the entry runs out on its own; the next call reads again
      );
    }
    if (!hit.ok) throw new ServiceError('payment_required', 'Out of API credit');
  }

  private async load(teamId: string, now: number): Promise<{ ok: boolean; until: number }> {
    const credit = await creditOf(this.sql, teamId);
    const entry = { ok: credit !== undefined && credit > 0n, until: now + this.cacheMs };
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(teamId, entry);
    return entry;
  }

  /** Forget a team's cached answer (after its credit changed on this node). */
  forget(teamId: string): void {
    this.cache.delete(teamId);
  }
}
