/**
 * Error envelopes of the compatibility families (docs/api/compat.md "Errors"; D-COMPAT-6, D-COMPAT-7). One error type
 * (`ServiceError`) travels through the platform; each family maps it to its own body here
 * (families A, B and Groq-style) or in its own file (`src/compat/elevenlabs/`), using the
 * shared pieces below: `CompatEnvelope` and the provider mark.
 *
 * Who raised it matters: an error the compatibility layer raises itself (bad parameter,
 * unknown model, refused option, missing key) is reported as the layer's own; an error that
 * came back from a native service (`TtsService`, `AsrService`, the key check) is a
 * "provider" error and keeps its status and message. Native calls are wrapped with
 * `fromProvider` so the envelope can tell them apart.
 */
import { ServiceError, toServiceError } from '../errors.ts';
import type { HttpApp } from '../http/app.ts';
import { ELEVENLABS_BASE } from './elevenlabs/common.ts';
import { ElevenLabsError, toElevenLabsError } from './elevenlabs/errors.ts';

/** What a family answers for an error: status, JSON body, extra headers. */
export interface CompatEnvelope {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** Maps any thrown value to a family's response. */
export type EnvelopeFor = (err: unknown) => CompatEnvelope;

const providerErrors = new WeakSet<ServiceError>();

/** Marks an error as having come from a native service (its status and message pass through). */
export function markProvider(err: unknown): ServiceError {
  const e = toServiceError(err);
  providerErrors.add(e);
  return e;
}

export function isProviderError(e: ServiceError): boolean {
  return providerErrors.has(e);
}

/** Runs a native call; whatever it throws is marked as a provider error. */
export async function fromProvider<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw markProvider(err);
  }
}

/** The value of `metadata.provider_name` (docs/api/compat.md "Errors"). */
export const PROVIDER_NAME = 'service';

/**
 * The status a compat client sees. Schema violations (native 422 lists) become 400: the
 * router-style client has no class for 422 and the families document 400 for a bad
 * parameter. A bare 415 (wrong body type) stays 415.
 */
function compatStatus(e: ServiceError): number {
  return e.code === 'invalid' ? 400 : e.status;
}

/** A 422 field list as one sentence ("body.temperature: Too big…; …"). */
export function describe(e: ServiceError): string {
  if (e.code === 'invalid' && e.fields?.length) {
    return e.fields.map((f) => `${f.loc.filter((p) => p !== 'body').join('.')}: ${f.msg}`).join('; ');
  }
  return e.message;
}

/**
 * Families A, B and Groq-style (docs/api/compat.md): `{error: {code, message, type, param?,
 * metadata?}}` with `code` the numeric HTTP status (the router-style client rejects an
 * envelope without a numeric code; the others accept it).
 *
 * Types: `authentication_error` (no key, unparsable header; no metadata),
 * `provider_error` (from a native service, status kept, `metadata.provider_name`),
 * `rate_limit_error` (429), `invalid_request_error` (the layer's own 4xx),
 * `server_error` (the layer's own 5xx).
 */
export function openaiEnvelope(err: unknown): CompatEnvelope {
  const e = toServiceError(err);
  const status = compatStatus(e);
  const provider = isProviderError(e);
  let type: string;
  if (status === 429) type = 'rate_limit_error';
  else if (!provider && status === 401) type = 'authentication_error';
  else if (provider) type = 'provider_error';
  else type = status >= 500 ? 'server_error' : 'invalid_request_error';
  const error: Record<string, unknown> = { code: status, message: describe(e), type };
  const param = paramOf(e);
  if (param) error.param = param;
  if (provider && type !== 'rate_limit_error') error.metadata = { provider_name: PROVIDER_NAME };
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(e.headers ?? {})) if (k.toLowerCase() !== 'www-authenticate') headers[k] = v;
  // A deterministic 5xx of ours is not worth a retry; the SDKs honour this header.
  if (status >= 500 && status !== 503) headers['x-should-retry'] = 'false';
  return { status, body: { error }, headers };
}

const params = new WeakMap<ServiceError, string>();

/** A layer error naming the request field at fault (`param` in the envelope). */
export function badParam(param: string, message: string): ServiceError {
  const e = new ServiceError('bad_request', message);
  params.set(e, param);
  return e;
}

/** The request field a layer error names, if any. */
export function paramOf(e: ServiceError): string | undefined {
  return params.get(e);
}

/**
 * Family C for errors the HTTP layer answers itself under `/compat/elevenlabs` (docs/api/compat.md
 * HTTP map): an unknown path is `404 not_found`, a wrong method `405 invalid_request` (with
 * `Allow`), a body over the route limit `413 payload_too_large`; anything else goes through
 * the family's own map.
 */
export function elevenLabsLayerEnvelope(err: unknown): CompatEnvelope {
  const e = toServiceError(err);
  if (e.code === 'not_found') return toElevenLabsError(new ElevenLabsError('not_found', e.message));
  if (e.code === 'method_not_allowed') return toElevenLabsError(new ElevenLabsError('invalid_request', e.message, 405, { ...(e.headers ?? {}) }));
  return toElevenLabsError(e);
}

/** The prefixes whose HTTP-layer errors answer in the OpenAI-style envelope (`/compat` itself: the Groq client's base). */
export const OPENAI_ENVELOPE_PREFIXES = ['/compat', '/compat/v1', '/compat/api/v1', '/compat/openai/v1'] as const;

/**
 * Registers each family's envelope for the errors the HTTP layer produces under its prefix
 * (404, 405, 413, 503 while starting). Family C wins below `/compat/elevenlabs` (longest prefix).
 */
export function registerCompatEnvelopes(http: Pick<HttpApp, 'errorEnvelope'>): void {
  for (const prefix of OPENAI_ENVELOPE_PREFIXES) http.errorEnvelope(prefix, openaiEnvelope);
  http.errorEnvelope(ELEVENLABS_BASE, elevenLabsLayerEnvelope);
}
