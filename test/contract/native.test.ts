// The native backend (synthetic engine) passes the contract kit with the strict options.
import t from 'tap';
import { startBackend } from '../../native/server.ts';
import { runKit } from './kit.ts';

t.test('native backend passes the contract kit', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  t.teardown(() => backend.close());
  const results = await runKit(backend.address, { exactRoundTrip: true, scriptedChat: true });
  for (const r of results) t.ok(r.ok, r.name, { error: r.error });
  t.ok(results.length >= 15, 'every check ran');
});
