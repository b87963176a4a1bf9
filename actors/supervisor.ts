/**
 * The supervisor owns every session actor on this node: the cap on live sessions, the
 * metrics, the cross-node control channel and the drain at shutdown. Its actor is the root of
 * the node's actor tree: sessions are its children (ids: the session ids), each session's tool
 * calls are the session's children. A session that throws ends alone (its actor is subscribed
 * for errors in `startSession`, and its failure reaches this actor as an event it handles);
 * the others go on.
 */
import client from 'prom-client';
import { createActor, setup, type Actor } from 'xstate';
import type { Clock } from './clock.ts';
import { startSession, type SessionActorRef, type SessionHandle, type SessionMachine, type SessionParent } from './session.ts';
import type { SessionDeps, SessionEnd, SessionPlan, TurnMetrics, TurnTimeline } from './types.ts';

export interface SupervisorOptions {
  /** Live sessions this node holds at most (`PARLEY_MAX_SESSIONS`). */
  maxSessions: number;
  clock: Clock;
  /** Prometheus registry for the session metrics (the platform's `metrics.registry`). */
  registry?: client.Registry;
  log?: SessionDeps['log'];
}

/** A control message on the `session-control` channel (docs/sessions-contract.md). */
export interface ControlMessage {
  session_id: string;
  action: 'end';
  reason?: string;
}

const PARTS = ['recognition', 'decide', 'model', 'synthesis', 'platform', 'total'] as const;

type SupervisorEvent =
  | { type: 'session.spawn'; sessionId: string; machine: SessionMachine; input: { plan: SessionPlan } }
  | { type: 'session.remove'; sessionId: string };

/** The root actor: the sessions are its children. It does nothing else. */
const supervisorSetup = setup({ types: { events: {} as SupervisorEvent } });
const supervisorMachine = supervisorSetup.createMachine({
  id: 'supervisor',
  on: {
    'session.spawn': {
      actions: supervisorSetup.enqueueActions(({ event, enqueue }) => {
        if (event.type !== 'session.spawn') return;
        // Each session's machine closes over its own dependencies, so it is spawned as logic,
        // not by a name; xstate's types take an id only for logic named in `setup`, its
        // runtime for both.
        const options = { id: event.sessionId, input: event.input } as { input: unknown };
        enqueue.spawnChild(event.machine, options);
      }),
    },
    'session.remove': {
      actions: supervisorSetup.enqueueActions(({ event, enqueue }) => {
        if (event.type === 'session.remove') enqueue.stopChild(event.sessionId);
      }),
    },
    // A session's failure, after its own observer has ended it as failed: handled here, so that
    // one failing session never stops the root and every other session with it.
    'xstate.error.actor.*': {},
  },
});

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

  /**
   * The root actor of the sessions on each clock: the node's clock's, made with the
   * supervisor, and one for each clock a test runs sessions on (gone with its last session).
   */
  private readonly roots = new Map<Clock, Actor<typeof supervisorMachine>>();

  private root(clock: Clock): Actor<typeof supervisorMachine> {
    let root = this.roots.get(clock);
    if (!root) {
      root = createActor(supervisorMachine, { clock });
      root.subscribe({ error: (err) => this.options.log?.error({ err }, 'supervisor actor failed') });
      root.start();
      this.roots.set(clock, root);
    }
    return root;
  }

  /** Where a session on `clock` runs: a child of that clock's root actor. */
  private parent(clock: Clock): SessionParent {
    const root = this.root(clock);
    return {
      spawn: (sessionId, machine, input) => {
        root.send({ type: 'session.spawn', sessionId, machine, input });
        const child = (root.getSnapshot().children as Record<string, SessionActorRef | undefined>)[sessionId];
        if (!child) throw new Error(`session actor ${sessionId} was not spawned`);
        return child;
      },
      remove: (sessionId) => {
        root.send({ type: 'session.remove', sessionId });
        if (clock !== this.options.clock && Object.keys(root.getSnapshot().children).length === 0) {
          root.stop();
          this.roots.delete(clock);
        }
      },
    };
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
    return !this.draining && this.sessions.size + this.reserved < this.options.maxSessions;
  }

  /** Holds a place for a session being connected; false at capacity. Call the release once. */
  reserve(): (() => void) | null {
    if (!this.hasCapacity()) return null;
    this.reserved++;
    let released = false;
    return () => {
      if (!released) {
        released = true;
        this.reserved--;
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
    const clock = deps.clock ?? this.options.clock;
    const handle = startSession(plan, { ...deps, clock, onTurn, log: deps.log ?? this.options.log }, this.parent(clock));
    this.sessions.set(plan.sessionId, handle);
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
