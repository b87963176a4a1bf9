/**
 * Real-time playout of the agent's audio: frames leave no faster than they play, a little
 * ahead (`leadMs`) to cover network jitter. `enqueue` resolves only when less than
 * `highWaterMs` is waiting, so a reader that awaits it pulls its synthesis stream at the
 * speed of playback and never buffers a whole reply (backpressure down to the backend).
 * `playedMs` is how much audio has been sent since `reset()`: what the caller has heard.
 */
import type { Clock } from './clock.ts';
import { SESSION_SAMPLE_RATE_HZ } from './types.ts';

const BYTES_PER_MS = (SESSION_SAMPLE_RATE_HZ * 2) / 1000;

export interface PlayoutOptions {
  frameMs?: number;
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
  private timer: unknown = null;
  private waiters: (() => void)[] = [];
  private drainWaiters: (() => void)[] = [];
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly send: (pcm: Uint8Array) => void,
    private readonly onProgress: (playedMs: number) => void = () => {},
    o: PlayoutOptions = {},
  ) {
    this.frameMs = o.frameMs ?? 20;
    this.leadMs = o.leadMs ?? 60;
    this.frameBytes = this.frameMs * BYTES_PER_MS;
    this.highWaterBytes = (o.highWaterMs ?? 300) * BYTES_PER_MS;
  }

  get playedMs(): number {
    return this.sentBytes / BYTES_PER_MS;
  }

  get queuedMs(): number {
    return this.queuedBytes / BYTES_PER_MS;
  }

  /** Queues audio; resolves when the queue is below the high-water mark (or playout stopped). */
  enqueue(pcm: Uint8Array): Promise<void> {
    if (this.stopped || pcm.length === 0) return Promise.resolve();
    if (this.queuedBytes === 0 && this.timer === null) {
      // Starting (or resuming after an underrun): play from now on.
      this.origin = this.clock.now() - this.sentBytes / BYTES_PER_MS;
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
    this.stopped = true;
    this.queue = [];
    this.queuedBytes = 0;
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
    this.release();
  }

  private release() {
    for (const w of this.waiters.splice(0)) w();
    if (this.queuedBytes === 0) for (const w of this.drainWaiters.splice(0)) w();
  }

  private take(n: number): Uint8Array {
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
    this.timer = null;
    if (this.stopped) return;
    const now = this.clock.now();
    let sent = false;
    // Send every frame that is due, `leadMs` ahead of its play time.
    while (this.queuedBytes > 0 && this.origin + this.sentBytes / BYTES_PER_MS - this.leadMs <= now) {
      const frame = this.take(this.frameBytes);
      this.sentBytes += frame.length;
      this.send(frame);
      sent = true;
    }
    if (sent) this.onProgress(this.playedMs);
    if (this.queuedBytes < this.highWaterBytes) this.release();
    if (this.queuedBytes > 0) {
      const due = this.origin + this.sentBytes / BYTES_PER_MS - this.leadMs - now;
      this.timer = this.clock.setTimeout(this.pump, Math.max(1, Math.min(this.frameMs, due)));
    }
  };
}
