import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { randomSchema } from '../../src/platform.ts';
import { allowWrites, endedSession, startDurablePlatform, startReceiver, testKey, waitForLog } from './helpers.ts';

t.test('deliveries survive a restart of the node: one between attempts, one cut off mid-attempt', async (t) => {
  const failing = await startReceiver();
  failing.script.push(500); // the first attempt fails; the retry is due long after the node stops
  let hung = 0;
  const slow = await startReceiver((_r, _res) => hung++ === 0); // never answers the first request
  const allow = [`127.0.0.1:${failing.port}`, `127.0.0.1:${slow.port}`];
  allowWrites(t, ...allow);
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-webhooks-'));
  const opts = { dataDir, schema: randomSchema(), key: testKey(), allow, env: { PARLEY_WEBHOOK_BACKOFF_MS: '10000' } };
  t.teardown(async () => {
    await failing.close();
    await slow.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const first = await startDurablePlatform(opts);
  let sessionId: string;
  try {
    ({ sessionId } = await endedSession(first, [{ url: `${failing.url}/a`, secret: 'kept across restarts' }, { url: `${slow.url}/b` }]));
    await waitForLog(first, sessionId, (d) => d[0]?.status === 'pending' && d[0].attempts === 1);
    await slow.waitFor(1);
  } finally {
    await first.close(); // mid-retry for endpoint 0, mid-attempt for endpoint 1
  }
  t.equal(failing.requests.length, 1, 'one failed attempt before the stop');

  const second = await startDurablePlatform(opts);
  t.teardown(() => second.close());
  const log = await waitForLog(second, sessionId, (d) => d.length === 4 && d.every((x) => x.status === 'delivered'));
  t.same(log.map((d) => [d.endpoint_index, d.event, d.attempts]), [
    [0, 'call.ended', 2],
    [0, 'call.analyzed', 1],
    [1, 'call.ended', 1], // the attempt cut off by the stop was handed back, not counted
    [1, 'call.analyzed', 1],
  ]);
  const got = await failing.waitFor(3);
  t.same(got.map((r) => JSON.parse(r.body).event), ['call.ended', 'call.ended', 'call.analyzed']);
  t.equal(got[1]!.body, got[0]!.body, 'the retry after the restart sends the same bytes');
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(got[1]!.headers['x-service-webhook-signature']));
  t.ok(m, 'signed after the restart');
  t.equal(createHmac('sha256', 'kept across restarts').update(`${m![1]}.${got[1]!.body}`).digest('hex'), m![2], 'with the same secret');
  const b = await slow.waitFor(3);
  t.same(b.map((r) => JSON.parse(r.body).event), ['call.ended', 'call.ended', 'call.analyzed'], 'at least once: the cut-off attempt is sent again');
});
