/**
 * The speech concurrency cap (docs/api/speech.md "Concurrency"; D-TTS-5): per team, at most N speech
 * requests at once — a synthesis (`POST /v1/tts`, with-timestamp, a `wss /v1/tts/live`
 * socket, each compat synthesis), or a transcription (`POST /v1/asr` and the compat
 * transcriptions, which call the same services). N comes from the team's spend tier:
 * 5 below $100 paid, 15 from $100, 50 from $1,000 ("paid": the net of its credit grants,
 * `src/usage/store-spend.ts`), or from `PARLEY_SPEECH_CONCURRENCY` for every team.
 *
 * Slots live in the shared state (a counting semaphore; Redis holds it across nodes). Each
 * slot is a lease that this node renews while the request runs, so the slots of a node that
 * died free themselves after `leaseMs`. Over the cap: 429 `Too many concurrent requests`
 * with `Retry-After`. The services acquire a slot once, where they check credit
 * (`TtsService.prepare`, `AsrService.transcribe`); it is released when the request
 * finishes, fails, or its caller goes away (the caller's signal).
 */
import { randomUUID } from 'node:crypto';
import { ServiceError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { SharedState } from '../state/index.ts';
import type { Sql } from '../store/db.ts';
import { paidMicros } from '../usage/store-spend.ts';

/** Spend tiers, highest first: paid micro-units at or above `minPaidMicros` allow `limit`. */
export const SPEECH_TIERS: readonly { minPaidMicros: bigint; limit: number }[] = [
  { minPaidMicros: 1_000_000_000n, limit: 50 },
  { minPaidMicros: 100_000_000n, limit: 15 },
  { minPaidMicros: 0n, limit: 5 },
];

/** The concurrency a team that paid `paid` micro-units gets. */
export function tierLimit(paid: bigint): number {
  return SPEECH_TIERS.find((t) => paid >= t.minPaidMicros)!.limit;
}

/** Read with the rest of the configuration (src/config.ts). */
export { parseSpeechConcurrency } from '../config.ts';

/** One held slot. `release` is idempotent. */
export interface SpeechSlot {
  release(): void;
}

export interface SpeechConcurrencyOptions {
  state: SharedState;
  /** The store, for the spend tier (not needed with `override`). */
  sql?: Sql;
  /** N for every team (`PARLEY_SPEECH_CONCURRENCY`); undefined: the spend tiers. */
  override?: number;
  log?: Logger;
  /** A slot's lease; renewed every `leaseMs / 3` while held. Default 30 s. */
  leaseMs?: number;
  /** How long a team's tier is trusted without asking the store again. Default 30 s. */
  tierCacheMs?: number;
  /** The `Retry-After` of a 429, in seconds. Default 1. */
  retryAfterS?: number;
}

export const SPEECH_CONCURRENCY_MESSAGE = 'Too many concurrent requests';

/** How often a slot whose acquisition failed is released again until the shared state answers. */
const RELEASE_RETRY_MS = 1000;

export class SpeechConcurrency {
  private readonly leaseMs: number;
  private readonly tierCacheMs: number;
  private readonly tiers = new Map<string, { limit: number; until: number }>();
  /** Slots this node holds: holder id → semaphore key (renewed together). */
  private readonly held = new Map<string, string>();
  private renewer?: NodeJS.Timeout;

  constructor(private readonly o: SpeechConcurrencyOptions) {
    this.leaseMs = o.leaseMs ?? 30_000;
    this.tierCacheMs = o.tierCacheMs ?? 30_000;
    if (o.override === undefined && !o.sql) throw new Error('SpeechConcurrency needs sql for the spend tiers, or an override');
  }

  /** The team's N: the override, else its spend tier (cached). */
  async limitFor(teamId: string): Promise<number> {
    if (this.o.override !== undefined) return this.o.override;
    const now = Date.now();
    const hit = this.tiers.get(teamId);
    if (hit && hit.until > now) return hit.limit;
    const limit = tierLimit(await paidMicros(this.o.sql!, teamId));
    if (this.tiers.size > 10_000) this.tiers.clear();
    this.tiers.set(teamId, { limit, until: now + this.tierCacheMs });
    return limit;
  }

  /**
   * Takes one of the team's slots, or throws 429 with `Retry-After`. The slot is released by
   * `release()` or when `signal` aborts (the caller went away), whichever comes first.
   */
  async acquire(teamId: string, signal?: AbortSignal): Promise<SpeechSlot> {
    const limit = await this.limitFor(teamId);
    const key = `speech-slots:${teamId}`;
    const holder = randomUUID();
    let r: Awaited<ReturnType<SharedState['acquireSlot']>>;
    try {
      r = await this.o.state.acquireSlot(key, holder, limit, this.leaseMs);
    } catch (err) {
      // Unanswered is not undone: the acquisition may have run (its reply lost to a dropped or
      // silent connection). Released once the shared state answers, so it does not hold one of
      // the team's slots for a whole lease (bench/chaos.ts --fault redis-blackhole).
      this.releaseWhenReachable(key, holder);
      throw err;
    }
    if (!r.acquired) {
      throw new ServiceError('rate_limited', `${SPEECH_CONCURRENCY_MESSAGE}: this team may run ${limit} speech requests at once`, {
        headers: { 'Retry-After': String(this.o.retryAfterS ?? 1) },
      });
    }
    this.held.set(holder, key);
    this.startRenewing();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      signal?.removeEventListener('abort', release);
      this.held.delete(holder);
      if (this.held.size === 0) this.stopRenewing();
      // A failed release is harmless: the lease runs out on its own.
      this.o.state.releaseSlot(key, holder).catch((err) => this.o.log?.warn({ err }, 'speech slot release failed'));
    };
    if (signal?.aborted) release();
    else signal?.addEventListener('abort', release, { once: true });
    return { release };
  }

  /** Releases `holder` in the background, retrying every second for one lease. */
  private releaseWhenReachable(key: string, holder: string): void {
    const giveUpAt = Date.now() + this.leaseMs;
    const attempt = (): void => {
      this.o.state.releaseSlot(key, holder).catch(() => {
        if (Date.now() < giveUpAt) setTimeout(attempt, RELEASE_RETRY_MS).unref();
      });
    };
    attempt();
  }

  /** Slots this node holds now (tests, metrics). */
  get active(): number {
    return this.held.size;
  }

  /** Stops renewing; held leases run out on their own. */
  close(): void {
    this.stopRenewing();
    this.held.clear();
  }

  private startRenewing(): void {
    if (this.renewer) return;
    this.renewer = setInterval(() => void this.renew(), Math.max(1, Math.floor(this.leaseMs / 3)));
    this.renewer.unref();
  }

  private stopRenewing(): void {
    clearInterval(this.renewer);
    this.renewer = undefined;
  }

  private async renew(): Promise<void> {
    await Promise.all(
      [...this.held].map(async ([holder, key]) => {
        try {
          if (!(await this.o.state.renewSlot(key, holder, this.leaseMs)) && this.held.has(holder)) {
            this.o.log?.warn({ key }, 'speech slot lease was lost before its request ended');
          }
        } catch (err) {
          this.o.log?.warn({ err }, 'speech slot renewal failed');
        }
      }),
    );
  }
}
