import { ServiceError } from '../errors.ts';

/** A counting semaphore with a bounded wait: callers past the limit queue for `maxWaitMs`, then get 503. */
export class Limiter {
  private active = 0;
  private waiting: { grant: () => void; timer: NodeJS.Timeout }[] = [];
  constructor(
    readonly max: number,
    private readonly maxWaitMs: number,
  ) {}

  get inUse(): number {
    return this.active;
  }

  /** Takes a slot; the returned function gives it back (idempotent). */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    if (this.active < this.max) {
      this.active++;
      return this.releaser();
    }
    await new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => { signal?.removeEventListener('abort', onAbort); resolve(); },
        timer: setTimeout(() => {
          this.drop(entry);
          signal?.removeEventListener('abort', onAbort);
          reject(new ServiceError('unavailable', 'Inference backend busy', { headers: { 'Retry-After': '1' } }));
        }, this.maxWaitMs),
      };
      const onAbort = () => { this.drop(entry); reject(signal!.reason); };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(entry);
    });
    return this.releaser();
  }

  private drop(entry: { timer: NodeJS.Timeout }) {
    clearTimeout(entry.timer);
    this.waiting = this.waiting.filter((e) => e !== entry);
  }

  private releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.waiting.shift();
      if (next) {
        clearTimeout(next.timer);
        next.grant(); // the slot passes straight to the next caller
      } else {
        this.active--;
      }
    };
  }
}
