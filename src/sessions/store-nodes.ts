/** Node liveness rows (`nodes`) and the sessions of nodes that stopped beating. */
import type { Sql } from '../store/db.ts';

/** Records that node `id` is alive now. */
export async function beat(sql: Sql, id: string): Promise<void> {
  await sql`insert into nodes (id, seen_at) values (${id}, clock_timestamp())
    on conflict (id) do update set seen_at = excluded.seen_at`;
}

/** Forgets node `id` (a clean shutdown: it holds no session any more). */
export async function forgetNode(sql: Sql, id: string): Promise<void> {
  await sql`delete from nodes where id = ${id}`;
}

export interface OrphanedSession {
  id: string;
  /** The last time its node was known alive (its last beat; its start when the node never beat). */
  lastSeen: Date;
}

/**
 * Active sessions held by a node other than `selfId` whose last beat is older than `staleMs`
 * (or that never beat), oldest first, at most `limit`.
 */
export async function orphanedSessions(sql: Sql, selfId: string, staleMs: number, limit = 500): Promise<OrphanedSession[]> {
  const rows = await sql<{ id: string; last_seen: Date }[]>`
    select s.id, coalesce(n.seen_at, s.started_at, s.created_at) as last_seen
    from sessions s left join nodes n on n.id = s.node_id
    where s.status = 'active' and s.node_id is not null and s.node_id <> ${selfId}
      and (n.seen_at is null or n.seen_at < clock_timestamp() - make_interval(secs => ${staleMs / 1000}))
    order by last_seen
    limit ${limit}`;
  return rows.map((r) => ({ id: r.id, lastSeen: r.last_seen }));
}

/**
 * Active sessions recorded as held by `id` itself: at a node's start it holds none, so these
 * are what an earlier process with the same node id left when it died. With that process's last beat.
 */
export async function sessionsLeftBy(sql: Sql, id: string): Promise<OrphanedSession[]> {
  const rows = await sql<{ id: string; last_seen: Date }[]>`
    select s.id, coalesce(n.seen_at, s.started_at, s.created_at) as last_seen
    from sessions s left join nodes n on n.id = s.node_id
    where s.status = 'active' and s.node_id = ${id}`;
  return rows.map((r) => ({ id: r.id, lastSeen: r.last_seen }));
}
