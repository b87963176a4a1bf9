/**
 * What the `parley` CLI does to teams and keys, written once: the CLI calls it on the store
 * directly when no server holds the store, and the running server calls it for the CLI
 * through its admin routes (routes.ts) when one does.
 */
import { createKey } from '../auth/keys.ts';
import { newId } from '../ids.ts';
import type { Sql } from '../store/db.ts';
import { revokeKey } from '../auth/store-keys.ts';
import { createTeam, getTeam, grantCredit, setBetaAccess } from '../auth/store-teams.ts';

export interface TeamAdmin {
  /** A team with its first key (shown once). */
  createTeam(o: { name: string; beta: boolean; creditMicros: bigint }): Promise<{ teamId: string; key: string }>;
  /** A new key of the team, or undefined when there is no such team. */
  createKey(o: { teamId: string; name?: string; expiresAt?: Date | null }): Promise<{ keyId: string; key: string } | undefined>;
  /** How many active keys matched the id or visible prefix and were revoked. */
  revokeKey(idOrPrefix: string): Promise<number>;
  /** The balance after the grant, or undefined when there is no such team. */
  grantCredit(o: { teamId: string; amountMicros: bigint }): Promise<bigint | undefined>;
  /** False when there is no such team. */
  setBeta(o: { teamId: string; enabled: boolean }): Promise<boolean>;
}

/**
 * `authChanged` runs after a revoke or a beta change took effect (a verified key may now be
 * refused): the server clears its key cache and tells every worker and node.
 */
export function storeAdmin(sql: Sql, authChanged: () => Promise<void> = async () => {}): TeamAdmin {
  return {
    async createTeam({ name, beta, creditMicros }) {
      const team = await createTeam(sql, { id: newId('team'), name, betaAccess: beta, creditMicros });
      const { key } = await createKey(sql, team.id, { name: 'first' });
      return { teamId: team.id, key };
    },
    async createKey({ teamId, name, expiresAt }) {
      if (!(await getTeam(sql, teamId))) return undefined;
      const { key, row } = await createKey(sql, teamId, { name, expiresAt });
      return { keyId: row.id, key };
    },
    async revokeKey(idOrPrefix) {
      const n = await revokeKey(sql, idOrPrefix);
      if (n > 0) await authChanged();
      return n;
    },
    grantCredit: ({ teamId, amountMicros }) => grantCredit(sql, teamId, amountMicros),
    async setBeta({ teamId, enabled }) {
      const found = await setBetaAccess(sql, teamId, enabled);
      if (found) await authChanged();
      return found;
    },
  };
}
