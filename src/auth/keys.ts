import { createHash, randomBytes } from 'node:crypto';
import { ServiceError } from '../errors.ts';
import { newId } from '../ids.ts';
import type { Principal } from './principal.ts';
import type { Sql } from '../store/db.ts';
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

/**
 * Verifies bearer keys against the store. A verified key is trusted for `cacheMs` (default
 * 2 s) so hot paths do not query per request; revocation and expiry therefore take effect
 * within that bound. A key used past half of that is re-read in the background while its
 * cached answer still serves, so a key in steady use never makes a request wait for the
 * store (the bound is unchanged: an answer is never older than `cacheMs`). Unknown keys are
 * never cached.
 */
export class KeyVerifier {
  private cache = new Map<string, { p: Principal; expiresAt: Date | null; until: number; refreshing?: boolean }>();

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
    const row = await findKeyByHash(this.sql, hash);
    if (!row || row.revoked_at) {
      this.cache.delete(hash);
      return undefined;
    }
    if (this.cacheMs > 0) {
      if (this.cache.size > 10_000) this.cache.clear();
      this.cache.set(hash, { p: { teamId: row.team_id, keyId: row.id, betaAccess: row.beta_access }, expiresAt: row.expires_at, until: now + this.cacheMs });
    }
    return row;
  }

  /** Forget cached verifications (after a revoke on this node, or a beta change). */
  clear(): void {
    this.cache.clear();
  }
}
