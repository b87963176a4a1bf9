// Status 502 (docs/api/auth-errors.md, D-SESS-7): an upstream failed, the message names it
// (`Agent gateway is unreachable`), and a retry is safe. With LiveKit configured, session creation creates the
// session's room on the media server first; when the server does not answer, creation is 502
// with nothing charged and no session stored. No LiveKit server exists here: LIVEKIT_URL points
// at a closed local port (connection refused) or at a socket that never answers (timeout).
import net from 'node:net';
import t, { type Test } from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { anon, credit, makeAgent } from './sessions-helpers.ts';

async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Accepts connections and never answers. */
async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const s = net.createServer((c) => {
    sockets.add(c);
    c.on('close', () => sockets.delete(c));
    c.on('error', () => {});
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  return {
    port: (s.address() as net.AddressInfo).port,
    close: () => new Promise<void>((r) => {
      for (const c of sockets) c.destroy();
      s.close(() => r());
    }),
  };
}

const livekit = (port: number) => ({ livekit: { url: `ws://127.0.0.1:${port}`, apiKey: 'devkey', apiSecret: 'a-secret-of-at-least-thirty-two-characters' } });

async function teamOf(app: TestServer): Promise<string> {
  const [row] = await app.db.sql<{ id: string }[]>`select id from teams limit 1`;
  return row!.id;
}

async function expectUnreachable(t: Test, app: TestServer, send: () => Promise<{ status: number; body: any }>, what: string) {
  const teamId = await teamOf(app);
  const before = await credit(app, teamId);
  const [{ n: ledgerBefore }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from credit_ledger`;
  const r = await send();
  t.equal(r.status, 502, `${what}: 502`);
  t.same(r.body, { status: 502, message: 'Agent gateway is unreachable' }, `${what}: the message, exactly`);
  t.equal(await credit(app, teamId), before, `${what}: credit balance unchanged`);
  const [{ n: ledgerAfter }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from credit_ledger`;
  t.equal(ledgerAfter, ledgerBefore, `${what}: no ledger entry (nothing held, nothing refunded)`);
  const [{ n: sessions }] = await app.db.sql<{ n: number }[]>`select count(*)::int as n from sessions`;
  t.equal(sessions, 0, `${what}: no session stored (none left pending)`);
}

t.test('LiveKit refusing connections: 502 Agent gateway is unreachable, nothing charged, no session left', async (t) => {
  const app = await startTestServer({ config: livekit(await closedPort()) });
  t.teardown(() => app.close());
  const agentId = await makeAgent(app, { public_enabled: true, allowed_origins: ['https://shop.example'] });
  await expectUnreachable(t, app, () => app.req('POST', '/v1/agent/sessions', { agent_id: agentId }), 'API key');
  await expectUnreachable(t, app, () => anon(app, { agent_id: agentId }, { Origin: 'https://shop.example' }), 'public agent');
  await expectUnreachable(t, app, () => app.req('POST', `/v1/agent/agents/${agentId}/preview`), 'preview');
  const list = await app.req('GET', '/v1/agent/sessions?status=pending,active,completed,failed');
  t.same(list.body.sessions, [], 'nothing to list');
  // Retry is safe: the same request fails the same way, still without a charge.
  await expectUnreachable(t, app, () => app.req('POST', '/v1/agent/sessions', { agent_id: agentId }), 'retry');
});

t.test('LiveKit not answering in time: 502 after the room timeout, nothing charged', async (t) => {
  const silent = await silentServer();
  const app = await startTestServer({ config: livekit(silent.port) });
  t.teardown(async () => {
    await app.close();
    await silent.close();
  });
  const agentId = await makeAgent(app);
  await expectUnreachable(t, app, () => app.req('POST', '/v1/agent/sessions', { agent_id: agentId }), 'timeout');
});

t.test('checks before the gateway still answer first: unknown agent 404, unpublished 409', async (t) => {
  const app = await startTestServer({ config: livekit(await closedPort()) });
  t.teardown(() => app.close());
  t.equal((await app.req('POST', '/v1/agent/sessions', { agent_id: 'agent_nope' })).status, 404);
  const draftOnly = await makeAgent(app, { publish: false });
  t.equal((await app.req('POST', '/v1/agent/sessions', { agent_id: draftOnly })).status, 409);
});
