import type { Logger } from 'pino';
import {
  type HitResult,
  type MessageHandler,
  type SharedState,
  type SlotResult,
  type Unsubscribe,
  checkHit,
  checkIncrement,
  checkSlotLimit,
  checkTtl,
  closedError,
  hitResult,
  notIntegerError,
  windowAt,
} from './types.ts';

interface Entry {
  value: string;
  /** Absolute time on the instance's clock; undefined: never expires. */
  expiresAt?: number;
}

export interface MemoryStateOptions {
  prefix: string;
  now: () => number;
  logger?: Logger;
  /** How often expired entries are swept out; reads check expiry themselves. */
  sweepIntervalMs?: number;
}

/**
 * The embedded default: one node's state in a Map. Every operation runs synchronously
 * inside one call, which is what makes it atomic. Expiry is checked on every read
 * against the injected clock; a periodic (unref'd) sweep only frees memory.
 * Pub/sub reaches subscribers of this instance only, delivered on a later tick like Redis.
 */
export class MemoryState implements SharedState {
  readonly kind = 'memory' as const;
  readonly prefix: string;
  private readonly now: () => number;
  private readonly logger?: Logger;
  private readonly entries = new Map<string, Entry>();
  private readonly channels = new Map<string, Set<MessageHandler>>();
  /** Semaphores: key → holder → lease end (instance clock). */
  private readonly slots = new Map<string, Map<string, number>>();
  private sweeper?: NodeJS.Timeout;
  private closed = false;

  constructor(options: MemoryStateOptions) {
    this.prefix = options.prefix;
    this.now = options.now;
    this.logger = options.logger;
    this.sweeper = setInterval(() => this.sweep(), options.sweepIntervalMs ?? 10_000);
    this.sweeper.unref();
  }

  async hit(key: string, windowMs: number, limit: number): Promise<HitResult> {
    this.open();
    checkHit(windowMs, limit);
    const now = this.now();
    const { index, endsAt } = windowAt(now, windowMs);
    const k = `${this.prefix}w:${windowMs}:${index}:${key}`;
    const entry = this.live(k);
    const count = entry ? Number(entry.value) + 1 : 1;
    this.entries.set(k, { value: String(count), expiresAt: entry?.expiresAt ?? endsAt });
    return hitResult(count, limit, now, endsAt);
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    this.open();
    const ttl = checkTtl(ttlMs);
    const k = this.key(key);
    if (this.live(k)) return false;
    this.entries.set(k, { value, expiresAt: this.now() + ttl });
    return true;
  }

  async take(key: string): Promise<string | null> {
    this.open();
    const k = this.key(key);
    const entry = this.live(k);
    if (!entry) return null;
    this.entries.delete(k);
    return entry.value;
  }

  async get(key: string): Promise<string | null> {
    this.open();
    return this.live(this.key(key))?.value ?? null;
  }

  async set(key: string, value: string, ttlMs?: number): Promise<void> {
    this.open();
    const expiresAt = ttlMs === undefined ? undefined : this.now() + checkTtl(ttlMs);
    this.entries.set(this.key(key), { value, expiresAt });
  }

  async del(key: string): Promise<boolean> {
    this.open();
    const k = this.key(key);
    const existed = this.live(k) !== undefined;
    this.entries.delete(k);
    return existed;
  }

  async incrBy(key: string, n: number, ttlMs?: number): Promise<number> {
    this.open();
    checkIncrement(n);
    const ttl = ttlMs === undefined ? undefined : checkTtl(ttlMs);
    const k = this.key(key);
    const entry = this.live(k);
    const current = entry ? parseInteger(entry.value) : 0;
    const next = current + n;
    if (!Number.isSafeInteger(next)) throw notIntegerError();
    const expiresAt = entry?.expiresAt ?? (ttl === undefined ? undefined : this.now() + ttl);
    this.entries.set(k, { value: String(next), expiresAt });
    return next;
  }

  async acquireSlot(key: string, holder: string, limit: number, leaseMs: number): Promise<SlotResult> {
    this.open();
    checkSlotLimit(limit);
    const lease = checkTtl(leaseMs);
    const k = this.slotKey(key);
    const holders = this.liveSlots(k);
    if (!holders.has(holder) && holders.size >= limit) return { acquired: false, held: holders.size };
    holders.set(holder, this.now() + lease);
    this.slots.set(k, holders);
    return { acquired: true, held: holders.size };
  }

  async renewSlot(key: string, holder: string, leaseMs: number): Promise<boolean> {
    this.open();
    const lease = checkTtl(leaseMs);
    const holders = this.liveSlots(this.slotKey(key));
    if (!holders.has(holder)) return false;
    holders.set(holder, this.now() + lease);
    return true;
  }

  async releaseSlot(key: string, holder: string): Promise<boolean> {
    this.open();
    const k = this.slotKey(key);
    const holders = this.liveSlots(k);
    const held = holders.delete(holder);
    if (holders.size === 0) this.slots.delete(k);
    return held;
  }

  async publish(channel: string, message: string): Promise<void> {
    this.open();
    const handlers = this.channels.get(channel);
    if (!handlers) return;
    // Snapshot now (like Redis: who is subscribed when the message is published), deliver
    // on a later turn so a handler never runs inside the publisher's call stack.
    for (const handler of [...handlers]) {
      setImmediate(() => {
        if (!this.closed && this.channels.get(channel)?.has(handler)) this.deliver(handler, message, channel);
      });
    }
  }

  sync(): Promise<void> {
    this.open();
    // Deliveries are setImmediate callbacks: one scheduled now runs after them.
    return new Promise((resolve) => setImmediate(resolve));
  }

  onGap(): void {}

  async subscribe(channel: string, handler: MessageHandler): Promise<Unsubscribe> {
    this.open();
    // A wrapper per call so the same function subscribed twice is two subscriptions.
    const own: MessageHandler = (message, ch) => handler(message, ch);
    let handlers = this.channels.get(channel);
    if (!handlers) this.channels.set(channel, (handlers = new Set()));
    handlers.add(own);
    return async () => {
      const current = this.channels.get(channel);
      if (!current) return;
      current.delete(own);
      if (current.size === 0) this.channels.delete(channel);
    };
  }

  async ping(): Promise<void> {
    this.open();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    this.entries.clear();
    this.channels.clear();
    this.slots.clear();
  }

  private key(key: string): string {
    return `${this.prefix}v:${key}`;
  }

  private slotKey(key: string): string {
    return `${this.prefix}s:${key}`;
  }

  /** The semaphore's holders whose lease has not ended (expired ones are removed on the way). */
  private liveSlots(k: string): Map<string, number> {
    const holders = this.slots.get(k) ?? new Map<string, number>();
    const now = this.now();
    for (const [h, until] of holders) if (until <= now) holders.delete(h);
    return holders;
  }

  private open(): void {
    if (this.closed) throw closedError();
  }

  /** The entry if present and not expired; an expired one is removed on the way. */
  private live(k: string): Entry | undefined {
    const entry = this.entries.get(k);
    if (!entry) return undefined;
    if (entry.expiresAt !== undefined && entry.expiresAt <= this.now()) {
      this.entries.delete(k);
      return undefined;
    }
    return entry;
  }

  private sweep(): void {
    const now = this.now();
    for (const [k, entry] of this.entries) {
      if (entry.expiresAt !== undefined && entry.expiresAt <= now) this.entries.delete(k);
    }
    for (const k of [...this.slots.keys()]) if (this.liveSlots(k).size === 0) this.slots.delete(k);
  }

  private deliver(handler: MessageHandler, message: string, channel: string): void {
    try {
      const result = handler(message, channel);
      if (result instanceof Promise) result.catch((err) => this.handlerFailed(err, channel));
    } catch (err) {
      this.handlerFailed(err, channel);
    }
  }

  private handlerFailed(err: unknown, channel: string): void {
    this.logger?.error({ err, channel }, 'shared state subscriber failed');
  }
}

/** Redis's rule for INCRBY: a base-10 integer within 64 bits (here: a safe integer). */
function parseInteger(value: string): number {
  if (!/^-?\d+$/.test(value)) throw notIntegerError();
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw notIntegerError();
  return n;
}
