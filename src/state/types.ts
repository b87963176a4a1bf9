import type { Logger } from 'pino';
import { ServiceError } from '../errors.ts';

/** Outcome of one `hit` on a fixed-window counter. */
export interface HitResult {
  /** True when this hit is within the limit (count ≤ limit). */
  allowed: boolean;
  /** Hits in the current window including this one (rejected hits count too). */
  count: number;
  /** 0 when allowed; otherwise the time until the window ends (for `Retry-After`). */
  retryAfterMs: number;
}

/** Outcome of one `acquireSlot` on a counting semaphore. */
export interface SlotResult {
  /** True when the holder now holds a slot (also when it already held one: its lease is renewed). */
  acquired: boolean;
  /** Live holders of the semaphore after this call (this holder included when acquired). */
  held: number;
}

/** A pub/sub handler; `channel` is given without the key prefix. */
export type MessageHandler = (message: string, channel: string) => void | Promise<void>;

/** Removes one subscription; calling it again does nothing. */
export type Unsubscribe = () => Promise<void>;

/**
 * Short-lived state shared by all nodes (Redis) or kept by one node (memory).
 * Values are strings. Every key and channel is namespaced by the instance's prefix.
 * Errors are `ServiceError`: `unavailable` when the store cannot be reached or the
 * instance is closed, `internal` for misuse (bad TTL, `incrBy` on a non-integer).
 */
export interface SharedState {
  readonly kind: 'redis' | 'memory';
  readonly prefix: string;

  /**
   * Counts one hit in the fixed window `floor(now / windowMs)` of `key`, atomically.
   * All nodes agree on window boundaries; a window's counter expires when it ends.
   */
  hit(key: string, windowMs: number, limit: number): Promise<HitResult>;

  /** Stores `value` only if `key` holds nothing; true when this call stored it. */
  setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean>;
  /** Reads and deletes `key` in one step: of concurrent takes, exactly one gets the value. */
  take(key: string): Promise<string | null>;

  get(key: string): Promise<string | null>;
  /** Replaces the value; without `ttlMs` the key never expires (an earlier expiry is removed). */
  set(key: string, value: string, ttlMs?: number): Promise<void>;
  /** True when a key was removed. */
  del(key: string): Promise<boolean>;
  /**
   * Adds `n` to an integer value (a missing key counts as 0) and returns the new value.
   * `ttlMs` sets an expiry only if the key has none yet (typically: when this call creates it).
   */
  incrBy(key: string, n: number, ttlMs?: number): Promise<number>;

  /**
   * Counting semaphore: takes one of at most `limit` slots of `key` for `holder`, atomically.
   * Each holder's lease lasts `leaseMs` unless renewed (`renewSlot`), so the slots of a node
   * that died free themselves. A holder that already holds a slot keeps it (lease renewed).
   */
  acquireSlot(key: string, holder: string, limit: number, leaseMs: number): Promise<SlotResult>;
  /** Extends a live lease to `leaseMs` from now; false when the holder holds no live slot. */
  renewSlot(key: string, holder: string, leaseMs: number): Promise<boolean>;
  /** Frees the holder's slot; true when it held a live one. */
  releaseSlot(key: string, holder: string): Promise<boolean>;

  /** Delivers `message` to every subscriber of `channel` under the same prefix, this node included. */
  publish(channel: string, message: string): Promise<void>;
  /** Resolves once the subscription is active: messages published afterwards reach `handler`. */
  subscribe(channel: string, handler: MessageHandler): Promise<Unsubscribe>;
  /**
   * Resolves once every message published to this prefix (by any node) before the call has
   * been handed to this instance's subscribers: a read barrier for caches invalidated over
   * pub/sub. Redis: one PING on the subscriber connection (replies come in order after the
   * messages), shared by the calls made while it is on its way; nothing subscribed: at once.
   * Memory: after the deliveries already scheduled.
   */
  sync(): Promise<void>;
  /**
   * `handler` runs whenever messages may have been missed: the subscriber connection dropped
   * or came back (Redis). Caches invalidated over pub/sub forget everything then. Memory: never.
   */
  onGap(handler: () => void): void;

  /** Rejects with `unavailable` when the store does not answer. */
  ping(): Promise<void>;
  /** Releases connections and timers; idempotent. Later calls reject with `unavailable`. */
  close(): Promise<void>;
}

export interface SharedStateOptions {
  /** Redis URL (`redis://…`); without it the in-memory implementation is used. */
  redisUrl?: string;
  /** Prepended to every key and channel; default `parley:`. */
  prefix?: string;
  /** Clock for window alignment and (memory) expiry; default `Date.now`. */
  now?: () => number;
  /** Receives background failures: throwing subscribers, lost Redis connections. */
  logger?: Logger;
  /**
   * Redis: a command unanswered for this long fails as `unavailable` and its connection is
   * reopened (a black-holed network is otherwise waited on for as long as TCP does). 0 or
   * unset: no bound.
   */
  commandTimeoutMs?: number;
}

export const DEFAULT_PREFIX = 'parley:';

/** The window containing `now`: its index (for keys) and when it ends. */
export function windowAt(now: number, windowMs: number): { index: number; endsAt: number } {
  const index = Math.floor(now / windowMs);
  return { index, endsAt: (index + 1) * windowMs };
}

export function hitResult(count: number, limit: number, now: number, endsAt: number): HitResult {
  const allowed = count <= limit;
  return { allowed, count, retryAfterMs: allowed ? 0 : Math.max(1, endsAt - now) };
}

export function checkTtl(ttlMs: number): number {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new ServiceError('internal', 'ttlMs must be a positive number');
  return Math.ceil(ttlMs);
}

export function checkHit(windowMs: number, limit: number): void {
  if (!Number.isInteger(windowMs) || windowMs <= 0) throw new ServiceError('internal', 'windowMs must be a positive integer');
  if (!Number.isInteger(limit) || limit < 0) throw new ServiceError('internal', 'limit must be a non-negative integer');
}

export function checkSlotLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 0) throw new ServiceError('internal', 'limit must be a non-negative integer');
}

export function checkIncrement(n: number): void {
  if (!Number.isSafeInteger(n)) throw new ServiceError('internal', 'increment must be an integer');
}

export const closedError = () => new ServiceError('unavailable', 'Shared state is closed');
export const notIntegerError = () => new ServiceError('internal', 'Value is not an integer');
