/**
 * Sessions of a node that died (killed, out of memory, its machine gone) would stay `active`
 * forever, holding their credit and never sending their post-call webhooks. Every node writes a
 * beat to `nodes` every `BEAT_MS`; every node sweeps every `SWEEP_MS` for active sessions whose
 * node's last beat is older than `STALE_MS` and ends them `failed` / `node_lost`, as of that last
 * beat, through the same statement as any end (charge settled, webhooks queued, analysis queued).
 * A node also ends, at its start, the sessions an earlier process with its own id left.
 *
 * A sweep runs only once this node's own beats have succeeded for `STALE_MS` without a break:
 * after the database was unreachable, every other live node has had as long to beat again
 * before this one judges them (docs/api/sessions.md "A node lost").
 */
import type { Logger } from '../log.ts';
import type { Sql } from '../store/db.ts';
import { beat, forgetNode, orphanedSessions, sessionsLeftBy, type OrphanedSession } from './store-nodes.ts';
import { markSessionEnded } from './store.ts';

export const BEAT_MS = 5_000;
export const STALE_MS = 20_000;
export const SWEEP_MS = 10_000;
export const NODE_LOST = 'node_lost';

export interface NodeReaperOptions {
  sql: Sql;
  nodeId: string;
  log: Logger;
  beatMs?: number;
  staleMs?: number;
  sweepMs?: number;
  /** Called with the sessions a sweep ended (the runtime forgets their owner, so a resume gets 4404). */
  onEnded?(sessionIds: string[]): Promise<void>;
}

export class NodeReaper {
  private beatTimer: NodeJS.Timeout | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  /** Since when this node's beats have succeeded without a failure (null: the last one failed). */
  private beatingSince: number | null = null;
  private sweeping: Promise<number> | null = null;
  private readonly staleMs: number;

  constructor(private readonly o: NodeReaperOptions) {
    this.staleMs = o.staleMs ?? STALE_MS;
  }

  /** Ends what an earlier process with this node id left, beats, and starts the timers (unref'd). */
  async start(): Promise<void> {
    const left = await sessionsLeftBy(this.o.sql, this.o.nodeId);
    if (left.length) await this.end(left, 'sessions left by an earlier process of this node ended');
    await this.beat();
    this.beatTimer = setInterval(() => void this.beat(), this.o.beatMs ?? BEAT_MS);
    this.beatTimer.unref();
    this.sweepTimer = setInterval(() => void this.sweep(), this.o.sweepMs ?? SWEEP_MS);
    this.sweepTimer.unref();
  }

  private async beat(): Promise<void> {
    try {
      await beat(this.o.sql, this.o.nodeId);
      this.beatingSince ??= Date.now();
    } catch (err) {
      this.beatingSince = null;
      this.o.log.warn({ err }, 'node beat not written');
    }
  }

  /** One sweep: ends the sessions of nodes whose beat is stale. Returns how many it ended. */
  sweep(): Promise<number> {
    if (this.sweeping) return this.sweeping;
    const run = (async () => {
      if (this.beatingSince === null || Date.now() - this.beatingSince < this.staleMs) return 0;
      try {
        const orphans = await orphanedSessions(this.o.sql, this.o.nodeId, this.staleMs);
        return orphans.length ? await this.end(orphans, 'sessions of a lost node ended') : 0;
      } catch (err) {
        this.o.log.warn({ err }, 'lost nodes not swept');
        return 0;
      }
    })();
    this.sweeping = run;
    void run.finally(() => { if (this.sweeping === run) this.sweeping = null; });
    return run;
  }

  private async end(sessions: OrphanedSession[], msg: string): Promise<number> {
    const ended: string[] = [];
    for (const s of sessions) {
      // Conditional on the session still being active: of several nodes sweeping, one ends it.
      if (await markSessionEnded(this.o.sql, s.id, { status: 'failed', reason: NODE_LOST, at: s.lastSeen })) ended.push(s.id);
    }
    if (!ended.length) return 0;
    this.o.log.warn({ ended: ended.length }, msg);
    await this.o.onEnded?.(ended).catch((err) => this.o.log.warn({ err }, 'lost sessions still registered'));
    return ended.length;
  }

  /** Stops beating and sweeping; with `forget`, removes this node's row (it holds no session). */
  async close(o: { forget?: boolean } = {}): Promise<void> {
    if (this.beatTimer) clearInterval(this.beatTimer);
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    this.beatTimer = this.sweepTimer = null;
    await this.sweeping;
    if (o.forget) await forgetNode(this.o.sql, this.o.nodeId).catch(() => {});
  }
}
