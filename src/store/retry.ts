import { isConnectionError } from '../errors.ts';

/** How long a write waits out an unreachable store by default, and its backoff (docs/reliability.md). */
export const STORE_RETRY = { forMs: 10 * 60_000, firstMs: 250, maxMs: 5000 };

export interface UntilStoredOptions {
  /** When to stop retrying (epoch ms); default `forMs` (10 minutes) from the call. */
  giveUpAt?: number;
  /** Stops retrying at once (shutdown): the last connection error is thrown. */
  signal?: AbortSignal;
  /** Called once, at the first connection error, before the first wait (to warn, or to stop making a caller wait). */
  onUnreachable?(err: unknown): void;
}

/**
 * A store write that fails because the store cannot be reached (a restart, a cut:
 * `isConnectionError`) is retried with backoff (250 ms doubling to 5 s) until it is stored,
 * `giveUpAt` passes or `signal` aborts; then the last error is thrown. Any other failure is
 * thrown at once. The write must be idempotent: a statement whose commit happened just as the
 * connection dropped is run again.
 */
export async function untilStored<T>(write: () => Promise<T>, o: UntilStoredOptions = {}): Promise<T> {
  const giveUpAt = o.giveUpAt ?? Date.now() + STORE_RETRY.forMs;
  let delay = STORE_RETRY.firstMs;
  let told = false;
  for (;;) {
    try {
      return await write();
    } catch (err) {
      if (!isConnectionError(err) || o.signal?.aborted || Date.now() + delay > giveUpAt) throw err;
      if (!told) o.onUnreachable?.(err);
      told = true;
      await sleep(delay, o.signal);
      delay = Math.min(delay * 2, STORE_RETRY.maxMs);
    }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
