import { MemoryState } from './memory.ts';
import { connectRedisState } from './redis.ts';
import { DEFAULT_PREFIX, type SharedState, type SharedStateOptions } from './types.ts';

export type { HitResult, MessageHandler, SharedState, SharedStateOptions, SlotResult, Unsubscribe } from './types.ts';
export { DEFAULT_PREFIX } from './types.ts';

/**
 * Redis when `redisUrl` is given (connected and checked before this resolves; rejects
 * with `unavailable` otherwise), else the in-memory implementation. The caller passes
 * `REDIS_URL` from its configuration; this function does not read the environment.
 */
export async function createSharedState(options: SharedStateOptions = {}): Promise<SharedState> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const now = options.now ?? Date.now;
  if (options.redisUrl) return connectRedisState({ url: options.redisUrl, prefix, now, logger: options.logger, commandTimeoutMs: options.commandTimeoutMs });
  return new MemoryState({ prefix, now, logger: options.logger });
}
