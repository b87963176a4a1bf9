/**
 * Writes handed to a gRPC call whose bytes have not left yet, oldest first (docs/inference.md,
 * "Send backlog"). grpc-js calls a write back, in order, once its HTTP/2 stream has taken the
 * bytes (past its retry buffer, RETRY_BUFFER_PER_CALL_BYTES, which it calls back at once), so what
 * waits here is what the backend's flow-control window or a busy connection holds back.
 */
export class WriteBacklog {
  private at: number[] = [];
  private sizes: number[] = [];
  private head = 0;
  /** Bytes of the writes not called back yet. */
  bytes = 0;

  /** A write of `size` bytes was handed to the call now. */
  written(size: number, now = performance.now()): void {
    this.at.push(now);
    this.sizes.push(size);
    this.bytes += size;
  }

  /** The oldest write was called back. */
  sent(): void {
    if (this.head >= this.at.length) return;
    this.bytes -= this.sizes[this.head++];
    if (this.head === this.at.length) this.clear();
    else if (this.head >= 4096 && this.head * 2 >= this.at.length) {
      // A backlog that never empties: drop what was sent so the lists do not grow with it.
      this.at.splice(0, this.head);
      this.sizes.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Forgets every write (the call ended). */
  clear(): void {
    this.at.length = this.sizes.length = 0;
    this.head = this.bytes = 0;
  }

  /** How long the oldest write not called back has waited, in ms (0: none waits). */
  ageMs(now = performance.now()): number {
    return this.head < this.at.length ? Math.max(0, now - this.at[this.head]) : 0;
  }
}
