/**
 * One error type for the whole platform. Every failure that reaches a client is a
 * ServiceError with a code from a small set; the HTTP layer maps codes to statuses once
 * (`httpStatus`), and the compat families map them to their own envelopes. The `cause`
 * stays on the error for logs and never reaches a response.
 */
export type Code =
  | 'bad_request' // 400: semantic errors
  | 'malformed' // 400: unparsable body
  | 'unauthenticated' // 401 JSON (present but bad credential)
  | 'unauthenticated_bare' // 401 with WWW-Authenticate and no body
  | 'payment_required' // 402
  | 'forbidden' // 403
  | 'not_found' // 404
  | 'method_not_allowed' // 405
  | 'conflict' // 409
  | 'request_timeout' // 408: a request body not received in time (the connection is closed)
  | 'payload_too_large' // 413
  | 'unsupported_media_type' // 415 (bare)
  | 'invalid' // 422 (list of field errors)
  | 'rate_limited' // 429
  | 'internal' // 500
  | 'upstream' // 502
  | 'unavailable' // 503
  | 'timeout'; // 504

export const httpStatus: Record<Code, number> = {
  bad_request: 400,
  malformed: 400,
  unauthenticated: 401,
  unauthenticated_bare: 401,
  payment_required: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  invalid: 422,
  rate_limited: 429,
  internal: 500,
  upstream: 502,
  unavailable: 503,
  timeout: 504,
};

/** One entry of a 422 response: where (`loc`), what kind (`type`), a message, context. */
export interface FieldError {
  type: string;
  loc: (string | number)[];
  msg: string;
  ctx: Record<string, unknown>;
}

export interface ServiceErrorOptions extends ErrorOptions {
  /** Field errors for code `invalid`. */
  fields?: FieldError[];
  /** Extra response headers (Retry-After, Allow, WWW-Authenticate). */
  headers?: Record<string, string>;
  /**
   * A machine-readable refusal reason, answered beside `status` and `message` (phone calls:
   * `outbound_disabled`, `daily_limit_exceeded`, ...); a 422 keeps its list shape.
   */
  reason?: string;
}

export class ServiceError extends Error {
  readonly fields?: FieldError[];
  readonly headers?: Record<string, string>;
  readonly reason?: string;
  constructor(
    readonly code: Code,
    message: string,
    options?: ServiceErrorOptions,
  ) {
    super(message, options);
    this.name = 'ServiceError';
    this.fields = options?.fields;
    this.headers = options?.headers;
    this.reason = options?.reason;
  }
  get status(): number {
    return httpStatus[this.code];
  }
}

/** A 422 with one field error. */
export function invalidField(loc: (string | number)[], msg: string, type = 'value_error', ctx: Record<string, unknown> = {}): ServiceError {
  return new ServiceError('invalid', msg, { fields: [{ type, loc, msg, ctx }] });
}

export const notFound = (what: string) => new ServiceError('not_found', `${what} not found`);

/** Seconds a client is told to wait (`Retry-After`) when a dependency is unreachable. */
export const DEPENDENCY_RETRY_AFTER_S = 2;

/** A `503` for a dependency that cannot be reached now, with `Retry-After` (docs/reliability.md). */
export function dependencyUnavailable(message: string, cause?: unknown): ServiceError {
  return new ServiceError('unavailable', message, { cause, headers: { 'Retry-After': String(DEPENDENCY_RETRY_AFTER_S) } });
}

/**
 * Anything thrown that is not a ServiceError becomes an opaque 500; the cause is kept for the log.
 * A database that cannot be reached (`isConnectionError`) is a `503` with `Retry-After` instead.
 */
export function toServiceError(err: unknown): ServiceError {
  if (err instanceof ServiceError) return err;
  if (isUnstorableText(err)) return new ServiceError('bad_request', 'Text contains a character that cannot be stored (a NUL or a lone surrogate)', { cause: err });
  if (isConnectionError(err)) return dependencyUnavailable('The database is unavailable: try again shortly', err);
  return new ServiceError('internal', 'Internal server error', { cause: err });
}

/** Socket-level failures of a connection (Node's codes). */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTCONN', 'EAI_AGAIN']);
/**
 * postgres.js's own connection failures, and the pool's connect refused at once while the
 * server is taken as unreachable (`DB_UNREACHABLE`, `src/store/silence.ts`).
 */
const DRIVER_CODES = new Set(['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT', 'DB_UNREACHABLE']);

/**
 * Whether `err` says the database could not be reached or dropped the connection (a restart, a
 * network cut), rather than refused the statement: a socket error, a postgres.js connection
 * error, SQLSTATE class 08 (connection exception) or 57P01–57P03 (admin or crash shutdown,
 * cannot connect now). Such a failure is transient: the request may be retried.
 */
export function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return false;
  return SOCKET_CODES.has(code) || DRIVER_CODES.has(code) || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03';
}

/**
 * PostgreSQL's refusal of text it cannot hold (`22021` invalid byte sequence, e.g. a NUL;
 * `22P05` untranslatable character, e.g. a lone surrogate in jsonb). Only client text gets
 * there: the HTTP layer refuses such input first, this is the backstop (docs/reliability.md).
 */
function isUnstorableText(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '22021' || code === '22P05';
}
