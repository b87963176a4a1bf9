/**
 * The session registry (which node holds a live session) and cross-node resume: a client
 * reconnecting to a node that does not hold its session is told the owner's URL
 * (`session.moved`, close 4307) and the SDK follows it.
 *
 * The registry's rules run on the in-memory shared state always; the two-node test needs a
 * shared Postgres and Redis and runs when DATABASE_URL and REDIS_URL are set.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { startBackend } from '../../native/server.ts';
import { start } from '../../src/client/index.ts';
import { createLogger } from '../../src/log.ts';
import { randomSchema, startPlatform, type Platform } from '../../src/platform.ts';
import { MemoryState } from '../../src/state/memory.ts';
import { REGISTRY_TTL_MS, registryKey, SessionRegistry } from '../../src/state/session-registry.ts';
import { nodeIdentity } from '../../src/transport/node-url.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { sleep } from '../e2e/session-helpers.ts';

t.test('the registry: claim, lookup, release; entries expire unless refreshed (TTL)', async (t) => {
  let now = 1_000_000;
  const state = new MemoryState({ prefix: 'reg:', now: () => now });
  t.teardown(() => state.close());
  const a = new SessionRegistry(state, { nodeId: 'node-a', url: 'ws://a:8080/v1/agent/sessions/connect' });
  const b = new SessionRegistry(state, { nodeId: 'node-b', url: 'ws://b:8080/v1/agent/sessions/connect' });
  await a.claim('sess_1', 'ab'.repeat(32));
  t.same(await b.lookup('sess_1'), { node: 'node-a', url: 'ws://a:8080/v1/agent/sessions/connect', resume: 'ab'.repeat(32) }, 'another node sees the owner');
  t.equal(await b.lookup('sess_2'), null);
  now += REGISTRY_TTL_MS - 1;
  await a.refresh();
  now += REGISTRY_TTL_MS - 1;
  t.ok(await b.lookup('sess_1'), 'refreshed before the TTL: still there');
  now += 2;
  t.equal(await b.lookup('sess_1'), null, 'a node that stops refreshing (died) loses its entries within the TTL');
  await a.claim('sess_3', 'cd'.repeat(32));
  await b.release('sess_3');
  t.ok(await a.lookup('sess_3'), 'only the holder releases');
  await a.release('sess_3');
  t.equal(await a.lookup('sess_3'), null);
  await a.claim('sess_4', 'ef'.repeat(32));
  await a.close();
  t.equal(await state.get(registryKey('sess_4')), null, 'a clean shutdown removes what the node held');
});

t.test('node identity: PARLEY_NODE_ID and PARLEY_NODE_URL, else the listening address', async (t) => {
  t.same(nodeIdentity({ PARLEY_NODE_ID: 'n1', PARLEY_NODE_URL: 'https://node-1.example.com/' }, '0.0.0.0', 8080), { id: 'n1', url: 'wss://node-1.example.com' });
  t.equal(nodeIdentity({}, '127.0.0.1', 9001).url, 'ws://127.0.0.1:9001');
  t.not(nodeIdentity({}, '127.0.0.1', 9001).id, nodeIdentity({}, '127.0.0.1', 9002).id, 'two nodes in one process differ');
});

const databaseUrl = process.env.DATABASE_URL;
const redisUrl = process.env.REDIS_URL;

t.test('two nodes sharing Postgres and Redis: a resume on the wrong node is sent to the owner', { skip: !(databaseUrl && redisUrl) ? 'DATABASE_URL and REDIS_URL are not both set: the two-node resume test needs a shared Postgres and Redis' : false }, async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', pacing: 'fast' });
  t.teardown(() => backend.close());
  const key = `pk_test_${randomBytes(24).toString('base64url')}`;
  const schema = randomSchema();
  const statePrefix = `test:${randomBytes(4).toString('hex')}:`;
  const log = createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
  const node = async (): Promise<Platform> => {
    const p = await startPlatform({
      env: {},
      config: { host: '127.0.0.1', port: 0, dataDir: 'memory', databaseUrl, redisUrl, bootstrapKey: key, logLevel: 'silent', startNativeBackend: false, backendAddress: backend.address, secretKey: 'a'.repeat(64) },
      dbSchema: schema,
      statePrefix,
      log,
    });
    t.teardown(() => p.close());
    return p;
  };
  const a = await node();
  const b = await node();
  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const app = {
    auth,
    async req(method: string, path: string, body?: unknown, headers: Record<string, string> = auth) {
      const res = await fetch(a.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
    },
  };
  const agent = await makeAgent(app as never, { config: { prompt: { first_message_mode: 'off' } } });
  const created = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
  t.equal(created.status, 200);
  const session = created.body;
  const urlA = session.websocket_url as string; // node A's Host: the session lives on A
  const urlB = `ws://127.0.0.1:${b.port}/v1/agent/sessions/connect`;

  // A raw client: the first connection on A, then a resume through B.
  const messages: any[] = [];
  const open = (url: string) => {
    const ws = new WebSocket(url);
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    ws.on('message', (d, bin) => { if (!bin) messages.push(JSON.parse(d.toString())); });
    ws.on('error', () => {});
    return { ws, closed };
  };
  const first = open(`${urlA}?token=${session.token}`);
  for (let i = 0; i < 200 && !messages.some((m) => m.type === 'session.started'); i++) await sleep(20);
  const hello = messages.find((m) => m.type === 'session.started');
  t.ok(hello, 'connected on A');
  first.ws.terminate();
  await first.closed;

  const wrong = open(`${urlB}?session_id=${session.session_id}&resume=not-the-secret`);
  t.equal((await wrong.closed).code, 4401, 'B refuses a wrong secret itself (it knows the hash the owner registered)');
  messages.length = 0;
  const viaB = open(`${urlB}?session_id=${session.session_id}&resume=${hello.resume}`);
  t.same(await viaB.closed, { code: 4307, reason: 'Session is live on another node' });
  t.same(messages, [{ topic: 'session', type: 'session.moved', sessionId: session.session_id, url: `ws://127.0.0.1:${a.port}/v1/agent/sessions/connect` }]);
  const unknown = open(`${urlB}?session_id=sess_000000000000000000000000&resume=x`);
  t.equal((await unknown.closed).code, 4404, 'a session no node holds');

  // The SDK follows the move: it connects on A, its socket drops, and its resume goes to B first.
  const created2 = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
  const sockets: { url: string; ws: WebSocket }[] = [];
  class Tracked extends WebSocket {
    constructor(url: string) {
      // The SDK's resumes go to the load balancer's URL; here that is node B.
      super(url.includes('resume=') && !sockets.some((s) => s.url.includes('resume=')) ? url.replace(urlA, urlB) : url);
      sockets.push({ url: (this as WebSocket).url, ws: this });
    }
  }
  const convo = await start(created2.body, { WebSocket: Tracked as never });
  let reconnected = false;
  convo.on('reconnected', () => (reconnected = true));
  sockets[0].ws.terminate();
  for (let i = 0; i < 300 && !reconnected; i++) await sleep(20);
  t.ok(reconnected, 'the SDK reconnected');
  t.same(sockets.map((s) => new URL(s.url).port), [String(a.port), String(b.port), String(a.port)], 'A, then B (moved), then A again');
  const finals: string[] = [];
  convo.on('transcript', (tr) => { if (tr.final && tr.role === 'agent') finals.push(tr.text); });
  convo.sendUserMessage('after the move', { audio: false });
  for (let i = 0; i < 300 && finals.length === 0; i++) await sleep(20);
  t.same(finals, ['You said: after the move'], 'the conversation goes on at the owner');
  await convo.hangup();
  for (let i = 0; i < 100 && (await b.state.get(registryKey(created2.body.session_id))) !== null; i++) await sleep(20);
  t.equal(await b.state.get(registryKey(created2.body.session_id)), null, 'the entry is removed when the session ends');
});
