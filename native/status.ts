// gRPC status errors of the native backend, shared by the RPC handlers and the provider engines.
import * as grpc from '@grpc/grpc-js';

/** A gRPC status error; `retryAfterMs` travels as the `retry-after-ms` trailer (RESOURCE_EXHAUSTED). */
export class StatusError extends Error {
  constructor(
    readonly code: grpc.status,
    readonly details: string,
    readonly retryAfterMs?: number,
  ) {
    super(details);
  }

  /** The trailing metadata this status is sent with. */
  metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.retryAfterMs !== undefined) md.set('retry-after-ms', String(Math.max(0, Math.round(this.retryAfterMs))));
    return md;
  }
}

export const invalid = (msg: string) => new StatusError(grpc.status.INVALID_ARGUMENT, msg);
