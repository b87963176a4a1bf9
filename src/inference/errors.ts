/**
 * The one mapping from gRPC status codes (what a backend answers) to platform errors
 * (docs/inference.md, "Errors"). Transport failures and backend answers share it.
 */
import { status, type ServiceError as GrpcError } from '@grpc/grpc-js';
import { ServiceError, type FieldError } from '../errors.ts';

/** Details that describe the connection rather than the request; never shown to clients. */
const TRANSPORT = /connect|connection|socket|ECONN|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|EPIPE|http2|RST_STREAM|GOAWAY|subchannel|channel|name resolution|No address/i;

/** grpc-js's own answer for an RPC the backend has no handler for: nothing for a client to read. */
const NO_HANDLER = /does not implement the method|unknown method|method not found/i;

/** `Retry-After` seconds from the backend's `retry-after-ms` trailer (a provider's delay), else 1. */
function retryAfterS(err: GrpcError | Error): string {
  const ms = Number((err as GrpcError).metadata?.get?.('retry-after-ms')?.[0]);
  return String(Number.isFinite(ms) && ms > 0 ? Math.max(1, Math.ceil(ms / 1000)) : 1);
}

/** `field.path: message` → a 422 field error; anything else → null. */
function fieldError(details: string): FieldError | null {
  const m = /^([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*): (.+)$/i.exec(details);
  if (!m) return null;
  const loc = m[1].split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : p));
  return { type: 'value_error', loc: ['body', ...loc], msg: m[2], ctx: {} };
}

/**
 * A gRPC error as a ServiceError:
 * UNAVAILABLE → 503 unavailable; RESOURCE_EXHAUSTED → 503 (Retry-After: the backend's
 * `retry-after-ms` trailer in seconds, else 1);
 * FAILED_PRECONDITION (an upstream of the backend refused) → 502 naming it;
 * INVALID_ARGUMENT → 422 when the details are `field.path: message`, else 400;
 * NOT_FOUND → 400 with the backend's message (`Reference not found`, `Model not found: x`);
 * UNIMPLEMENTED → 400 naming what is missing when the backend said (a missing recognizer, an
 * option its provider lacks); DEADLINE_EXCEEDED → 504; CANCELLED (not asked for) → 502;
 * anything else → 502. The gRPC error stays as the cause.
 */
export function fromGrpcError(err: GrpcError | Error, backend = 'inference backend'): ServiceError {
  const code = (err as GrpcError).code;
  const details = (err as GrpcError).details ?? err.message;
  const cause = { cause: err };
  switch (code) {
    case status.UNAVAILABLE:
      return new ServiceError('unavailable', !details || TRANSPORT.test(details) ? 'Inference backend unavailable' : `Inference backend unavailable: ${details}`, cause);
    case status.RESOURCE_EXHAUSTED:
      return new ServiceError('unavailable', 'Inference backend busy', { ...cause, headers: { 'Retry-After': retryAfterS(err) } });
    case status.FAILED_PRECONDITION:
      return new ServiceError('upstream', `Upstream refused the request: ${details}`, cause);
    case status.INVALID_ARGUMENT: {
      const f = fieldError(details);
      return f ? new ServiceError('invalid', f.msg, { ...cause, fields: [f] }) : new ServiceError('bad_request', details, cause);
    }
    case status.NOT_FOUND:
      return new ServiceError('bad_request', details || 'Reference not found', cause);
    case status.UNIMPLEMENTED:
      return new ServiceError('bad_request', !details || NO_HANDLER.test(details) ? `Not supported by the ${backend}` : `Not supported by the ${backend}: ${details}`, cause);
    case status.DEADLINE_EXCEEDED:
      return new ServiceError('timeout', 'Inference backend timed out', cause);
    case status.CANCELLED:
      return new ServiceError('upstream', 'Inference backend cancelled the call', cause);
    default:
      return new ServiceError('upstream', 'Inference backend error', cause);
  }
}
