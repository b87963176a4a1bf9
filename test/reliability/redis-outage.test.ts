/**
 * Redis restarted, as the platform sees it: a TCP proxy in front of the real server is cut and
 * restored. Meanwhile what needs shared state answers `503` with `Retry-After`; afterwards it
 * works again. Tokens live only in Redis: a restart without persistence forgets them (a token
 * issued before is refused after, a new one works), and a token brought back by a restart from
 * an older snapshot is still refused once used (the store's record says the session started).
 * A silent Redis (the proxy black-holed: nothing forwarded, nothing reset) gets the same `503`
 * within `redisCommandTimeoutMs` instead of requests that hang.
 */
import t from 'tap';
import { Redis } from 'ioredis';
import { proxyInFront } from '../fixtures/tcp-proxy.ts';
import { startTestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { createSession, rawSocket } from '../e2e/session-helpers.ts';
import { sessionTokenKey } from '../../src/sessions/service.ts';
import { createSharedState } from '../../src/state/index.ts';

const REDIS_URL = process.env.REDIS_URL;
if (!REDIS_URL) {
  t.plan(0, 'needs REDIS_URL: the outage is a proxy in front of a real Redis');
  process.exit(0);
}

const { proxy, url: viaProxy } = await proxyInFront(REDIS_URL, 6379);
// A command bound shorter than the default 2 s keeps the black-hole test short.
const app = await startTestServer({ backend: 'synthetic', config: { redisUrl: viaProxy, redisCommandTimeoutMs: 1000 } });
const direct = new Redis(REDIS_URL);
t.teardown(async () => {
  await proxy.restore();
  await app.close();
  await proxy.close();
  direct.disconnect();
});

const join = (s: { websocket_url: string; token: string }) => rawSocket(`${s.websocket_url}?token=${encodeURIComponent(s.token)}`);

t.test('a Redis restart: 503 meanwhile, tokens forgotten or spent stay refused, new ones work', async (t) => {
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const unused = await createSession(app, agent);
  const used = await createSession(app, agent);
  const first = join(used);
  t.ok(await first.started(), 'the used token connected');

  await proxy.cut();
  t.teardown(() => proxy.restore());
  const r = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
  t.equal(r.status, 503, 'session creation needs the token store');
  t.equal(r.headers.get('retry-after'), '2');
  t.match(r.body.message, /unavailable/);
  const tts = await app.req('POST', '/v1/tts', { text: 'hello' });
  t.equal(tts.status, 503, 'synthesis needs shared state (its concurrency slots)');
  t.equal(tts.headers.get('retry-after'), '2');
  t.match(await join(unused).closed, { code: 4503, reason: /Shared state is unavailable/ }, 'a connect meanwhile is told to try again (not 4500)');

  // A restart without persistence forgets every key; one from an older snapshot brings back the spent token.
  const keys = await direct.keys(`${app.state.prefix}*`);
  if (keys.length) await direct.del(...keys);
  await direct.set(`${app.state.prefix}v:${sessionTokenKey(used.token)}`, used.session_id, 'PX', 60_000);
  await proxy.restore();

  const created = await createOnceBack(agent);
  t.equal(created.status, 200, 'session creation works again');

  const forgotten = join(unused);
  t.match(await forgotten.closed, { code: 4401 }, 'a token issued before the restart is refused after it');
  const again = join(used);
  t.match(await again.closed, { code: 4401 }, 'a spent token brought back by the restart is refused: never used twice');
  const fresh = join(created.body);
  t.ok(await fresh.started(), 'a new token works');
  fresh.ws.close();
  first.ws.close();
});

t.test('a silent (black-holed) Redis: 503 with Retry-After instead of a hang; served again after', async (t) => {
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  t.equal((await app.req('POST', '/v1/agent/sessions', { agent_id: agent })).status, 200);
  await proxy.blackhole();
  t.teardown(() => proxy.restore());
  // A bound on each request, so a hang fails the test here rather than at tap's timeout.
  const bounded = (p: Promise<Awaited<ReturnType<typeof app.req>>>) =>
    Promise.race([p, new Promise<'hung'>((res) => setTimeout(() => res('hung'), 15_000))]);
  for (const [path, body, what] of [
    ['/v1/agent/sessions', { agent_id: agent }, 'session creation (the token store)'],
    ['/v1/tts', { text: 'hello' }, 'synthesis (its concurrency slots)'],
    ['/v1/agent/sessions', { agent_id: agent }, 'session creation again, while reconnecting'],
  ] as const) {
    const r = await bounded(app.req('POST', path, body));
    if (r === 'hung') {
      t.fail(`${what}: no answer`);
      continue;
    }
    t.equal(r.status, 503, what);
    t.equal(r.headers.get('retry-after'), '2', 'Retry-After');
    t.match(r.body.message, /unavailable/);
  }
  await proxy.restore();
  const created = await createOnceBack(agent);
  t.equal(created.status, 200, 'session creation works again');
  const fresh = join(created.body);
  t.ok(await fresh.started(), 'its token connects');
  fresh.ws.close();
  t.equal((await app.req('POST', '/v1/tts', { text: 'hello' })).status, 200, 'synthesis works again');
});

// Found by `bench/chaos.ts --fault redis`: ioredis sent again, after reconnecting, commands whose
// callers had timed out; under load every speech slot of the team stayed held for its lease
// (nearly every synthesis request refused 429 after the outage).
t.test('a command its caller was told failed (timed out) is not run once Redis answers again', async (t) => {
  const prefix = `outage_${Date.now()}:`;
  const state = await createSharedState({ redisUrl: viaProxy, prefix, commandTimeoutMs: 1500 });
  t.teardown(() => state.close());
  t.ok((await state.acquireSlot('slots', 'before', 2, 60_000)).acquired, 'a slot acquired before');
  await proxy.blackhole();
  t.teardown(() => proxy.restore());
  // In flight on the silent connection, then queued while it reconnects: each fails (503).
  await t.rejects(state.acquireSlot('slots', 'in-flight', 2, 60_000), { code: 'unavailable' });
  await t.rejects(state.set('queued', 'x', 60_000), { code: 'unavailable' });
  await t.rejects(state.acquireSlot('slots', 'queued', 2, 60_000), { code: 'unavailable' });
  await proxy.restore();
  for (let i = 0; i < 100; i++) {
    if (await state.ping().then(() => true, () => false)) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  await state.ping();
  t.same(await direct.zrange(`${prefix}s:slots`, '0', '-1'), ['before'], 'the failed acquisitions hold no slot');
  t.equal(await direct.get(`${prefix}v:queued`), null, 'the failed write was not made');
  t.ok((await state.acquireSlot('slots', 'after', 2, 60_000)).acquired, 'the second slot is free');
});

/** Creates a session, asking again every 100 ms (up to 10 s) while the answer is `503`. */
async function createOnceBack(agent: string) {
  let created = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
  for (let i = 0; i < 100 && created.status === 503; i++) {
    await new Promise((res) => setTimeout(res, 100));
    created = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
  }
  return created;
}
