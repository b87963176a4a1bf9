import { once } from 'node:events';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { ServiceError, dependencyUnavailable } from '../errors.ts';
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

// INCR and the expiry in one script: a crash between them cannot leave a counter that
// never expires. The expiry is set once, by the hit that creates the window's counter.
const HIT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`;

// ARGV[2] is '' for "no expiry"; otherwise it is set only if the key has none yet.
const INCR_BY = `
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if ARGV[2] ~= '' and redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return value`;

// Semaphores: a sorted set of holders scored by lease end, on the Redis server's clock (so
// nodes with skewed clocks agree on who expired). Expired holders are dropped before every
// count; the key itself expires with its last lease. ARGV: holder, limit, leaseMs.
const SLOT_NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)`;
const SLOT_KEEP = `
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[1], math.max(1, tonumber(last[2]) - now))`;
const ACQUIRE_SLOT = `${SLOT_NOW}
local held = redis.call('ZCARD', KEYS[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if held >= tonumber(ARGV[2]) then return {0, held} end
  held = held + 1
end${SLOT_KEEP}
return {1, held}`;
const RENEW_SLOT = `${SLOT_NOW}
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end${SLOT_KEEP}
return 1`;
const RELEASE_SLOT = `${SLOT_NOW}
return redis.call('ZREM', KEYS[1], ARGV[1])`;

interface Scripts {
  parleyHit(key: string, ttlMs: number): Promise<number>;
  parleyIncrBy(key: string, n: number, ttlMs: string): Promise<number>;
  parleyAcquireSlot(key: string, holder: string, limit: number, leaseMs: number): Promise<[number, number]>;
  parleyRenewSlot(key: string, holder: string, limit: number, leaseMs: number): Promise<number>;
  parleyReleaseSlot(key: string, holder: string): Promise<number>;
}

export interface RedisStateOptions {
  url: string;
  prefix: string;
  now: () => number;
  logger?: Logger;
  /** A command unanswered for this long fails and its connection is reopened; 0 or unset: no bound. */
  commandTimeoutMs?: number;
}

interface Channel {
  handlers: Set<MessageHandler>;
  /** Resolves when Redis has acknowledged SUBSCRIBE. */
  ready: Promise<unknown>;
}

/**
 * Connects and checks the connection; rejects with `unavailable` (and leaves nothing
 * running) when Redis cannot be reached, so a wrong `REDIS_URL` fails at start-up.
 */
export async function connectRedisState(options: RedisStateOptions): Promise<RedisState> {
  const commandTimeout = options.commandTimeoutMs ? options.commandTimeoutMs : undefined;
  const client = new Redis(options.url, { lazyConnect: true, maxRetriesPerRequest: 2, commandTimeout });
  sendOnlyUnsettled(client);
  client.on('error', (err) => options.logger?.warn({ err }, 'shared state connection error'));
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    client.disconnect();
    throw dependencyUnavailable('Redis is unreachable', err);
  }
  return new RedisState(client, options);
}

/**
 * Shared state in Redis. Commands go over one connection; pub/sub needs its own, opened
 * on the first subscribe (a subscribed connection cannot run other commands). Window
 * boundaries come from the caller's clock (`now`), so nodes agree to within clock skew;
 * expiries run on the Redis server's clock.
 */
export class RedisState implements SharedState {
  readonly kind = 'redis' as const;
  readonly prefix: string;
  private readonly client: Redis & Scripts;
  private readonly now: () => number;
  private readonly logger?: Logger;
  private subscriber?: Redis;
  private readonly channels = new Map<string, Channel>();
  private closed = false;
  /** `sync` callers waiting for the next PING; `pinging` while one is on its way. */
  private syncWaiting: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  private pinging = false;
  private readonly gapHandlers: (() => void)[] = [];

  constructor(client: Redis, options: RedisStateOptions) {
    this.prefix = options.prefix;
    this.now = options.now;
    this.logger = options.logger;
    client.defineCommand('parleyHit', { numberOfKeys: 1, lua: HIT });
    client.defineCommand('parleyIncrBy', { numberOfKeys: 1, lua: INCR_BY });
    client.defineCommand('parleyAcquireSlot', { numberOfKeys: 1, lua: ACQUIRE_SLOT });
    client.defineCommand('parleyRenewSlot', { numberOfKeys: 1, lua: RENEW_SLOT });
    client.defineCommand('parleyReleaseSlot', { numberOfKeys: 1, lua: RELEASE_SLOT });
    this.client = client as Redis & Scripts;
  }

  async hit(key: string, windowMs: number, limit: number): Promise<HitResult> {
    this.open();
    checkHit(windowMs, limit);
    const now = this.now();
    const { index, endsAt } = windowAt(now, windowMs);
    // The key names its window, so it can outlive it safely: keeping it one extra window
    // tolerates clock skew between nodes (and a slow caller) without ever merging windows.
    const count = await this.run(() => this.client.parleyHit(`${this.prefix}w:${windowMs}:${index}:${key}`, Math.ceil(endsAt - now) + windowMs));
    return hitResult(count, limit, now, endsAt);
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    this.open();
    const ttl = checkTtl(ttlMs);
    return (await this.run(() => this.client.set(this.key(key), value, 'PX', ttl, 'NX'))) === 'OK';
  }

  async take(key: string): Promise<string | null> {
    this.open();
    return this.run(() => this.client.getdel(this.key(key)));
  }

  async get(key: string): Promise<string | null> {
    this.open();
    return this.run(() => this.client.get(this.key(key)));
  }

  async set(key: string, value: string, ttlMs?: number): Promise<void> {
    this.open();
    if (ttlMs === undefined) await this.run(() => this.client.set(this.key(key), value));
    else {
      const ttl = checkTtl(ttlMs);
      await this.run(() => this.client.set(this.key(key), value, 'PX', ttl));
    }
  }

  async del(key: string): Promise<boolean> {
    this.open();
    return (await this.run(() => this.client.del(this.key(key)))) > 0;
  }

  async incrBy(key: string, n: number, ttlMs?: number): Promise<number> {
    this.open();
    checkIncrement(n);
    const ttl = ttlMs === undefined ? '' : String(checkTtl(ttlMs));
    try {
      return await this.run(() => this.client.parleyIncrBy(this.key(key), n, ttl));
    } catch (err) {
      if (err instanceof ServiceError && /not an integer|overflow/.test(String((err.cause as Error)?.message))) {
        throw notIntegerError();
      }
      throw err;
    }
  }

  async acquireSlot(key: string, holder: string, limit: number, leaseMs: number): Promise<SlotResult> {
    this.open();
    checkSlotLimit(limit);
    const lease = checkTtl(leaseMs);
    const [acquired, held] = await this.run(() => this.client.parleyAcquireSlot(this.slotKey(key), holder, limit, lease));
    return { acquired: acquired === 1, held };
  }

  async renewSlot(key: string, holder: string, leaseMs: number): Promise<boolean> {
    this.open();
    const lease = checkTtl(leaseMs);
    return (await this.run(() => this.client.parleyRenewSlot(this.slotKey(key), holder, 0, lease))) === 1;
  }

  async releaseSlot(key: string, holder: string): Promise<boolean> {
    this.open();
    return (await this.run(() => this.client.parleyReleaseSlot(this.slotKey(key), holder))) === 1;
  }

  async publish(channel: string, message: string): Promise<void> {
    this.open();
    await this.run(() => this.client.publish(this.prefix + channel, message));
  }

  async subscribe(channel: string, handler: MessageHandler): Promise<Unsubscribe> {
    this.open();
    const subscriber = this.subscriberConnection();
    const name = this.prefix + channel;
    const own: MessageHandler = (message, ch) => handler(message, ch);
    let entry = this.channels.get(name);
    if (!entry) {
      // Commands on one connection run in order, so an UNSUBSCRIBE still in flight for
      // this channel is answered before this SUBSCRIBE: the channel ends up subscribed.
      entry = { handlers: new Set(), ready: subscriber.subscribe(name) };
      this.channels.set(name, entry);
    }
    entry.handlers.add(own);
    try {
      await this.run(() => entry.ready, subscriber);
    } catch (err) {
      entry.handlers.delete(own);
      if (entry.handlers.size === 0 && this.channels.get(name) === entry) this.channels.delete(name);
      throw err;
    }
    let done = false;
    return async () => {
      if (done || this.closed) return;
      done = true;
      entry.handlers.delete(own);
      if (entry.handlers.size > 0 || this.channels.get(name) !== entry) return;
      this.channels.delete(name);
      await this.run(() => subscriber.unsubscribe(name), subscriber);
    };
  }

  sync(): Promise<void> {
    this.open();
    if (!this.subscriber) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.syncWaiting.push({ resolve, reject });
      if (!this.pinging) this.syncPing();
    });
  }

  onGap(handler: () => void): void {
    this.gapHandlers.push(handler);
  }

  /**
   * One PING for every caller waiting; those arriving meanwhile wait for the next one (the PING
   * on its way may have left before what they must see was published).
   */
  private syncPing(): void {
    const batch = this.syncWaiting;
    this.syncWaiting = [];
    this.pinging = true;
    const subscriber = this.subscriber!;
    this.run(() => subscriber.ping()).then(
      () => batch.forEach((w) => w.resolve()),
      (err) => batch.forEach((w) => w.reject(err)),
    ).finally(() => {
      this.pinging = false;
      if (this.syncWaiting.length > 0) this.syncPing();
    });
  }

  async ping(): Promise<void> {
    this.open();
    await this.run(() => this.client.ping());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.channels.clear();
    await Promise.all([shutDown(this.client), this.subscriber && shutDown(this.subscriber)]);
  }

  private key(key: string): string {
    return `${this.prefix}v:${key}`;
  }

  private slotKey(key: string): string {
    return `${this.prefix}s:${key}`;
  }

  private open(): void {
    if (this.closed) throw closedError();
  }

  private subscriberConnection(): Redis {
    if (this.subscriber) return this.subscriber;
    const subscriber = this.client.duplicate();
    sendOnlyUnsettled(subscriber);
    subscriber.on('error', (err) => this.logger?.warn({ err }, 'shared state subscriber connection error'));
    subscriber.on('message', (name: string, message: string) => this.dispatch(name, message));
    // Messages published while the link was down are lost: say so when it drops and when it is back.
    const gap = () => {
      for (const h of this.gapHandlers) h();
    };
    subscriber.on('close', gap);
    subscriber.on('ready', gap);
    this.subscriber = subscriber;
    return subscriber;
  }

  private dispatch(name: string, message: string): void {
    const entry = this.channels.get(name);
    if (!entry) return;
    const channel = name.slice(this.prefix.length);
    for (const handler of [...entry.handlers]) {
      try {
        const result = handler(message, channel);
        if (result instanceof Promise) result.catch((err) => this.handlerFailed(err, channel));
      } catch (err) {
        this.handlerFailed(err, channel);
      }
    }
  }

  private handlerFailed(err: unknown, channel: string): void {
    this.logger?.error({ err, channel }, 'shared state subscriber failed');
  }

  /** Runs a command; Redis's own error replies are misuse (`internal`), anything else is `unavailable`. */
  private async run<T>(command: () => Promise<T>, client: Redis = this.client): Promise<T> {
    try {
      return await command();
    } catch (err) {
      // Unanswered within `commandTimeoutMs`: the server is silent (a black-holed network)
      // while the connection looks open. The socket is destroyed (a reset, not a FIN that would
      // wait behind the commands still unsent) and ioredis reconnects, so a path that heals for
      // new connections is used at once. A command the server had already received may still
      // run: its caller was told `unavailable`, which does not say it did not happen.
      if (err instanceof Error && err.message === 'Command timed out' && client.status === 'ready') {
        this.logger?.warn({ err }, 'shared state command unanswered: reconnecting');
        (client as unknown as { stream?: { resetAndDestroy(): void } }).stream?.resetAndDestroy();
      }
      // A Redis that is starting (LOADING its data set) or has lost its primary refuses
      // commands for a while: unavailable, like a dropped connection.
      if (err instanceof Error && err.name === 'ReplyError' && !/^(LOADING|MASTERDOWN|TRYAGAIN|CLUSTERDOWN)\b/.test(err.message)) {
        throw new ServiceError('internal', 'Shared state command failed', { cause: err });
      }
      throw dependencyUnavailable('Shared state is unavailable: try again shortly', err);
    }
  }
}

/**
 * ioredis sends again, once it has reconnected, the commands that were in flight when the
 * connection dropped and those queued meanwhile, including commands whose caller was already
 * told they failed (`commandTimeout`): a slot acquired or a token taken then, for a request
 * answered `503` long before, that nobody releases (under load, every speech slot of a team
 * held for a lease after a Redis outage: `bench/chaos.ts --fault redis`). Such commands are
 * dropped instead of sent; those still awaited are sent as before.
 */
function sendOnlyUnsettled(client: Redis): void {
  const send = client.sendCommand.bind(client);
  type Sent = Parameters<Redis['sendCommand']>[0] & { isSettled?: boolean };
  client.sendCommand = ((command: Sent, stream?: Parameters<Redis['sendCommand']>[1]) =>
    command.isSettled ? command.promise : send(command, stream)) as Redis['sendCommand'];
}

/** Lets pending replies arrive, then waits for the socket to close. */
async function shutDown(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  if (client.status !== 'ready') {
    // Not connected (never used, or between reconnects): nothing to wait for.
    client.disconnect();
    return;
  }
  const ended = once(client, 'end');
  try {
    await client.quit();
  } catch {
    client.disconnect();
    return;
  }
  await ended;
}
