import { createKey, hashKey } from './keys.ts';
import { newId } from '../ids.ts';
import type { Sql } from '../store/db.ts';
import { findKeyByHash } from './store-keys.ts';
import { countTeams, createTeam, firstTeam } from './store-teams.ts';

/**
 * First start of an empty store: one team with beta access and starting credit, and its
 * API key (printed once by the caller). With `PARLEY_BOOTSTRAP_KEY`, that value is the key;
 * on later starts it is added to the first team if the store does not know it yet, so
 * scripts and containers can rely on a fixed key.
 */
export async function bootstrap(sql: Sql, opts: { key?: string; creditMicros: bigint; shared?: boolean }): Promise<{ teamId: string; key?: string; created: boolean }> {
  // The embedded store has one node and one connection: nothing to serialise with.
  if (opts.shared === false) return bootstrapLocked(sql, opts);
  // Serialise with other nodes starting at the same moment: one creates, the others see it.
  const lock = await sql.reserve();
  try {
    await lock`select pg_advisory_lock(${BOOTSTRAP_LOCK})`;
    return await bootstrapLocked(sql, opts);
  } finally {
    await lock`select pg_advisory_unlock(${BOOTSTRAP_LOCK})`.catch(() => {});
    lock.release();
  }
}

const BOOTSTRAP_LOCK = 72_616_002;

async function bootstrapLocked(sql: Sql, opts: { key?: string; creditMicros: bigint }): Promise<{ teamId: string; key?: string; created: boolean }> {
  if ((await countTeams(sql)) === 0) {
    const team = await createTeam(sql, { id: newId('team'), name: 'Default team', betaAccess: true, creditMicros: opts.creditMicros });
    const { key } = await createKey(sql, team.id, { name: 'bootstrap', value: opts.key });
    return { teamId: team.id, key, created: true };
  }
  const team = (await firstTeam(sql))!;
  if (opts.key && !(await findKeyByHash(sql, hashKey(opts.key)))) {
    await createKey(sql, team.id, { name: 'bootstrap', value: opts.key });
    return { teamId: team.id, key: opts.key, created: false };
  }
  return { teamId: team.id, created: false };
}
