import type { Logger } from '../log.ts';
import type { SharedState } from '../state/types.ts';
import type { AgentRow } from './store.ts';

/** The pub/sub channel on which a write names the agent it changed (every node and worker). */
export const AGENT_CHANGED_CHANNEL = 'agents:changed';
/** Rows kept at most; past it the cache starts again empty (a bound, not an LRU). */
const MAX_ROWS = 10_000;
/** Creation views kept at most (each holds a published config): a bound, not an LRU. */
const MAX_CREATION_VIEWS = 1_000;

/**
 * Agent rows as `GET /v1/agent/agents/{id}` reads them, kept in memory so a read that changes
 * rarely costs no store round trip (D-API-5). Correctness first:
 *
 * - every write path (profile update, delete, publish) calls `changed(id)` after its commit and
 *   before its response: this worker forgets the row at once, then the id is published to every
 *   other worker and node, and the write awaits that publish;
 * - with Redis, a read first waits for `state.sync()` (one PING on the subscriber connection,
 *   shared by the reads arriving meanwhile): every invalidation published before the read
 *   arrived has then been applied, so a GET sent after a PATCH's answer never sees the old row,
 *   whichever worker or node took either;
 * - a row read from the store is kept only if no invalidation ran while it was being read
 *   (an epoch), so a slow read cannot put back a row a write has just replaced;
 * - when the subscriber link drops or comes back (messages may be lost) the cache empties, and
 *   while the barrier fails reads go to the store.
 */
export class AgentCache {
  private readonly rows = new Map<string, AgentRow>();
  /**
   * What session creation reads of an agent (the row and its latest published version,
   * `getSessionForCreation`), under the same rules: publish, profile updates and delete all
   * call `changed`, so a creation never starts a version older than the last publish answered.
   */
  private readonly creationViews = new Map<string, { team_id: string }>();
  private epoch = 0;
  /** Memory shared state is one node and one worker: invalidation is synchronous, no barrier. */
  private readonly barrier: boolean;

  constructor(private readonly state: SharedState, private readonly log?: Logger) {
    this.barrier = state.kind !== 'memory';
  }

  /** Subscribes to other workers' and nodes' invalidations; resolves once subscribed. */
  async start(): Promise<() => Promise<void>> {
    this.state.onGap(() => this.clear());
    return this.state.subscribe(AGENT_CHANGED_CHANNEL, (id) => this.drop(id));
  }

  /** The team's agent `id`, from memory when current, else from `load` (the store). */
  read(teamId: string, id: string, load: () => Promise<AgentRow | undefined>): Promise<AgentRow | undefined> {
    return this.through(this.rows, MAX_ROWS, teamId, id, load);
  }

  /**
   * The view of agent `id` that session creation needs, from memory when current, else from
   * `load`; of any team when `teamId` is undefined (keyless requests to public agents).
   */
  readForCreation<T extends { team_id: string }>(teamId: string | undefined, id: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    return this.through(this.creationViews as Map<string, T>, MAX_CREATION_VIEWS, teamId, id, load);
  }

  /**
   * One read through `map` (at most `max` entries): the barrier first, then memory, else
   * `load`, kept only if no invalidation ran meanwhile. What is kept serves every team's
   * callers; the team check applies to each (`teamId` undefined: any team).
   */
  private async through<T extends { team_id: string }>(map: Map<string, T>, max: number, teamId: string | undefined, id: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    const ofTeam = (row: T | undefined) => (row && (teamId === undefined || row.team_id === teamId) ? row : undefined);
    if (this.barrier) {
      try {
        await this.state.sync();
      } catch (err) {
        // No barrier, no guarantee: read the store, keep nothing.
        this.log?.warn({ err }, 'agent cache barrier failed; reading the store');
        this.clear();
        return ofTeam(await load());
      }
    }
    const hit = map.get(id);
    if (hit) return ofTeam(hit);
    const at = this.epoch;
    const row = await load();
    if (row && at === this.epoch) {
      if (map.size >= max) map.clear();
      map.set(id, row);
    }
    return ofTeam(row);
  }

  /** After a committed write of agent `id`: forget it here, then tell every other worker and node. */
  async changed(id: string): Promise<void> {
    this.drop(id);
    await this.state.publish(AGENT_CHANGED_CHANNEL, id).catch((err) => {
      // The other workers may keep the old row until their link is back (they empty on a gap).
      this.log?.warn({ err, agentId: id }, 'agent cache invalidation not published');
    });
  }

  private drop(id: string): void {
    this.epoch++;
    this.rows.delete(id);
    this.creationViews.delete(id);
  }

  private clear(): void {
    this.epoch++;
    this.rows.clear();
    this.creationViews.clear();
  }
}
