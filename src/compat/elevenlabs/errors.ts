/**
 * Family C's error envelope: `{detail: {status, message}}` (docs/api/compat.md "Errors"), and
 * the one map from the platform's `ServiceError` to it (D-COMPAT-11).
 *
 * Errors raised by the compat layer itself are `ElevenLabsError`s with their own status
 * string. Anything the native services threw reached the native API: it becomes
 * `provider_error` with the native HTTP status and message passed through verbatim, except
 * three codes that have a status string of their own (413, 429, 502) and the 422 list,
 * which keeps the vendor's `{detail: [{loc, msg, type}]}` shape (the official client maps
 * 422 to `UnprocessableEntityError`).
 */
import { toServiceError, type FieldError } from '../../errors.ts';
import type { Reply } from '../../http/reply.ts';

export type ElevenLabsStatus =
  | 'invalid_request'
  | 'unauthorized'
  | 'voice_not_found'
  | 'model_not_found'
  | 'not_found'
  | 'payload_too_large'
  | 'rate_limit_error'
  | 'upstream_error'
  | 'provider_error';

/** HTTP status of each status string raised by the layer (`provider_error` passes the native one through). */
export const ELEVENLABS_HTTP: Record<Exclude<ElevenLabsStatus, 'provider_error'>, number> = {
  invalid_request: 400,
  unauthorized: 401,
  voice_not_found: 404,
  model_not_found: 400,
  not_found: 404,
  payload_too_large: 413,
  rate_limit_error: 429,
  upstream_error: 502,
};

/** An error raised by the family C layer itself, or a native failure already mapped. */
export class ElevenLabsError extends Error {
  constructor(
    readonly status: ElevenLabsStatus,
    message: string,
    readonly httpStatus: number = status === 'provider_error' ? 400 : ELEVENLABS_HTTP[status],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ElevenLabsError';
  }
}

export interface ElevenLabsErrorBody {
  status: number;
  body: { detail: { status: ElevenLabsStatus; message: string } | { loc: (string | number)[]; msg: string; type: string }[] };
  headers: Record<string, string>;
  /** Set for unexpected failures (the cause goes to the log, never to the client). */
  internal?: unknown;
}

/** The response for any error thrown while serving a family C request. */
export function toElevenLabsError(err: unknown): ElevenLabsErrorBody {
  if (err instanceof ElevenLabsError) {
    return { status: err.httpStatus, body: { detail: { status: err.status, message: err.message } }, headers: err.headers };
  }
  const e = toServiceError(err);
  const headers = { ...(e.headers ?? {}) };
  const internal = e.code === 'internal' ? err : undefined;
  if (e.code === 'invalid' && e.fields) return { status: 422, body: { detail: e.fields.map(toVendorField) }, headers };
  const status: ElevenLabsStatus =
    e.code === 'payload_too_large' ? 'payload_too_large' : e.code === 'rate_limited' ? 'rate_limit_error' : e.code === 'upstream' ? 'upstream_error' : 'provider_error';
  // A deterministic 5xx is not worth the official client's automatic retries.
  if (e.status >= 500) headers['x-should-retry'] = 'false';
  if (e.status === 429 && !headers['Retry-After']) headers['Retry-After'] = '1';
  return { status: e.status, body: { detail: { status, message: e.message } }, headers, internal };
}

const toVendorField = (f: FieldError) => ({ loc: f.loc, msg: f.msg, type: f.type });

/** Writes the error response when nothing was sent yet; returns false when the body had already started. */
export function sendElevenLabsError(reply: Reply, err: unknown, log?: { error(o: object, msg: string): void }): boolean {
  const e = toElevenLabsError(err);
  if (e.internal !== undefined) log?.error({ err: e.internal }, 'compat request failed');
  if (reply.started) return false;
  reply.json(e.status, e.body, e.headers);
  return true;
}
