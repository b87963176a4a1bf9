import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { anon, freshWindow, makeAgent } from './sessions-helpers.ts';

/**
 * 429 on public session creation, per agent and per client IP, in fixed one-minute windows of
 * the shared state: the same cases on the in-memory state and on Redis (REDIS_URL). Every request of a server comes from one client IP,
 * so the cases share that IP's window and run in order inside one window:
 * D 1 (IP 1) → A 3 + 1 refused by the agent window (IP 5) → B 3 (IP 8) → C refused by the IP window.
 */
const PER_AGENT = 3;
const PER_IP = 8;
const ORIGIN = 'https://widget.example.com';
const REDIS = process.env.REDIS_URL ?? '';

export function rateLimitSuite(kind: 'memory' | 'redis'): void {
  t.test(`on ${kind} shared state`, async (t) => {
    const app: TestServer = await startTestServer({ config: { redisUrl: kind === 'redis' ? REDIS : undefined, publicRatePerAgent: PER_AGENT, publicRatePerIp: PER_IP } });
    t.teardown(() => app.close());
    t.equal(app.state.kind, kind);
    const publicAgent = () => makeAgent(app, { public_enabled: true, allowed_origins: [ORIGIN] });
    const [a, b, c, d] = [await publicAgent(), await publicAgent(), await publicAgent(), await publicAgent()];
    const create = (agent: string, origin = ORIGIN) => anon(app, { agent_id: agent }, { Origin: origin });
    await freshWindow();

    t.test('refused requests (403) use up no window', async (t) => {
      for (let i = 0; i < PER_AGENT + 2; i++) t.equal((await create(d!, 'https://other.example.com')).status, 403);
      t.equal((await create(d!)).status, 200);
    });

    t.test('429 per agent: Too many requests with Retry-After in seconds', async (t) => {
      for (let i = 0; i < PER_AGENT; i++) t.equal((await create(a!)).status, 200, `creation ${i + 1}`);
      const r = await create(a!);
      t.equal(r.status, 429);
      t.same(r.body, { status: 429, message: 'Too many requests' });
      const retry = Number(r.headers.get('retry-after'));
      t.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${retry}`);
      t.ok(r.headers.get('access-control-expose-headers')?.includes('Retry-After'), 'browsers can read it');
      t.equal((await create(b!)).status, 200, 'another agent is not affected');
    });

    t.test('429 per IP: one client across agents, each under its own limit', async (t) => {
      t.equal((await create(b!)).status, 200);
      t.equal((await create(b!)).status, 200);
      const r = await create(c!);
      t.equal(r.status, 429, 'agent c has no creation yet: the IP window refused it');
      t.equal(r.body.message, 'Too many requests');
      const retry = Number(r.headers.get('retry-after'));
      t.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${retry}`);
    });

    t.test('API-key creations are never rate limited', async (t) => {
      for (let i = 0; i < PER_IP + 2; i++) t.equal((await app.req('POST', '/v1/agent/sessions', { agent_id: c })).status, 200);
    });
  });
}
