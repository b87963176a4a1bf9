// Several Parleys on one host (README "Two commands"): each `npm start` launches its own native
// backend on a free loopback port unless BACKEND_ADDRESS names one; a named address that is
// taken fails, naming the address and the variable.
import { createServer } from 'node:net';
import t from 'tap';
import { serve, serveFailing, untilReady, type Served } from '../helpers/process.ts';

const env = (i: number) => ({ PARLEY_DATA_DIR: 'memory', PARLEY_BOOTSTRAP_KEY: `pk_test_instance_${i}_0123456789abcdefghijklmnop`, PARLEY_SPEECH_ENGINE: 'synthetic' });

async function speaks(s: Served, i: number): Promise<{ status: number; riff: string }> {
  const r = await fetch(`${s.url}/v1/tts`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${env(i).PARLEY_BOOTSTRAP_KEY}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ text: `instance ${i}`, format: 'wav' }),
  });
  return { status: r.status, riff: Buffer.from(await r.arrayBuffer()).subarray(0, 4).toString() };
}

t.test('two, then three instances side by side: each ready, each synthesizes with its own backend', async (t) => {
  const servers: Served[] = [];
  for (const i of [0, 1, 2]) {
    servers.push(await serve(t, env(i)));
    await untilReady(servers[i]!.url);
    for (const [j, s] of servers.entries()) t.same(await speaks(s, j), { status: 200, riff: 'RIFF' }, `instance ${j} of ${servers.length} synthesizes`);
  }
  const backends = await Promise.all(servers.map(async (s) => (await (await fetch(`${s.url}/health`)).json()).components.native_backend.detail as string));
  t.equal(new Set(backends.map((d) => d.split(',')[0])).size, 3, `three backend addresses: ${backends.join(' | ')}`);
  for (const s of servers) t.equal(await s.stop(), 0);
});

t.test('an explicit BACKEND_ADDRESS that is taken: the error names it and the variable', async (t) => {
  const holder = createServer();
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => holder.close(() => r())));
  const address = `127.0.0.1:${(holder.address() as { port: number }).port}`;
  const r = await serveFailing({ ...env(3), BACKEND_ADDRESS: address });
  t.not(r.code, 0, 'the platform does not start');
  t.match(r.output, `BACKEND_ADDRESS ${address} is already in use`);
  t.match(r.output, /leave it unset and Parley picks a free port/);
});
