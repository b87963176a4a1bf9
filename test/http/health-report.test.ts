// The /health report is cached and refreshed in the background; a component registered after
// a report was made must still appear in the next one.
import t from 'tap';
import { Health } from '../../src/http/ops-routes.ts';

t.test('a component registered after the first report appears in the next report', async (t) => {
  const h = new Health();
  h.register('database', async () => ({ status: 'ok' }));
  const first = await h.report();
  t.same(Object.keys(first.components), ['database']);
  h.register('inference', async () => ({ status: 'degraded', detail: 'one backend down' }));
  const second = await h.report();
  t.same(Object.keys(second.components).sort(), ['database', 'inference']);
  t.equal(second.status, 'degraded', 'the new component counts in the overall status');
});

t.test('a cached report is served at once while a slow check refreshes it', async (t) => {
  const h = new Health();
  let slow = false;
  h.register('backend', () => (slow ? new Promise(() => {}) : Promise.resolve({ status: 'ok' as const })));
  await h.report();
  slow = true;
  const again = await h.report(0);
  t.equal(again.components.backend.status, 'ok', 'the last finished report, not a wait on the hung check');
});
