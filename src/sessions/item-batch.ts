import { isConnectionError } from '../errors.ts';
import type { Sql } from '../store/db.ts';
import { appendItemsOfSessions, appendSessionItems, type SessionItemsAppend } from './store.ts';

interface Waiting extends SessionItemsAppend {
  resolve(): void;
  reject(err: unknown): void;
}

export interface ItemBatcherOptions {
  /**
   * How long the first append of a batch waits for others, default 50 ms. The items of live
   * sessions are not on any caller's path (the end of a session waits for them, and is written
   * that much later), so waiting lets one statement carry the turns of many sessions.
   */
  windowMs?: number;
  /** Items in one statement at most, default 1,000; a larger queue goes in several. */
  maxItems?: number;
}

/**
 * The live sessions' transcript and tool items of this event loop, written together (D-SESS-8):
 * appends that arrive within a window go in one statement (`appendItemsOfSessions`), one
 * commit for every session's turn, where one statement per session and turn made a commit, a
 * round trip and the driver's work per turn (bench/README.md, "Nineteenth pass"). One batch is
 * in the store at a time; what arrives meanwhile waits for the next. Each append settles when
 * its batch has committed, so a session's record writer (`record-writer.ts`) keeps its order
 * and its retries: a lost connection fails every append of the batch (each writer retries its
 * own, and the items' refs skip what was stored); a batch the store refuses for its content is
 * written again one session at a time, so one bad item fails only its own session's append.
 */
export class ItemBatcher {
  private queue: Waiting[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing = false;
  private readonly windowMs: number;
  private readonly maxItems: number;

  constructor(private readonly sql: Sql, o: ItemBatcherOptions = {}) {
    this.windowMs = o.windowMs ?? 50;
    this.maxItems = o.maxItems ?? 1000;
  }

  /** Appends a session's items in order; settles when they are stored (or refused). */
  append(sessionId: string, items: SessionItemsAppend['items']): Promise<void> {
    if (items.length === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.queue.push({ sessionId, items, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.timer || this.writing || this.queue.length === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.write();
    }, this.windowMs);
  }

  private async write(): Promise<void> {
    if (this.writing || this.queue.length === 0) return;
    this.writing = true;
    const batch: Waiting[] = [];
    try {
      let count = 0;
      while (this.queue.length && (batch.length === 0 || count + this.queue[0]!.items.length <= this.maxItems)) {
        const w = this.queue.shift()!;
        count += w.items.length;
        batch.push(w);
      }
      try {
        await appendItemsOfSessions(this.sql, batch);
        for (const w of batch) w.resolve();
      } catch (err) {
        if (batch.length === 1 || isConnectionError(err)) for (const w of batch) w.reject(err);
        else await Promise.all(batch.map((w) => appendSessionItems(this.sql, w.sessionId, w.items).then(w.resolve, w.reject)));
      }
    } finally {
      this.writing = false;
      this.schedule();
    }
  }
}
