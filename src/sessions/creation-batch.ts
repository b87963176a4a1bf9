import type { Sql } from '../store/db.ts';
import { insertSession, insertSessions, type NewSession, type SessionRow } from './store.ts';
import { isConnectionError } from '../errors.ts';

interface Waiting {
  session: NewSession;
  mode: 'hold' | 'require';
  resolve(row: SessionRow | undefined): void;
  reject(err: unknown): void;
}

/**
 * Session creations of this event loop, written together (D-SESS-2): every creation that
 * reaches its insert while a batch is already in the store waits for the next one, and each batch is one statement (`insertSessions`): one commit, one lock and one debit
 * of the team row for all of them, where one statement per creation queued every creation of
 * a team behind the previous one's commit (bench/README.md, "Creations"). A creation that
 * finds the store idle goes at once (on the next turn of the loop, with whatever else arrived
 * in this one): nothing waits on a timer. Each creation answers when its batch has committed.
 * A batch the store refuses for its content (not a lost connection) is written again one
 * creation at a time, so one bad row fails only its own request.
 */
export class CreationBatcher {
  private queue: Waiting[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly sql: Sql,
    private readonly priceMicros: bigint,
    /**
     * Batches of this loop in the store at once. One: the batches of a team queue on its row
     * anyway, so a second one in flight only halves both (measured: bench/README.md).
     */
    private readonly maxInFlight = 1,
    private readonly maxBatch = 100,
  ) {}

  insert(session: NewSession, mode: 'hold' | 'require'): Promise<SessionRow | undefined> {
    return new Promise((resolve, reject) => {
      this.queue.push({ session, mode, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.inFlight < this.maxInFlight && this.queue.length) void this.write(this.queue.splice(0, this.maxBatch));
    });
  }

  private async write(batch: Waiting[]): Promise<void> {
    this.inFlight++;
    try {
      const rows = await insertSessions(this.sql, batch, this.priceMicros);
      batch.forEach((w, i) => w.resolve(rows[i]));
    } catch (err) {
      if (batch.length === 1 || isConnectionError(err)) batch.forEach((w) => w.reject(err));
      else await Promise.all(batch.map((w) => this.one(w)));
    } finally {
      this.inFlight--;
      this.kick();
    }
  }

  private async one(w: Waiting): Promise<void> {
    try {
      w.resolve(await insertSession(this.sql, w.session, w.mode === 'hold' ? { mode: 'hold', amountMicros: this.priceMicros } : { mode: 'require', minimumMicros: this.priceMicros }));
    } catch (err) {
      w.reject(err);
    }
  }
}
