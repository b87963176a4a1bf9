// The old generation's growth between full collections (PARLEY_HEAP_GROWTH_PERCENT): V8's own
// heuristic kept a talking node's heap within ~8 MB of its live size and collected it every
// 0.5–0.9 s at 300 sessions, a third of the node's CPU (bench/README.md, twelfth pass).
import t from 'tap';
import { HEAP_GROWTH_DEFAULT, loadConfig } from '../../src/config.ts';

t.test('PARLEY_HEAP_GROWTH_PERCENT: a default above V8\'s own, 0 for V8\'s heuristic, bad values refused at start', async (t) => {
  t.equal(loadConfig({}).heapGrowthPercent, HEAP_GROWTH_DEFAULT);
  t.ok(HEAP_GROWTH_DEFAULT > 10, 'more than V8\'s smallest step (10 %), which it chose under load');
  t.equal(loadConfig({ PARLEY_HEAP_GROWTH_PERCENT: '0' }).heapGrowthPercent, 0);
  t.equal(loadConfig({ PARLEY_HEAP_GROWTH_PERCENT: '100' }).heapGrowthPercent, 100);
  t.throws(() => loadConfig({ PARLEY_HEAP_GROWTH_PERCENT: '-5' }), /PARLEY_HEAP_GROWTH_PERCENT/);
  t.throws(() => loadConfig({ PARLEY_HEAP_GROWTH_PERCENT: '12.5' }), /PARLEY_HEAP_GROWTH_PERCENT/);
  t.throws(() => loadConfig({ PARLEY_HEAP_GROWTH_PERCENT: 'lots' }), /PARLEY_HEAP_GROWTH_PERCENT/);
});
