import { createHash, randomBytes } from 'node:crypto';
import { ServiceError } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Principal } from './principal.ts';
import type { Sql } from '../store/db.ts';
import type { SharedState } from '../state/types.ts';
import { findKeyByHash, insertKey, type ApiKeyRow, type KeyLookup } from './store-keys.ts';

/** 32 random bytes, base64url, behind a recognisable prefix. */
export function generateKey(): string {
  return `pk_${randomBytes(32).toString('base64url')}`;
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The visible part of a key kept for listing: its first 10 characters. */
export function keyPrefix(key: string): string {
  return key.slice(0, 10);
}

/** Creates a key for a team; the plain key is returned once and never stored. */
export async function createKey(sql: Sql, teamId: string, opts: { name?: string; expiresAt?: Date | null; value?: string } = {}): Promise<{ key: string; row: ApiKeyRow }> {
  const key = opts.value ?? generateKey();
  const row = await insertKey(sql, { id: newId('key'), teamId, name: opts.name ?? '', prefix: keyPrefix(key), keyHash: hashKey(key), expiresAt: opts.expiresAt ?? null });
  return { key, row };
}

/** The pub/sub channel that tells every worker and node to forget verified keys (D-API-2). */
export const AUTH_CHANGED_CHANNEL = 'auth:changed';

/** After a revoke or a beta change is committed: every worker and node forgets its verified keys. */
export async function announceAuthChange(state: SharedState): Promise<void> {
  await state.publish(AUTH_CHANGED_CHANNEL, '');
}

/**
 * Verifies bearer keys against the store. A verified key is trusted for `cacheMs` (default
 * 2 s) so hot paths do not query per request. A revoke or beta change through this server
 * clears it at once; one made elsewhere (another worker or node, the CLI on Postgres with
 * `REDIS_URL`) clears it when its `auth:changed` message arrives (`listen`); `cacheMs` bounds
 * the rest (a lost message, expiry). A key used past half of that is re-read in the background
 * while its cached answer still serves, so a key in steady use never makes a request wait for
 * the store (an answer is never older than `cacheMs`; a read begun before a clear is not
 * cached). Unknown keys are never cached.
 */
export class KeyVerifier {
  private cache = new Map<string, { p: Principal; expiresAt: Date | null; until: number; refreshing?: boolean }>();
  /** Bumped by `clear`: a store read begun before a clear must not refill the cache. */
  private generation = 0;

  constructor(private readonly sql: Sql, private readonly cacheMs = 2000) {}

  async verify(token: string, messages: { invalid: string; expired: string }): Promise<Principal> {
    const hash = hashKey(token);
    const now = Date.now();
    const hit = this.cache.get(hash);
    if (hit && hit.until > now) {
      if (hit.expiresAt && hit.expiresAt.getTime() <= now) throw new ServiceError('unauthenticated', messages.expired);
      if (!hit.refreshing && hit.until - now < this.cacheMs / 2) {
        hit.refreshing = true;
        this.load(hash, Date.now()).then(
          () => (hit.refreshing = false),
          () => (hit.refreshing = false), // the entry runs out on its own; the next request reads again
        );
      }
      return hit.p;
    }
    const row = await this.load(hash, now);
    if (!row) throw new ServiceError('unauthenticated', messages.invalid);
    if (row.expires_at && row.expires_at.getTime() <= now) throw new ServiceError('unauthenticated', messages.expired);
    return { teamId: row.team_id, keyId: row.id, betaAccess: row.beta_access };
  }

  /** Reads a key and caches a usable one (forgets a revoked or unknown one). */
  private async load(hash: string, now: number): Promise<KeyLookup | undefined> {
    const generation = this.generation;
    const row = await findKeyByHash(this.sql, hash);
    if (!row || row.revoked_at) {
      this.cache.delete(hash);
      return undefined;
    }
    if (this.cacheMs > 0 && generation === this.generation) {
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(hash, { p: { teamId: row.team_id, keyId: row.id, betaAccess: row.beta_access }, expiresAt: row.expires_at, until: now + this.cacheMs });
    }
    return row;
  }

  /** Clears the cache on every `auth:changed` message and whenever messages may have been lost. */
  listen(state: SharedState): Promise<() => Promise<void>> {
    state.onGap(() => this.clear());
    return state.subscribe(AUTH_CHANGED_CHANNEL, () => this.clear());
  }

  /** Forget cached verifications (after a revoke on this node, or a beta change). */
  clear(): void {
    this.generation++;
    this.cache.clear();
  }
}
