import type { Platform } from '../../src/platform.ts';
import { appendSessionItems, markSessionActive, markSessionEnded } from '../../src/sessions/store.ts';
import { startDurablePlatform, testKey, type DurablePlatform } from '../webhooks/helpers.ts';

export { testKey };
export type Req = DurablePlatform['req'];
export type App = DurablePlatform;

/** A platform on a durable store (`dataDir` / `schema`) whose inference goes to `backendAddress`. */
export function startAnalysisPlatform(o: { dataDir: string; schema: string; key: string; backendAddress: string; allow?: string[]; env?: Record<string, string> }): Promise<App> {
  return startDurablePlatform({ ...o, allow: o.allow ?? [] });
}

/** Creates and publishes an agent with `config`; returns its id. */
export async function publishedAgent(app: { req: Req }, config: Record<string, unknown>): Promise<string> {
  const created = await app.req('POST', '/v1/agent/agents', { name: 'Analysis agent', config });
  if (created.status !== 201) throw new Error(`agent create: ${created.status} ${created.text}`);
  const id = created.body.agent_id as string;
  const pub = await app.req('POST', `/v1/agent/agents/${id}/publish`);
  if (pub.status !== 200) throw new Error(`publish: ${pub.status} ${pub.text}`);
  return id;
}

/** A session of the agent that someone joined, with these transcript messages, ended as the runtime ends it. */
export async function conversation(app: { req: Req; db: Platform['db'] }, agentId: string, messages: { role: 'user' | 'assistant'; content: string }[]): Promise<string> {
  const s = await app.req('POST', '/v1/agent/sessions', { agent_id: agentId });
  if (s.status !== 200) throw new Error(`session: ${s.status} ${s.text}`);
  const id = s.body.session_id as string;
  await markSessionActive(app.db.sql, id, 'node-test');
  await appendSessionItems(app.db.sql, id, messages.map((m, i) => ({ type: 'message', payload: { ...m, turn_id: i } })));
  await markSessionEnded(app.db.sql, id, { status: 'completed', reason: 'user_hangup' });
  return id;
}

/** Polls the session detail until its analysis settled. */
export async function settledAnalysis(app: { req: Req }, sessionId: string): Promise<any> {
  for (;;) {
    const r = await app.req('GET', `/v1/agent/sessions/${sessionId}`);
    if (r.status !== 200) throw new Error(`detail: ${r.status} ${r.text}`);
    if (r.body.analysis) return r.body.analysis;
    await new Promise((res) => setTimeout(res, 50));
  }
}
