import { createServer } from 'node:net';
import t from 'tap';
import { createSharedState, DEFAULT_PREFIX } from '../../src/state/index.ts';

t.test('without a Redis URL the in-memory implementation is used', async (t) => {
  const state = await createSharedState();
  t.teardown(() => state.close());
  t.equal(state.kind, 'memory');
  t.equal(state.prefix, DEFAULT_PREFIX);
});

t.test('an unreachable Redis fails at creation with unavailable and leaves nothing open', async (t) => {
  // A port that was just free: nothing listens there.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));

  const before = process.getActiveResourcesInfo().length;
  await t.rejects(createSharedState({ redisUrl: `redis://127.0.0.1:${port}` }), {
    name: 'ServiceError',
    code: 'unavailable',
    message: 'Redis is unreachable',
  });
  t.ok(process.getActiveResourcesInfo().length <= before, 'no handles left open');
});
