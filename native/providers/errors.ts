// How a provider's failures become the contract's status codes (docs/providers.md "Errors"):
// 401/403 → FAILED_PRECONDITION naming the provider (never the key); 429 → RESOURCE_EXHAUSTED
// with the provider's retry delay; refused connections and 5xx → UNAVAILABLE; no first byte by
// the deadline → DEADLINE_EXCEEDED; other 4xx → INVALID_ARGUMENT with the provider's message.
import * as grpc from '@grpc/grpc-js';
import { StatusError } from '../status.ts';

/** Thrown (as an abort reason) when a provider sent no first byte in time. */
export class FirstByteTimeout extends Error {
  constructor(readonly provider: string) {
    super(`${provider} sent nothing before the deadline`);
    this.name = 'FirstByteTimeout';
  }
}

/** The provider's delay from `Retry-After` (seconds or an HTTP date) or `retry-after-ms`, in ms. */
export function retryDelayMs(headers: { get(name: string): string | null | undefined }): number | undefined {
  const ms = Number(headers.get('retry-after-ms'));
  if (headers.get('retry-after-ms') && Number.isFinite(ms) && ms >= 0) return ms;
  const v = headers.get('retry-after');
  if (!v) return undefined;
  const s = Number(v);
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/** A short, single-line message from a provider's error body (OpenAI, ElevenLabs and Parley envelopes), or ''. */
export function providerMessage(body: string): string {
  let m = '';
  try {
    const j = JSON.parse(body) as Record<string, unknown>;
    const e = j.error ?? j.detail ?? j;
    if (typeof e === 'string') m = e;
    else if (e && typeof e === 'object') {
      const o = e as Record<string, unknown>;
      m = typeof o.message === 'string' ? o.message : typeof o.msg === 'string' ? o.msg : '';
    }
  } catch {
    m = body;
  }
  return m.replace(/\s+/g, ' ').trim().slice(0, 300);
}

/** A provider's HTTP error status as a gRPC status error. `what` names the provider. */
export function fromProviderStatus(what: string, status: number, body: string, headers: { get(name: string): string | null | undefined }): StatusError {
  const msg = providerMessage(body);
  const said = msg ? `: ${msg}` : '';
  if (status === 401 || status === 403) {
    // The provider's own words may quote the key it was given: they stay out.
    return new StatusError(grpc.status.FAILED_PRECONDITION, `${what} refused the credentials (HTTP ${status}): check the API key setting`);
  }
  if (status === 429) {
    const delay = retryDelayMs(headers);
    return new StatusError(grpc.status.RESOURCE_EXHAUSTED, `${what} rate limit reached (HTTP 429)${delay !== undefined ? `, retry after ${Math.ceil(delay / 1000)} s` : ''}`, delay ?? 1000);
  }
  if (status === 408 || status >= 500) return new StatusError(grpc.status.UNAVAILABLE, `${what} failed (HTTP ${status})${said}`);
  if (status === 404) return new StatusError(grpc.status.FAILED_PRECONDITION, `${what} has no such endpoint or model (HTTP 404)${said}`);
  return new StatusError(grpc.status.INVALID_ARGUMENT, `${what} refused the request (HTTP ${status})${said}`);
}

/** A transport failure (refused, reset, DNS, TLS) or a timeout, as a gRPC status error. */
export function fromNetworkError(what: string, err: unknown): StatusError {
  if (err instanceof StatusError) return err;
  if (err instanceof FirstByteTimeout) return new StatusError(grpc.status.DEADLINE_EXCEEDED, err.message);
  const code = networkCode(err);
  return new StatusError(grpc.status.UNAVAILABLE, `${what} is not answering${code ? ` (${code})` : ''}`);
}

/** The errno-style code of a fetch or socket failure (`ECONNREFUSED`, …), when there is one. */
function networkCode(err: unknown): string {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, i = 0; e && i < 4; e = e.cause as typeof e, i++) {
    if (typeof e.code === 'string' && /^[A-Z_]+$/.test(e.code)) return e.code;
  }
  return '';
}

/** Whether an error is the caller's own cancellation (not a provider failure). */
export const isAbort = (err: unknown, signal: AbortSignal) => signal.aborted && !(signal.reason instanceof FirstByteTimeout) && (err === signal.reason || (err instanceof Error && err.name === 'AbortError'));
