/**
 * Time for actors. A session's timers (max duration, eagerness, barge-in, re-engage, audio
 * pacing) all run on the clock it is given, so tests drive them without waiting.
 * The interface is a superset of xstate's `Clock`, so the same object is passed to
 * `createActor(machine, { clock })`.
 */
export interface Clock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(id: unknown): void;
  /** Milliseconds since the epoch. */
  now(): number;
}

/** Wall-clock time. */
export const realClock: Clock = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (id) => clearTimeout(id as NodeJS.Timeout),
  now: () => Date.now(),
};

interface Timer {
  id: number;
  at: number;
  fn: () => void;
}

/**
 * A clock for tests. `manual` (default): time moves only through `advance`/`tick`.
 * `realtime: true`: time also flows at wall speed (timers fire by themselves), and
 * `advance(ms)` jumps ahead, firing every timer that falls due, e.g. to reach a session's
 * `max_duration_seconds` in an end-to-end test without waiting for it.
 */
export class TestClock implements Clock {
  private timers: Timer[] = [];
  private nextId = 1;
  private offset = 0;
  private manualNow: number;
  private wake: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly opts: { realtime?: boolean; start?: number } = {}) {
    this.manualNow = opts.start ?? 1_700_000_000_000;
  }

  now(): number {
    return this.opts.realtime ? Date.now() + this.offset : this.manualNow;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const t = { id: this.nextId++, at: this.now() + Math.max(0, ms), fn };
    this.timers.push(t);
    this.timers.sort((a, b) => a.at - b.at || a.id - b.id);
    this.schedule();
    return t.id;
  }

  clearTimeout(id: unknown): void {
    this.timers = this.timers.filter((t) => t.id !== id);
    this.schedule();
  }

  /** Moves time forward by `ms`, firing due timers in order (synchronously). */
  advance(ms: number): void {
    const target = this.now() + ms;
    for (;;) {
      const t = this.timers[0];
      if (!t || t.at > target) break;
      this.timers.shift();
      this.setNow(t.at);
      t.fn();
    }
    this.setNow(target);
    this.schedule();
  }

  /**
   * Advances `ms` in steps of `stepMs`, letting promises and I/O callbacks run between
   * steps (what streaming code needs to make progress under a manual clock).
   */
  async tick(ms: number, stepMs = 10): Promise<void> {
    for (let done = 0; done < ms; done += stepMs) {
      this.advance(Math.min(stepMs, ms - done));
      await new Promise((r) => setImmediate(r));
    }
  }

  /** Stops the realtime wake-up timer. */
  close(): void {
    this.closed = true;
    if (this.wake) clearTimeout(this.wake);
    this.wake = null;
  }

  private setNow(at: number) {
    if (this.opts.realtime) this.offset = Math.max(this.offset, at - Date.now());
    else this.manualNow = Math.max(this.manualNow, at);
  }

  private schedule() {
    if (!this.opts.realtime || this.closed) return;
    if (this.wake) clearTimeout(this.wake);
    this.wake = null;
    const t = this.timers[0];
    if (!t) return;
    this.wake = setTimeout(() => {
      this.wake = null;
      this.advance(0);
    }, Math.max(0, t.at - this.now()));
    this.wake.unref();
  }
}
