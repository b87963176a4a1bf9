/**
 * Caller audio to the recognizer in batches. A client sends frames of 20–100 ms (the SDK's
 * default is 40 ms, telephony's 20 ms); each frame sent on its own is one gRPC message through
 * grpc-js's layers, its own encoding and HTTP/2 framing buffers and one socket write. A batcher
 * joins a session's frames into messages of at least `batchMs` of audio (docs/websocket-transport.md,
 * "Caller audio to the recognizer"):
 *
 * - a frame of `batchMs` or more with nothing pending goes out as it is (no copy);
 * - smaller frames are copied into the batcher's own buffer until the pending audio reaches
 *   `batchMs`, then go out as one message (a view of that buffer, reused for the next batch);
 * - a batch whose first frame has waited `batchMs` goes out whatever it holds (one shared
 *   20 ms sweep for all batchers, not a timer per session): when the caller's frames stop or
 *   slow down, the end of speech is not held back;
 * - `end()` sends what is pending first; `cancel()` drops it.
 *
 * Frames are read during `push` only, and what `send` is given is read during the call only
 * (the recognition mux copies it into its request at once): neither side keeps the other's
 * buffer, so the websocket transport hands over uWebSockets.js's own buffer, with no copy and no
 * allocation per frame (bench/README.md, twenty-third pass).
 *
 * With frames arriving in real time the first frame of a batch waits at most `batchMs` less one
 * frame (20 ms with 20 ms frames and the default 40 ms): the recognizer hears the silence that
 * ends an utterance that much later at worst, half of it on average.
 */

/**
 * Default batch: 40 ms of audio per recognizer message (one SDK frame, two telephony frames; the
 * bench's 100 ms frames pass as they are). Measured with 20 ms frames (bench/README.md): 40 ms
 * added 13 ms to the caller's turn latency p50, 60 ms 31 ms.
 */
export const RECOGNIZER_BATCH_MS = 40;
/** How often batches whose first frame has waited `batchMs` are sent. */
const SWEEP_MS = 20;
/** 16 kHz × 2 bytes. */
const BYTES_PER_MS = 32;

/** A clock for the sweep (tests pass a manual one). */
export interface BatchClock {
  now(): number;
  setInterval(fn: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

const realClock: BatchClock = {
  now: () => performance.now(),
  setInterval: (fn, ms) => {
    const t = setInterval(fn, ms);
    t.unref();
    return t;
  },
  clearInterval: (h) => clearInterval(h as NodeJS.Timeout),
};

/** Batchers with audio pending, swept together. One sweep per clock. */
class Sweep {
  private readonly pending = new Set<AudioBatcher>();
  private timer: unknown = null;
  constructor(readonly clock: BatchClock) {}
  add(b: AudioBatcher): void {
    this.pending.add(b);
    if (this.timer === null) this.timer = this.clock.setInterval(() => this.run(), SWEEP_MS);
  }
  remove(b: AudioBatcher): void {
    this.pending.delete(b);
    if (this.pending.size === 0 && this.timer !== null) {
      this.clock.clearInterval(this.timer);
      this.timer = null;
    }
  }
  private run(): void {
    const now = this.clock.now();
    for (const b of this.pending) b.sweep(now);
  }
}

const sweeps = new WeakMap<BatchClock, Sweep>();
function sweepFor(clock: BatchClock): Sweep {
  let s = sweeps.get(clock);
  if (!s) sweeps.set(clock, (s = new Sweep(clock)));
  return s;
}

export class AudioBatcher {
  private readonly minBytes: number;
  private readonly waitMs: number;
  private readonly sweeper: Sweep;
  /** The pending audio (its first `bytes`); allocated at the first frame that waits. */
  private acc: Uint8Array | null = null;
  private bytes = 0;
  private since = 0;
  private closed = false;

  constructor(
    private readonly send: (pcm: Uint8Array) => void,
    o: { batchMs?: number; clock?: BatchClock } = {},
  ) {
    const batchMs = o.batchMs ?? RECOGNIZER_BATCH_MS;
    this.minBytes = Math.max(0, Math.round(batchMs * BYTES_PER_MS));
    this.waitMs = batchMs;
    this.sweeper = sweepFor(o.clock ?? realClock);
  }

  /** A frame of 16 kHz PCM bytes, read during the call only (the caller may reuse its buffer). */
  push(pcm: Uint8Array): void {
    if (this.closed || pcm.length === 0) return;
    if (this.bytes === 0 && pcm.length >= this.minBytes) {
      this.send(pcm);
      return;
    }
    if (this.bytes === 0) {
      this.since = this.sweeper.clock.now();
      this.sweeper.add(this);
    }
    const need = this.bytes + pcm.length;
    if (!this.acc || this.acc.length < need) {
      // Twice the batch at first (room for the frame that completes it); larger frames grow it.
      const next = new Uint8Array(Math.max(need, 2 * this.minBytes));
      if (this.acc) next.set(this.acc.subarray(0, this.bytes));
      this.acc = next;
    }
    this.acc.set(pcm, this.bytes);
    this.bytes = need;
    if (this.bytes >= this.minBytes) this.flush();
  }

  /** Sends what is pending now. */
  flush(): void {
    if (this.bytes === 0) return;
    const out = this.acc!.subarray(0, this.bytes);
    this.bytes = 0;
    this.sweeper.remove(this);
    this.send(out);
  }

  /** Called by the sweep: sends a batch whose first frame has waited long enough. */
  sweep(now: number): void {
    if (this.bytes > 0 && now - this.since >= this.waitMs - SWEEP_MS / 2) this.flush();
  }

  /** Sends what is pending, then takes no more. */
  end(): void {
    this.flush();
    this.closed = true;
  }

  /** Drops what is pending and takes no more. */
  cancel(): void {
    this.acc = null;
    this.bytes = 0;
    this.closed = true;
    this.sweeper.remove(this);
  }
}
