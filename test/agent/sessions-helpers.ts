import type { TestServer } from '../helpers/server.ts';

export const PRICE = 100_000n; // the default PARLEY_SESSION_PRICE_PER_MINUTE (0.10) in micros

export interface AgentSetup {
  config?: unknown;
  publish?: boolean;
  public_enabled?: boolean;
  allowed_origins?: string[];
  overrides_allowed?: string[];
  auth?: Record<string, string>;
}

/** Creates (and by default publishes) an agent through the API; returns its id. */
export async function makeAgent(app: TestServer, o: AgentSetup = {}): Promise<string> {
  const auth = o.auth ?? app.auth;
  const created = await app.req('POST', '/v1/agent/agents', { name: 'Session agent', ...(o.config ? { config: o.config } : {}) }, auth);
  if (created.status !== 201) throw new Error(`agent create: ${created.status} ${created.text}`);
  const id = created.body.agent_id as string;
  const profile: Record<string, unknown> = {};
  for (const k of ['public_enabled', 'allowed_origins', 'overrides_allowed'] as const) if (o[k] !== undefined) profile[k] = o[k];
  if (Object.keys(profile).length) {
    const r = await app.req('PATCH', `/v1/agent/agents/${id}`, profile, auth);
    if (r.status !== 200) throw new Error(`agent patch: ${r.status} ${r.text}`);
  }
  if (o.publish !== false) {
    const r = await app.req('POST', `/v1/agent/agents/${id}/publish`, undefined, auth);
    if (r.status !== 200) throw new Error(`publish: ${r.status} ${r.text}`);
  }
  return id;
}

/** A keyless (public-agent) creation: no Authorization header at all. */
export async function anon(app: TestServer, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${app.url}/v1/agent/sessions`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await res.text();
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

export async function credit(app: TestServer, teamId: string): Promise<bigint> {
  const [row] = await app.db.sql<{ credit_micros: bigint }[]>`select credit_micros from teams where id = ${teamId}`;
  return BigInt(row!.credit_micros);
}

/**
 * Waits until at least `marginMs` remain in the current fixed one-minute window, so a
 * rate-limit test never straddles a window boundary.
 */
export async function freshWindow(marginMs = 15_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < marginMs) await new Promise((r) => setTimeout(r, left + 50));
}
