/**
 * Real-time playout of the agent's audio: frames leave no faster than they play, a little
 * ahead (`leadMs`) to cover network jitter. `enqueue` resolves only when less than
 * `highWaterMs` is waiting, so a reader that awaits it pulls its synthesis stream at the
 * speed of playback and never buffers a whole reply (backpressure down to the backend).
 * `playedMs` is how much audio has been sent; `heardMs` how much of it has reached its play time,
 * what the caller has heard by now (an interrupted reply keeps the words of that part).
 * Each frame is sent with its play time (`playAt`, clock ms): where the schedule puts it,
 * whenever it actually left. Frames held back by a stalled event loop leave together after
 * the stall, but their play times stay contiguous: a caller's jitter buffer absorbs such a
 * stall, and the recording places agent frames by this time (docs/api/recordings.md). After an
 * underrun (nothing queued) the schedule restarts from the moment audio comes again.
 *
 * Pacing runs on one shared tick per clock (every `tickMs`) for all playouts that have audio
 * queued, not on a timer per session: with hundreds of sessions speaking at once, a timer per
 * session per frame cost more than the frames themselves. A frame leaves on the first tick at
 * which it is due, so it is sent between `leadMs` and `leadMs - tickMs` ahead of its play time.
 * The tick (80 ms) is four frames (20 ms): each tick hands a session's due frames over back to
 * back, which the websocket transport writes to the socket in one go (one write per 80 ms, not
 * per frame: bench/README.md, tenth and fifteenth passes); the frames themselves stay 20 ms.
 */
import type { Clock } from './clock.ts';
import { SESSION_SAMPLE_RATE_HZ } from './types.ts';

const BYTES_PER_MS = (SESSION_SAMPLE_RATE_HZ * 2) / 1000;

/** The shared pacing tick of one clock: calls every registered pump once per period. */
class PacingTick {
  private readonly pumps = new Set<() => void>();
  private timer: unknown = null;

  constructor(
    private readonly clock: Clock,
    private readonly periodMs: number,
  ) {}

  add(pump: () => void): void {
    this.pumps.add(pump);
    if (this.timer === null) this.timer = this.clock.setTimeout(this.tick, this.periodMs);
  }

  delete(pump: () => void): void {
    if (!this.pumps.delete(pump) || this.pumps.size > 0 || this.timer === null) return;
    this.clock.clearTimeout(this.timer);
    this.timer = null;
  }

  private tick = () => {
    this.timer = null;
    // A snapshot: pumps register and unregister themselves while running.
    for (const pump of [...this.pumps]) pump();
    if (this.pumps.size > 0 && this.timer === null) this.timer = this.clock.setTimeout(this.tick, this.periodMs);
  };
}

const ticks = new WeakMap<Clock, Map<number, PacingTick>>();

function pacingTick(clock: Clock, periodMs: number): PacingTick {
  let byPeriod = ticks.get(clock);
  if (!byPeriod) ticks.set(clock, (byPeriod = new Map()));
  let t = byPeriod.get(periodMs);
  if (!t) byPeriod.set(periodMs, (t = new PacingTick(clock, periodMs)));
  return t;
}

export interface PlayoutOptions {
  frameMs?: number;
  /** How often due frames are sent (default 80 ms, four frames). */
  tickMs?: number;
  leadMs?: number;
  highWaterMs?: number;
}

export class Playout {
  private readonly frameBytes: number;
  private readonly frameMs: number;
  private readonly leadMs: number;
  private readonly highWaterBytes: number;
  private queue: Uint8Array[] = [];
  private queuedBytes = 0;
  private sentBytes = 0;
  /** Clock time at which sentBytes == 0 would have started playing. */
  private origin = 0;
  private readonly tick: PacingTick;
  /** Registered on the shared tick (audio is queued). */
  private ticking = false;
  private waiters: (() => void)[] = [];
  private drainWaiters: (() => void)[] = [];
  private stopped = false;
  /** When `stop` ran: nothing plays after it (the client drops what it holds). */
  private stoppedAt: number | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly send: (pcm: Uint8Array, playAt: number) => void,
    private readonly onProgress: (playedMs: number) => void = () => {},
    o: PlayoutOptions = {},
  ) {
    this.frameMs = o.frameMs ?? 20;
    const tickMs = o.tickMs ?? 4 * this.frameMs;
    // Sent 40–120 ms ahead with the defaults: the same 40 ms of cover as one frame per tick had.
    this.leadMs = o.leadMs ?? 40 + tickMs;
    this.frameBytes = this.frameMs * BYTES_PER_MS;
    this.highWaterBytes = (o.highWaterMs ?? 300) * BYTES_PER_MS;
    this.tick = pacingTick(clock, tickMs);
  }

  get playedMs(): number {
    return this.sentBytes / BYTES_PER_MS;
  }

  /**
   * Audio whose play time has come (the schedule's, not the moment it was sent): what the
   * caller has heard by now, at most what was sent. Sent audio is up to `leadMs` ahead of it.
   */
  get heardMs(): number {
    const now = this.stoppedAt ?? this.clock.now();
    return Math.max(0, Math.min(this.sentBytes / BYTES_PER_MS, now - this.origin));
  }

  /** Queues audio; resolves when the queue is below the high-water mark (or playout stopped). */
  enqueue(pcm: Uint8Array): Promise<void> {
    if (this.stopped || pcm.length === 0) return Promise.resolve();
    if (this.queuedBytes === 0 && !this.ticking) {
      // Starting, or resuming after an underrun (everything sent has played): play from now on.
      // An empty queue alone is no underrun: a chunk no longer than the lead goes out at once,
      // and the next one continues the schedule where that one ends.
      const now = this.clock.now();
      if (this.origin + this.sentBytes / BYTES_PER_MS < now) this.origin = now - this.sentBytes / BYTES_PER_MS;
    }
    this.queue.push(pcm);
    this.queuedBytes += pcm.length;
    this.pump();
    if (this.queuedBytes < this.highWaterBytes) return Promise.resolve();
    return new Promise((r) => this.waiters.push(r));
  }

  /** Resolves once everything queued has been sent. */
  drained(): Promise<void> {
    if (this.queuedBytes === 0 || this.stopped) return Promise.resolve();
    return new Promise((r) => this.drainWaiters.push(r));
  }

  /** Drops queued audio at once (barge-in) and releases every waiter. */
  stop(): void {
    if (!this.stopped) this.stoppedAt = this.clock.now();
    this.stopped = true;
    this.queue = [];
    this.queuedBytes = 0;
    if (this.ticking) this.tick.delete(this.pump);
    this.ticking = false;
    this.release();
  }

  private release() {
    for (const w of this.waiters.splice(0)) w();
    if (this.queuedBytes === 0) for (const w of this.drainWaiters.splice(0)) w();
  }

  private take(n: number): Uint8Array {
    const first = this.queue[0];
    if (first.length >= n) {
      // The common case (synthesis chunks are longer than a frame): a view, not a copy. Queued
      // audio is never written to, and every consumer of a frame copies what it keeps.
      if (first.length === n) this.queue.shift();
      else this.queue[0] = first.subarray(n);
      this.queuedBytes -= n;
      return first.subarray(0, n);
    }
    const out = new Uint8Array(Math.min(n, this.queuedBytes));
    let off = 0;
    while (off < out.length) {
      const head = this.queue[0];
      const k = Math.min(head.length, out.length - off);
      out.set(head.subarray(0, k), off);
      off += k;
      if (k === head.length) this.queue.shift();
      else this.queue[0] = head.subarray(k);
    }
    this.queuedBytes -= out.length;
    return out;
  }

  private pump = () => {
    if (this.stopped) return;
    const now = this.clock.now();
    let sent = false;
    // Send every frame that is due, `leadMs` ahead of its play time.
    while (this.queuedBytes > 0 && this.origin + this.sentBytes / BYTES_PER_MS - this.leadMs <= now) {
      const frame = this.take(this.frameBytes);
      const playAt = this.origin + this.sentBytes / BYTES_PER_MS;
      this.sentBytes += frame.length;
      this.send(frame, playAt);
      sent = true;
    }
    if (sent) this.onProgress(this.playedMs);
    if (this.queuedBytes < this.highWaterBytes) this.release();
    if (this.queuedBytes > 0 && !this.ticking) {
      this.ticking = true;
      this.tick.add(this.pump);
    } else if (this.queuedBytes === 0 && this.ticking) {
      this.ticking = false;
      this.tick.delete(this.pump);
    }
  };
}
