/**
 * Public agents: a browser creates the session itself, without a key. The platform accepts
 * a keyless `POST /v1/agent/sessions` for an agent whose public switch is on, from a page
 * whose origin is on the agent's allow-list (the browser sends `Origin`; the SDK cannot set
 * it), rate limited per agent and per client IP. Only the `language` and `voice_id` overrides
 * are accepted, and no session name.
 */
import { start } from './start.ts';
import { ClientError, type Conversation, type SessionResponse, type StartOptions } from './types.ts';

export interface PublicSessionRequest {
  /** Where the platform is, e.g. `https://voice.example.com` (its API and `/sdk/` files). */
  baseUrl: string;
  agentId: string;
  /** Only these two, and only those the agent's `overrides_allowed` lists. */
  overrides?: { language?: string; voice_id?: string };
  /** Values for the agent's `{{placeholders}}` (up to 50). */
  dynamicVariables?: Record<string, string | number | boolean>;
  /** Your identifier of the visitor, kept with the conversation. */
  endUserId?: string;
  /** Stored with the session and returned verbatim (webhooks included). */
  metadata?: Record<string, unknown>;
  /** Tool lifecycle events to the client (default true). */
  toolEvents?: boolean;
  /** `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

/** The visitor's IANA time zone, as the platform's `client_timezone` wants it; undefined when unknown. */
export function browserTimezone(): string | undefined {
  try {
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    return typeof zone === 'string' && zone.length > 0 && zone.length <= 64 ? zone : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Creates a session of a public agent (keyless) and returns the creation response, to pass
 * to `start()`. `client_timezone` is the browser's time zone. Rejects with `ClientError`:
 * `session_refused` with the platform's `status` and message (`403 Origin not allowed`,
 * `403 Agent is not public`, `429` with `retryAfterMs`, `409 Agent has no published version`,
 * `400`/`422` for overrides or variables), `connection_failed` when the platform cannot be
 * reached.
 */
export async function createPublicSession(req: PublicSessionRequest): Promise<SessionResponse> {
  const doFetch = req.fetch ?? globalThis.fetch;
  const url = `${req.baseUrl.replace(/\/+$/, '')}/v1/agent/sessions`;
  const timezone = browserTimezone();
  const body = {
    agent_id: req.agentId,
    ...(req.overrides ? { overrides: req.overrides } : {}),
    ...(req.dynamicVariables ? { dynamic_variables: req.dynamicVariables } : {}),
    ...(req.endUserId !== undefined ? { end_user_id: req.endUserId } : {}),
    ...(req.metadata ? { metadata: req.metadata } : {}),
    ...(req.toolEvents !== undefined ? { tool_events: req.toolEvents } : {}),
    ...(timezone ? { client_timezone: timezone } : {}),
  };
  let res: Response;
  try {
    // No credentials: a public session is anonymous, and the platform allows any origin to read its answers.
    res = await doFetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), credentials: 'omit' });
  } catch (err) {
    throw new ClientError('connection_failed', `Could not reach ${url}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
  const text = await res.text().catch(() => '');
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (res.ok && parsed && typeof parsed === 'object') return parsed as SessionResponse;
  const retryAfterS = Number(res.headers.get('retry-after'));
  throw new ClientError('session_refused', `Session refused (${res.status}): ${refusal(parsed, res.statusText)}`, {
    status: res.status,
    ...((res.status === 429 || res.status === 503) && Number.isFinite(retryAfterS) && retryAfterS > 0 ? { retryAfterMs: retryAfterS * 1000 } : {}),
  });
}

/** The platform's message: `{status, message}`, or the 422 list of field errors. */
function refusal(body: unknown, fallback: string): string {
  if (Array.isArray(body)) {
    const parts = body.map((e: { loc?: unknown[]; msg?: unknown }) => `${Array.isArray(e?.loc) ? e.loc.join('.') : ''}: ${String(e?.msg ?? '')}`);
    if (parts.length) return parts.join('; ');
  }
  if (body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string') return (body as { message: string }).message;
  return fallback || 'no reason given';
}

/**
 * Creates a session of a public agent and joins it: `createPublicSession(request)` then
 * `start(session, options)`. Call it from a click (browsers start audio only after a gesture).
 */
export async function startPublic(req: PublicSessionRequest, options: StartOptions = {}): Promise<Conversation> {
  return start(await createPublicSession(req), options);
}
