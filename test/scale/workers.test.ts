/**
 * Several event loops behind one port (`PARLEY_WORKERS`, docs/decisions.md D-SCALE-2): `parley
 * serve` with two workers on Postgres and Redis serves HTTP and sessions from both on its one
 * port, a resume that lands on the worker not holding its session goes on through that worker
 * (relayed), `/metrics` sums the workers, and SIGTERM drains every worker. The embedded
 * defaults run one worker, and `/health` says so.
 */
import t from 'tap';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { realClock } from '../../actors/clock.ts';
import { Supervisor } from '../../actors/supervisor.ts';
import { workerCount } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';
import { startPlatform } from '../../src/platform.ts';
import { openDatabase } from '../../src/store/db.ts';
import { sleep } from '../e2e/session-helpers.ts';
import { caller } from './helpers.ts';
import { serve, serveFailing } from '../helpers/process.ts';

const databaseUrl = process.env.DATABASE_URL;
const redisUrl = process.env.REDIS_URL;

t.test('PARLEY_WORKERS: the default and its limits', async (t) => {
  const pg = { databaseUrl: 'postgres://x', redisUrl: 'redis://x' };
  t.equal(workerCount({}, { nativeBackend: true, cores: 8 }).count, 1, 'the embedded defaults run one worker');
  t.match(workerCount({}, { databaseUrl: 'postgres://x', nativeBackend: true, cores: 8 }).reason, /one thread/, 'Postgres without Redis too: the in-memory state lives in one thread');
  t.same(workerCount({}, { ...pg, nativeBackend: true, cores: 8 }), { count: 6, reason: '8 cores, 2 left to the native backend' });
  t.equal(workerCount({}, { ...pg, nativeBackend: true, cores: 2 }).count, 1, 'on two cores the native backend keeps one');
  t.equal(workerCount({}, { ...pg, nativeBackend: false, cores: 8 }).count, 8, 'no native backend launched: every core');
  t.equal(workerCount({ PARLEY_WORKERS: '1' }, { ...pg, nativeBackend: true, cores: 8 }).count, 1);
  t.equal(workerCount({ PARLEY_WORKERS: '3' }, { ...pg, nativeBackend: true, cores: 2 }).count, 3, 'an explicit value is kept');
  t.throws(() => workerCount({ PARLEY_WORKERS: '2' }, { nativeBackend: true }), /needs DATABASE_URL and REDIS_URL/);
  t.throws(() => workerCount({ PARLEY_WORKERS: 'many' }, { ...pg, nativeBackend: true }), /positive integer/);
});

t.test('the session cap is the node\'s: workers share one count', async (t) => {
  const shared = new Int32Array(new SharedArrayBuffer(4));
  const a = new Supervisor({ maxSessions: 2, clock: realClock, shared });
  const b = new Supervisor({ maxSessions: 2, clock: realClock, shared });
  const r1 = a.reserve();
  const r2 = b.reserve();
  t.ok(r1 && r2, 'two places, one on each worker');
  t.notOk(a.hasCapacity(), 'the node is full for every worker');
  t.equal(b.reserve(), null);
  r1!();
  r1!();
  t.equal(Atomics.load(shared, 0), 1, 'a release gives back one place, once');
  t.ok(b.reserve(), 'the place given back on one worker is taken on the other');
});

t.test('the embedded defaults: /health says one worker', async (t) => {
  const p = await startPlatform({ env: {}, config: { host: '127.0.0.1', port: 0, dataDir: 'memory', startNativeBackend: false, logLevel: 'silent' }, log: createLogger({ level: 'silent' }) });
  t.teardown(() => p.close());
  const health = await (await fetch(`${p.url}/health`)).json();
  t.equal(health.components.workers.status, 'ok');
  t.match(health.components.workers.detail, /^1 worker \(.*one thread\)$/);
});

t.test('PARLEY_WORKERS=2 with the embedded store is refused at start', async (t) => {
  const r = await serveFailing({ PARLEY_WORKERS: '2', PARLEY_DATA_DIR: 'memory', PARLEY_NATIVE_BACKEND: 'false' });
  t.equal(r.code, 1);
  t.match(r.output, /PARLEY_WORKERS=2 needs DATABASE_URL and REDIS_URL/);
});

/** One GET on a connection of its own (the kernel picks the worker per connection). */
function getFresh(url: string): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    http.get(url, { agent: false, headers: { Connection: 'close' } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: text.startsWith('{') ? JSON.parse(text) : text }));
    }).on('error', reject);
  });
}

/** A metric's samples from the exposition text: `name{labels} value`. */
function samples(text: string, name: string): { labels: string; value: number }[] {
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `)).map((l) => {
    const i = l.lastIndexOf(' ');
    return { labels: l.slice(name.length, i), value: Number(l.slice(i + 1)) };
  });
}
const total = (text: string, name: string) => samples(text, name).reduce((a, s) => a + s.value, 0);

t.test('two workers on one port: HTTP and sessions on both, a resume across workers, /metrics summed, SIGTERM drains both', { skip: !(databaseUrl && redisUrl) ? 'DATABASE_URL and REDIS_URL are not both set: several workers need a shared Postgres and Redis' : false }, async (t) => {
  const key = `pk_test_${randomBytes(24).toString('base64url')}`;
  const node = await serve(t, {
    DATABASE_URL: databaseUrl!, REDIS_URL: redisUrl!, PARLEY_WORKERS: '2', PARLEY_BOOTSTRAP_KEY: key,
    PARLEY_SPEECH_ENGINE: 'synthetic', PARLEY_SYNTHETIC_PACING: 'fast', PARLEY_SECRET_KEY: 'c'.repeat(64), PARLEY_DATA_DIR: 'memory',
  });
  const url = node.url;
  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const req = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(url + path, { method, headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  };

  // HTTP: connections spread over both workers; each says which one answered.
  const answered = new Set<string>();
  for (let i = 0; i < 100 && answered.size < 2; i++) {
    const h = await getFresh(`${url}/health`);
    t.equal(h.status, 200);
    answered.add(/from worker (\d+)/.exec(h.body.components.workers.detail)?.[1] ?? '?');
  }
  t.same([...answered].sort(), ['0', '1'], 'both workers answered HTTP on the one port');
  const health = await getFresh(`${url}/health`);
  t.equal(health.body.components.native_backend?.status, 'ok', 'the native backend the main thread launched is reported by every worker');

  const created = await req('POST', '/v1/agent/agents', { name: 'Workers', config: { prompt: { first_message_mode: 'off' } } });
  t.equal(created.status, 201);
  const agent = created.body.agent_id as string;
  t.equal((await req('POST', `/v1/agent/agents/${agent}/publish`)).status, 200);

  // Sessions: each socket is a connection of its own, so they land on both workers.
  const calls: { id: string; c: ReturnType<typeof caller> }[] = [];
  let perWorker: number[] = [];
  for (let i = 0; i < 16; i++) {
    const s = await req('POST', '/v1/agent/sessions', { agent_id: agent });
    t.equal(s.status, 200);
    const c = caller(`${s.body.websocket_url}?token=${s.body.token}`);
    t.ok(await c.waitFor((m) => m.type === 'session.started'), 'the session started');
    calls.push({ id: s.body.session_id, c });
    const m = await (await fetch(`${url}/metrics`)).text();
    perWorker = samples(m, 'parley_worker_sessions_live').map((x) => x.value);
    if (calls.length >= 2 && perWorker.length === 2 && perWorker.every((n) => n > 0)) break;
  }
  t.equal(perWorker.length, 2, '/metrics has each worker');
  t.equal(samples(await (await fetch(`${url}/metrics`)).text(), 'parley_worker_event_loop_busy_seconds_total').length, 2, 'and each worker\'s busy time');
  t.ok(perWorker.every((n) => n > 0), `sessions live on both workers (${perWorker.join(' and ')})`);
  for (const { c } of calls) {
    c.say('hello');
    t.ok(await c.waitFor((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final), 'the agent answered');
  }
  const metrics = await (await fetch(`${url}/metrics`)).text();
  t.equal(total(metrics, 'parley_sessions_live'), calls.length, '/metrics sums the live sessions of both workers');
  t.equal(total(metrics, 'parley_worker_sessions_live'), calls.length, 'and splits them by worker');
  t.ok(total(metrics, 'parley_session_turns_total') >= calls.length, 'turns of both workers are counted');
  // Each worker's own heap (the process's parley_nodejs_* metrics are worker 0's).
  const used = samples(metrics, 'parley_worker_heap_used_bytes').map((s) => s.value);
  const size = samples(metrics, 'parley_worker_heap_size_bytes').map((s) => s.value);
  t.equal(used.length, 2, 'each worker\'s heap in use');
  t.ok(used.every((u, i) => u > 1_000_000 && u <= size[i]!), `a live heap within the reserved one on each worker (${used.join(', ')} of ${size.join(', ')} bytes)`);
  // Each worker's send backlog (its own connections to the backend): one series per shared call,
  // the node's longest wait (docs/inference.md, "Send backlog").
  const backlog = samples(metrics, 'parley_inference_send_backlog_seconds');
  t.same(backlog.map((s) => s.labels).sort(), ['{call="recognition"}', '{call="synthesis"}'], 'the send backlog\'s wait: one series per shared call for the node');
  t.ok(backlog.every((s) => s.value >= 0 && s.value < 60), `each a wait in seconds (${backlog.map((s) => s.value).join(', ')})`);

  // A resume: the socket drops and the client reconnects to the same address; the kernel may
  // put it on either worker. Until one lands on the worker not holding the session.
  const first = calls[0]!;
  const hello = first.c.messages.find((m) => m.type === 'session.started');
  let current = first.c;
  const relays = async () => total(await (await fetch(`${url}/metrics`)).text(), 'parley_session_relays_total');
  const before = await relays();
  let relayed = false;
  for (let i = 0; i < 30 && !relayed; i++) {
    current.ws.terminate();
    await current.closed;
    current = caller(`${url.replace('http', 'ws')}/v1/agent/sessions/connect?session_id=${first.id}&resume=${hello.resume}`);
    const started = await current.waitFor((m) => m.type === 'session.started' || m.type === 'session.moved');
    t.equal(started?.type, 'session.started', 'the resume reached the session (no move: one address)');
    t.equal(started?.resumed, true);
    relayed = (await relays()) > before;
  }
  t.ok(relayed, 'a resume landed on the worker not holding the session and was relayed');
  current.say('after the relay');
  t.ok(await current.waitFor((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final && m.text.includes('after the relay')), 'the conversation goes on through the other worker');
  calls[0] = { id: first.id, c: current };

  // The port is the node's: a second Parley given it fails to start.
  const second = await serveFailing({ PORT: String(node.port), PARLEY_DATA_DIR: 'memory', PARLEY_NATIVE_BACKEND: 'false' });
  t.equal(second.code, 1, 'a second Parley on the same port fails');
  t.match(second.output, /could not listen/);

  // SIGTERM: every worker drains as a single loop does: each client gets `session.ended` with
  // reason `shutdown`, then close 1000 `shutdown`, the relayed one included (its session's
  // worker sends them through the worker holding its socket), and every session is recorded
  // as ended for shutdown.
  t.equal(await node.stop(), 0, 'the node exits 0');
  for (const { id, c } of calls) {
    const closed = await c.closed;
    t.same(closed, { code: 1000, reason: 'shutdown' }, `session ${id}: the socket closed 1000 shutdown`);
    t.same(c.messages.filter((m) => m.type === 'session.ended').map((m) => m.reason), ['shutdown'], `session ${id}: session.ended shutdown before the close`);
  }
  const db = await openDatabase({ databaseUrl, dataDir: 'memory' });
  t.teardown(() => db.close());
  const rows = await db.sql<{ id: string; status: string; ended_reason: string }[]>`select id, status, ended_reason from sessions where id in ${db.sql(calls.map((c) => c.id))}`;
  t.equal(rows.length, calls.length);
  for (const r of rows) t.same({ status: r.status, reason: r.ended_reason }, { status: 'completed', reason: 'shutdown' }, `session ${r.id} recorded as ended by the drain`);
});
