/**
 * The rolling restart of docs/deploy.md: two nodes on one Postgres and one Redis, sessions live
 * on both; one node is stopped (SIGTERM's path: it stops accepting, ends its live sessions with
 * reason `shutdown` and writes their records) and a new node takes its place on the same
 * database. No session record and no webhook is lost: the sessions of the stopped node are
 * recorded as ended, the other node's go on, and every session's `call.ended` webhook arrives.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { startBackend } from '../../native/server.ts';
import { createLogger } from '../../src/log.ts';
import { randomSchema, startPlatform, type Platform } from '../../src/platform.ts';
import { sleep } from '../e2e/session-helpers.ts';
import { caller } from './helpers.ts';
import { allowWrites, startReceiver } from '../webhooks/helpers.ts';

const databaseUrl = process.env.DATABASE_URL;
const redisUrl = process.env.REDIS_URL;

t.test('a rolling restart of one node while sessions run on both loses no session record and no webhook', { skip: !(databaseUrl && redisUrl) ? 'DATABASE_URL and REDIS_URL are not both set: the two-node rolling restart needs a shared Postgres and Redis' : false }, async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', pacing: 'fast' });
  t.teardown(() => backend.close());
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  const allow = [`127.0.0.1:${receiver.port}`];
  allowWrites(t, ...allow);
  const key = `pk_test_${randomBytes(24).toString('base64url')}`;
  const schema = randomSchema();
  const statePrefix = `test:${randomBytes(4).toString('hex')}:`;
  const log = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const running = new Set<Platform>();
  t.teardown(async () => { for (const p of running) await p.close(); });
  const node = async (): Promise<Platform> => {
    const p = await startPlatform({
      env: {},
      config: { host: '127.0.0.1', port: 0, dataDir: 'memory', databaseUrl, redisUrl, bootstrapKey: key, logLevel: 'silent', startNativeBackend: false, backendAddress: backend.address, secretKey: 'b'.repeat(64), outboundAllow: allow },
      dbSchema: schema,
      statePrefix,
      log,
    });
    running.add(p);
    return p;
  };
  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const req = async (p: Platform, method: string, path: string, body?: unknown) => {
    const res = await fetch(p.url + path, { method, headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  const a = await node();
  const b = await node();
  const created = await req(a, 'POST', '/v1/agent/agents', { name: 'Rolling', config: { prompt: { first_message_mode: 'off' }, webhooks: { post_call: [{ url: `${receiver.url}/hook` }] } } });
  t.equal(created.status, 201);
  const agent = created.body.agent_id as string;
  t.equal((await req(a, 'POST', `/v1/agent/agents/${agent}/publish`)).status, 200);

  // Two sessions on each node: each is created through its node (its websocket URL is that
  // node's, as a load balancer with WebSocket affinity keeps it) and takes a turn.
  const sessions: { id: string; on: 'a' | 'b'; c: ReturnType<typeof caller> }[] = [];
  for (const [p, on] of [[a, 'a'], [a, 'a'], [b, 'b'], [b, 'b']] as const) {
    const s = await req(p, 'POST', '/v1/agent/sessions', { agent_id: agent });
    t.equal(s.status, 200);
    const c = caller(`${s.body.websocket_url}?token=${s.body.token}`);
    t.ok(await c.waitFor((m) => m.type === 'session.started'), `session on node ${on} started`);
    c.say(`before the restart ${sessions.length}`);
    t.ok(await c.waitFor((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final), 'the agent answered');
    sessions.push({ id: s.body.session_id, on, c });
  }

  // The restart of node A: it stops (its sessions end `shutdown`, records written), and a new
  // node starts on the same database and Redis while B keeps talking.
  await a.close();
  running.delete(a);
  for (const s of sessions.filter((x) => x.on === 'a')) {
    const closed = await s.c.closed;
    // docs/websocket-transport.md: `session.ended`, then close 1000 `shutdown`.
    t.same(closed, { code: 1000, reason: 'shutdown' }, 'the stopped node closed its sockets as documented');
    t.same(s.c.messages.filter((m) => m.type === 'session.ended').map((m) => m.reason), ['shutdown'], 'its client got session.ended shutdown before the close');
  }
  const a2 = await node();
  for (const s of sessions.filter((x) => x.on === 'b')) {
    s.c.say('during the restart');
    t.ok(await s.c.waitFor((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final && m.text.includes('during the restart')), 'a session on the other node goes on');
  }
  // The restarted node serves new sessions.
  const fresh = await req(a2, 'POST', '/v1/agent/sessions', { agent_id: agent });
  t.equal(fresh.status, 200);
  const fc = caller(`${fresh.body.websocket_url}?token=${fresh.body.token}`);
  t.ok(await fc.waitFor((m) => m.type === 'session.started'), 'a session on the restarted node started');
  sessions.push({ id: fresh.body.session_id, on: 'a', c: fc });
  for (const s of sessions.filter((x) => x.c.ws.readyState === WebSocket.OPEN)) {
    s.c.ws.send(JSON.stringify({ type: 'user.hangup' }));
    await s.c.closed;
  }

  // Every session's record: ended, with its turns; read through either node.
  for (const s of sessions) {
    let r = await req(b, 'GET', `/v1/agent/sessions/${s.id}`);
    for (let i = 0; i < 250 && r.body.status !== 'completed'; i++) {
      await sleep(20);
      r = await req(b, 'GET', `/v1/agent/sessions/${s.id}`);
    }
    t.equal(r.body.status, 'completed', `session ${s.id} recorded as completed`);
    if (s === sessions[0] || s === sessions[1]) {
      t.equal(r.body.ended_reason, 'shutdown', 'a session of the stopped node ended by the drain');
      t.ok(JSON.stringify(r.body).includes('before the restart'), 'its transcript kept what was said');
    }
  }
  // Every session's `call.ended` webhook arrived, whichever node delivered it.
  const ended = async () => new Set(receiver.requests.map((r) => JSON.parse(r.body)).filter((e) => e.event === 'call.ended').map((e) => e.session?.id));
  for (let i = 0; i < 500 && (await ended()).size < sessions.length; i++) await sleep(20);
  t.same([...(await ended())].sort(), sessions.map((s) => s.id).sort(), 'a call.ended webhook arrived for every session');
  // The receiver may hold the request before the sending node writes its
  // delivery row (the row follows the response), so read the log until it does.
  const delivered = (d: any) => d.body.deliveries?.some((x: any) => x.event === 'call.ended' && x.status === 'delivered');
  for (const s of sessions) {
    let d = await req(a2, 'GET', `/v1/agent/sessions/${s.id}/webhook-deliveries`);
    for (let i = 0; i < 250 && !delivered(d); i++) {
      await sleep(20);
      d = await req(a2, 'GET', `/v1/agent/sessions/${s.id}/webhook-deliveries`);
    }
    t.ok(delivered(d), `delivery log of ${s.id}: call.ended delivered`);
  }
});
