/**
 * The supervisor owns every session actor on this node: the cap on live sessions, the
 * metrics, the cross-node control channel and the drain at shutdown. It is the root of the
 * node's supervision tree: it starts each session's actor, subscribed for errors, and ends it;
 * a session's tool calls are that actor's children. A session that throws ends alone; the
 * others go on.
 *
 * Each session's actor is the root of an xstate system of its own, not a child of an actor
 * here: xstate (5.33) copies a parent's map of children on every spawn and stop of a child,
 * and scans every delayed event of the whole system whenever any actor in it stops, so one
 * root over all sessions made starting or ending a session, and every turn, cost in
 * proportion to the sessions on the node (`bench/actors.ts`: +35 to 60 % CPU per turn at
 * 1,000 sessions).
 */
import client from 'prom-client';
import type { Clock } from './clock.ts';
import { startSession, type SessionHandle } from './session.ts';
import type { SessionDeps, SessionEnd, SessionPlan, TurnMetrics, TurnTimeline } from './types.ts';

export interface SupervisorOptions {
  /** Live sessions this node holds at most (`PARLEY_MAX_SESSIONS`). */
  maxSessions: number;
  clock: Clock;
  /** Prometheus registry for the session metrics (the platform's `metrics.registry`). */
  registry?: client.Registry;
  log?: SessionDeps['log'];
  /**
   * The node's count of sessions and admissions, shared by its workers (an `Int32Array` over a
   * `SharedArrayBuffer`, index 0): with it, `maxSessions` caps the node, not this worker.
   */
  shared?: Int32Array;
}

/** A control message on the `session-control` channel (docs/sessions-contract.md). */
export interface ControlMessage {
  session_id: string;
  action: 'end';
  reason?: string;
}

const PARTS = ['recognition', 'decide', 'model', 'synthesis', 'platform', 'total'] as const;

export class Supervisor {
  private readonly sessions = new Map<string, SessionHandle>();
  /** Admissions between the capacity check and the actor's start (connects in flight). */
  private reserved = 0;
  private draining = false;
  private readonly live: client.Gauge;
  private readonly turns: client.Counter;
  private readonly ended: client.Counter<'status' | 'reason'>;
  private readonly latency: client.Histogram<'part'>;
  private readonly failures: client.Counter;

  constructor(readonly options: SupervisorOptions) {
    const registers = options.registry ? [options.registry] : [];
    this.live = new client.Gauge({ name: 'parley_sessions_live', help: 'Live sessions on this node.', registers });
    this.turns = new client.Counter({ name: 'parley_session_turns_total', help: 'Agent turns that started speaking (or answered in text).', registers });
    this.ended = new client.Counter({ name: 'parley_sessions_ended_total', help: 'Sessions ended, by status and reason.', labelNames: ['status', 'reason'], registers });
    this.failures = new client.Counter({ name: 'parley_session_failures_total', help: 'Sessions that ended with status failed.', registers });
    this.latency = new client.Histogram({
      name: 'parley_session_turn_latency_seconds',
      help: 'Turn latency to the first agent audio, by part: recognition, decide (eagerness), model, synthesis, platform (the rest), total.',
      labelNames: ['part'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5],
      registers,
    });
  }

  private readonly turnWatchers = new Set<(timeline: TurnTimeline, m: TurnMetrics) => void>();

  /** Watches every turn of every session on this node (bench/sessions.ts); returns the unwatch. */
  watchTurns(fn: (timeline: TurnTimeline, m: TurnMetrics) => void): () => void {
    this.turnWatchers.add(fn);
    return () => this.turnWatchers.delete(fn);
  }

  get size(): number {
    return this.sessions.size;
  }

  /** True while this node may take one more session (creation answers 503 otherwise). */
  hasCapacity(): boolean {
    if (this.draining) return false;
    const shared = this.options.shared;
    return (shared ? Atomics.load(shared, 0) : this.sessions.size + this.reserved) < this.options.maxSessions;
  }

  /** Holds a place for a session being connected; false at capacity. Call the release once. */
  reserve(): (() => void) | null {
    if (!this.hasCapacity()) return null;
    const shared = this.options.shared;
    // Shared by the node's workers: take the place first, give it back if another took the last.
    if (shared && Atomics.add(shared, 0, 1) >= this.options.maxSessions) {
      Atomics.sub(shared, 0, 1);
      return null;
    }
    this.reserved++;
    let released = false;
    return () => {
      if (!released) {
        released = true;
        this.reserved--;
        if (shared) Atomics.sub(shared, 0, 1);
      }
    };
  }

  get(sessionId: string): SessionHandle | undefined {
    return this.sessions.get(sessionId);
  }

  /** Starts and owns a session actor. `onEnded` runs once it has ended (record, close transports). */
  start(plan: SessionPlan, deps: Omit<SessionDeps, 'clock'> & { clock?: Clock }, onEnded: (e: SessionEnd) => Promise<void> | void): SessionHandle {
    const onTurn = (m: TurnMetrics, timeline: TurnTimeline) => {
      this.turns.inc();
      for (const part of PARTS) {
        const v = m[`${part}_ms`];
        if (v !== null) this.latency.observe({ part }, v / 1000);
      }
      deps.onTurn?.(m, timeline);
      for (const w of this.turnWatchers) {
        try {
          w(timeline, m);
        } catch (err) {
          // A watcher (a bench, a probe) never fails the turn it watches.
          this.options.log?.warn({ err }, 'turn watcher failed');
        }
      }
    };
    const handle = startSession(plan, { ...deps, clock: deps.clock ?? this.options.clock, onTurn, log: deps.log ?? this.options.log });
    this.sessions.set(plan.sessionId, handle);
    if (this.options.shared) Atomics.add(this.options.shared, 0, 1);
    this.live.set(this.sessions.size);
    void handle.ended.then(async (e) => {
      this.ended.inc({ status: e.status, reason: e.reason });
      if (e.status === 'failed') this.failures.inc();
      try {
        await onEnded(e);
      } catch (err) {
        this.options.log?.error({ err, sessionId: plan.sessionId }, 'session end handling failed');
      } finally {
        this.sessions.delete(plan.sessionId);
        if (this.options.shared) Atomics.sub(this.options.shared, 0, 1);
        this.live.set(this.sessions.size);
        this.settled?.();
      }
    });
    return handle;
  }

  /** Ends a session held here; false when this node does not hold it. */
  end(sessionId: string, reason: string): boolean {
    const s = this.sessions.get(sessionId);
    if (!s) return false;
    s.end(reason);
    return true;
  }

  /** Handles one `session-control` message (ignores malformed ones and sessions held elsewhere). */
  control(raw: string): void {
    let m: Partial<ControlMessage>;
    try {
      m = JSON.parse(raw);
    } catch {
      return;
    }
    if (m && m.action === 'end' && typeof m.session_id === 'string') this.end(m.session_id, m.reason === 'api' || !m.reason ? 'ended_by_api' : m.reason);
  }

  private settled: (() => void) | null = null;

  /**
   * Stops taking sessions and ends every live one (`reason`, default `shutdown`), waiting up
   * to `timeoutMs` for their records to be written.
   */
  async drain(reason = 'shutdown', timeoutMs = 10_000): Promise<void> {
    this.draining = true;
    for (const s of this.sessions.values()) s.end(reason);
    if (this.sessions.size === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.settled = () => {
        if (this.sessions.size === 0) {
          clearTimeout(timer);
          resolve();
        }
      };
    });
  }
}
