/**
 * Postgres restarted, as the platform sees it: a TCP proxy in front of the real server is cut
 * (every connection reset, new ones refused) and restored. Requests that need the store answer
 * `503` with `Retry-After` (never a 500), `/ready` follows the outage both ways, a live session
 * keeps talking and its record is complete once the store is back, and a webhook queued before
 * the cut is delivered after it (docs/reliability.md, "Faults"). A silent database (the proxy
 * black-holed: nothing forwarded, nothing reset) gets the same answers, bounded by
 * `dbSilenceTimeoutMs`, instead of requests that hang.
 */
import t from 'tap';
import { Writable } from 'node:stream';
import { proxyInFront } from '../fixtures/tcp-proxy.ts';
import { startTestServer } from '../helpers/server.ts';
import { createLogger } from '../../src/log.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { connect, createSession, rawSocket, sleep } from '../e2e/session-helpers.ts';
import { allowWrites, endedSession, startReceiver, waitForLog } from '../webhooks/helpers.ts';

const DATABASE_URL = process.env.DATABASE_URL;
if (!DATABASE_URL) {
  t.plan(0, 'needs DATABASE_URL: the outage is a proxy in front of a real Postgres');
  process.exit(0);
}

const { proxy, url: viaProxy } = await proxyInFront(DATABASE_URL, 5432);

// The first request to /queued fails: its retry falls in the outage (third test).
let failQueued = 1;
const receiver = await startReceiver((r, res) => {
  if (r.url !== '/queued' || failQueued-- <= 0) return false;
  res.writeHead(500).end('nope');
  return true;
});
allowWrites(t, `127.0.0.1:${receiver.port}`);

const lines: { level: number; msg: string; err?: unknown }[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l));
    cb();
  },
});
const app = await startTestServer({
  backend: 'synthetic',
  // A silence bound shorter than the default 5 s keeps the black-hole test short.
  config: { databaseUrl: viaProxy, outboundAllow: [`127.0.0.1:${receiver.port}`], webhookBackoffMs: [1500], dbSilenceTimeoutMs: 1500 },
  log: createLogger({ level: 'warn', destination: sink }),
});
t.teardown(async () => {
  await proxy.restore();
  await app.close();
  await proxy.close();
  await receiver.close();
});

/** Polls until `pred` holds; fails the test after `ms` (a bound, not a timing assertion). */
async function until(what: string, pred: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const ready = async () => (await app.req('GET', '/ready')).status;

t.test('requests that need the store answer 503 with Retry-After while it is unreachable; /ready follows', async (t) => {
  const agent = await makeAgent(app);
  t.equal(await ready(), 200);
  const before = lines.length;
  await proxy.cut();
  t.teardown(() => proxy.restore());
  // The key is cached for 2 s after its last use: wait it out so the key lookup meets the outage too.
  await sleep(2100);
  for (const [method, path, body] of [
    ['GET', `/v1/agent/agents/${agent}`],
    ['POST', '/v1/agent/sessions', { agent_id: agent }],
    ['GET', '/v1/agent/agents'],
  ] as const) {
    const r = await app.req(method, path, body);
    t.equal(r.status, 503, `${method} ${path}`);
    t.equal(r.headers.get('retry-after'), '2', 'Retry-After');
    t.match(r.body, { status: 503, message: /database is unavailable/ });
  }
  await until('/ready to say 503', async () => (await ready()) === 503);
  const body = (await app.req('GET', '/ready')).body;
  t.equal(body.components.database.status, 'down');
  t.same(lines.slice(before).filter((l) => l.level >= 50).map((l) => l.msg), [], 'no error-level log for an unreachable store');

  await proxy.restore();
  await until('/ready to say 200 again', async () => (await ready()) === 200);
  t.equal((await app.req('GET', `/v1/agent/agents/${agent}`)).status, 200, 'requests are served again');
});

t.test('a live session keeps talking through the outage; its items and end are stored once the store is back', async (t) => {
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' }, webhooks: { post_call: [{ url: `${receiver.url}/ended` }] } } });
  const session = await createSession(app, agent);
  const caller = await connect(session);
  const turn = async (text: string, n: number) => {
    caller.convo.sendUserMessage(text, { audio: false });
    await caller.waitFor(() => caller.finals('agent').length === n, 15_000, `the reply to ${text}`);
  };

  await turn('before the cut', 1);
  const later = await createSession(app, agent);
  const join = () => rawSocket(`${later.websocket_url}?token=${encodeURIComponent(later.token)}`);
  await proxy.cut();
  t.teardown(() => proxy.restore());

  await turn('during the cut', 2);

  await turn('still during the cut', 3);
  t.same(caller.finals('agent'), ['You said: before the cut', 'You said: during the cut', 'You said: still during the cut'], 'the agent answered throughout');

  const ended = await caller.convo.hangup();
  t.ok(ended, 'the caller hears the end while the store is down');
  t.equal((await app.req('GET', `/v1/agent/sessions/${session.session_id}`)).status, 503, 'the record cannot be read meanwhile');
  t.match(await join().closed, { code: 4503, reason: /database is unavailable/ }, 'a connect meanwhile is told to try again');
  await sleep(1500);

  await proxy.restore();

  let rec: any;
  await until('the record to be complete', async () => {
    const r = await app.req('GET', `/v1/agent/sessions/${session.session_id}`);
    rec = r.body;
    return r.status === 200 && rec.status !== 'active';
  });
  t.equal(rec.status, 'completed');
  t.equal(rec.ended_reason, 'user_hangup');
  const messages = rec.items.filter((i: any) => i.type === 'message').map((i: any) => [i.role, i.content]);
  t.same(messages, [
    ['user', 'before the cut'], ['assistant', 'You said: before the cut'],
    ['user', 'during the cut'], ['assistant', 'You said: during the cut'],
    ['user', 'still during the cut'], ['assistant', 'You said: still during the cut'],
  ], 'every turn, in order');
  const [row] = await app.db.sql<{ charged_micros: bigint }[]>`select charged_micros from sessions where id = ${session.session_id}`;
  t.ok(BigInt(row!.charged_micros) > 0n, 'charged');
  // Its recording ended during the cut: the tracks are settled once the store is back (found by
  // bench/chaos.ts --fault postgres: they were left unsettled, with an error log).
  let tracks: { role: string; status: string }[] = [];
  await until('the recording tracks to be settled', async () => {
    tracks = await app.db.sql<{ role: string; status: string }[]>`select role, status from session_recordings where session_id = ${session.session_id} order by role`;
    return tracks.length > 0 && tracks.every((x) => x.status !== 'active');
  }).catch(() => {});
  t.ok(tracks.length > 0, 'the recording tracks are registered');
  t.same(tracks.map((x) => x.status), tracks.map(() => 'complete'), 'every track complete');
  const retried = join();
  t.ok(await retried.started(), 'the same token connects once the store is back');
  retried.ws.close();
  const delivered = () => receiver.requests.some((r) => r.url === '/ended' && JSON.parse(r.body).event === 'call.ended' && r.body.includes(session.session_id));
  await until('call.ended of the session', async () => delivered());
  t.ok(delivered(), 'call.ended delivered');
});

t.test('a webhook queued before the cut is delivered after the store is back', async (t) => {
  const { sessionId } = await endedSession(app, [{ url: `${receiver.url}/queued` }]);
  let seen: any[] = [];
  await until('the failed first attempt to be recorded', async () => {
    seen = (await app.req('GET', `/v1/agent/sessions/${sessionId}/webhook-deliveries`)).body.deliveries;
    return seen.some((d) => d.attempts === 1 && d.status === 'pending');
  }, 10_000).catch((err) => { throw new Error(`${err.message}: ${JSON.stringify(seen)}`); });
  await proxy.cut();
  t.teardown(() => proxy.restore());
  await sleep(3000); // the retry is due meanwhile: its poll meets the outage
  t.equal(receiver.requests.filter((r) => r.url === '/queued').length, 1, 'nothing delivered while the queue is unreachable');
  await proxy.restore();
  const log = await waitForLog(app, sessionId, (d) => d[0]?.status === 'delivered');
  t.equal(log[0].attempts, 2);
  t.equal(receiver.requests.filter((r) => r.url === '/queued').length, 2, 'delivered once after the outage');
});

t.test('a silent (black-holed) database: 503 with Retry-After instead of a hang; served again after', async (t) => {
  const agent = await makeAgent(app);
  t.equal((await app.req('GET', `/v1/agent/agents/${agent}`)).status, 200);
  const before = lines.length;
  await proxy.blackhole();
  t.teardown(() => proxy.restore());
  await sleep(2100); // past the key cache, so the key lookup meets the silence too
  // A bound on each request, so a hang fails the test here rather than at tap's timeout.
  const bounded = (p: Promise<Awaited<ReturnType<typeof app.req>>>) => Promise.race([p, sleep(15_000).then(() => 'hung' as const)]);
  for (const [method, path, body] of [
    ['GET', `/v1/agent/agents/${agent}`],
    ['POST', '/v1/agent/sessions', { agent_id: agent }],
    ['GET', '/v1/agent/agents'],
  ] as const) {
    const r = await bounded(app.req(method, path, body));
    if (r === 'hung') {
      t.fail(`${method} ${path}: no answer`);
      continue;
    }
    t.equal(r.status, 503, `${method} ${path}`);
    t.equal(r.headers.get('retry-after'), '2', 'Retry-After');
    t.match(r.body, { status: 503, message: /database is unavailable/ });
  }
  await until('/ready to say 503', async () => (await ready()) === 503);
  t.same(lines.slice(before).filter((l) => l.level >= 50).map((l) => l.msg), [], 'no error-level log for a silent store');

  await proxy.restore();
  await until('/ready to say 200 again', async () => (await ready()) === 200);
  await until('requests to be served again', async () => (await app.req('GET', `/v1/agent/agents/${agent}`)).status === 200);
  t.equal((await app.req('POST', '/v1/agent/sessions', { agent_id: agent })).status, 200, 'sessions are created again');
});

t.test('many requests at once on a silent database: every one 503 with Retry-After, none queued behind the connects', async (t) => {
  // The pool's connects to a black-holed server each wait for the connect timeout (3 s) and
  // fail only the query they were opened for: a request queued behind 100 others (10
  // connections) waited 30 s. Once one connect has failed unanswered, the rest fail at once.
  const agent = await makeAgent(app);
  t.equal((await app.req('GET', `/v1/agent/agents/${agent}`)).status, 200);
  await proxy.blackhole();
  t.teardown(() => proxy.restore());
  await sleep(2100); // past the key cache
  const bounded = (p: Promise<Awaited<ReturnType<typeof app.req>>>) => Promise.race([p, sleep(15_000).then(() => 'hung' as const)]);
  // Two waves: the first meets the open connections (cut by the silence bound), the second
  // meets a pool with none open, every one of its queries waiting for a connect.
  for (const wave of [1, 2]) {
    const answers = await Promise.all(Array.from({ length: 150 }, () => bounded(app.req('GET', `/v1/agent/agents/${agent}`))));
    const seen = new Map<string, number>();
    for (const r of answers) {
      const k = r === 'hung' ? 'hung' : `${r.status} ${r.headers.get('retry-after')}`;
      seen.set(k, (seen.get(k) ?? 0) + 1);
    }
    t.same(Object.fromEntries(seen), { '503 2': 150 }, `wave ${wave}: every request 503 with Retry-After: 2`);
  }
  await proxy.restore();
  await until('requests to be served again', async () => (await app.req('GET', `/v1/agent/agents/${agent}`)).status === 200);
});
