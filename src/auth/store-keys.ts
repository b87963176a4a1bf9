import type { Sql } from '../store/db.ts';

export interface ApiKeyRow {
  id: string;
  team_id: string;
  name: string;
  prefix: string;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
}

export interface KeyLookup extends ApiKeyRow {
  beta_access: boolean;
}

export async function insertKey(sql: Sql, k: { id: string; teamId: string; name: string; prefix: string; keyHash: string; expiresAt: Date | null }): Promise<ApiKeyRow> {
  const [row] = await sql<ApiKeyRow[]>`
    insert into api_keys (id, team_id, name, prefix, key_hash, expires_at)
    values (${k.id}, ${k.teamId}, ${k.name}, ${k.prefix}, ${k.keyHash}, ${k.expiresAt})
    returning id, team_id, name, prefix, created_at, expires_at, revoked_at`;
  return row!;
}

export async function findKeyByHash(sql: Sql, keyHash: string): Promise<KeyLookup | undefined> {
  const [row] = await sql<KeyLookup[]>`
    select k.id, k.team_id, k.name, k.prefix, k.created_at, k.expires_at, k.revoked_at, t.beta_access
    from api_keys k join teams t on t.id = k.team_id
    where k.key_hash = ${keyHash}`;
  return row;
}

/** Whether the team's key `id` can still be used: it exists, is not revoked, has not expired. */
export async function keyIsLive(sql: Sql, teamId: string, id: string): Promise<boolean> {
  const rows = await sql`
    select 1 from api_keys
    where team_id = ${teamId} and id = ${id} and revoked_at is null and (expires_at is null or expires_at > clock_timestamp())`;
  return rows.length > 0;
}

/** Revokes by id or by visible prefix; returns how many keys it revoked. */
export async function revokeKey(sql: Sql, idOrPrefix: string): Promise<number> {
  const rows = await sql`
    update api_keys set revoked_at = clock_timestamp()
    where (id = ${idOrPrefix} or prefix = ${idOrPrefix}) and revoked_at is null returning id`;
  return rows.length;
}
