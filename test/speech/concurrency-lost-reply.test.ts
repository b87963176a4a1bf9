/**
 * A slot acquisition whose reply is lost (the shared state dropped or went silent after running
 * it) answers `unavailable`, and the slot it may have taken is released once the shared state
 * answers again: it does not hold one of the team's slots for a whole lease. Found by
 * `bench/chaos.ts --fault redis-blackhole`: after a silent Redis every slot of the team stayed
 * held and nearly every synthesis request was refused 429 for the lease.
 */
import t from 'tap';
import { dependencyUnavailable } from '../../src/errors.ts';
import { SpeechConcurrency } from '../../src/speech/concurrency.ts';
import { MemoryState } from '../../src/state/memory.ts';

const memory = new MemoryState({ prefix: 'test:', now: Date.now });
let replyLost = true;
let releaseFailures = 2;
const releases: string[] = [];
// The shared state: the acquisition runs, then its reply is lost; the first releases fail too.
const state = Object.assign(Object.create(memory) as MemoryState, {
  acquireSlot: async (key: string, holder: string, limit: number, leaseMs: number) => {
    const r = await memory.acquireSlot(key, holder, limit, leaseMs);
    if (replyLost) throw dependencyUnavailable('Shared state is unavailable: try again shortly');
    return r;
  },
  releaseSlot: async (key: string, holder: string) => {
    releases.push(holder);
    if (releaseFailures-- > 0) throw dependencyUnavailable('Shared state is unavailable: try again shortly');
    return memory.releaseSlot(key, holder);
  },
});
const gate = new SpeechConcurrency({ state, override: 1, leaseMs: 60_000 });
t.teardown(() => gate.close());

t.test('a lost acquisition reply: unavailable to the caller, its slot freed once the state answers', async (t) => {
  await t.rejects(gate.acquire('team_a'), { code: 'unavailable' }, 'the caller is told unavailable');
  replyLost = false;
  let slot: Awaited<ReturnType<typeof gate.acquire>> | null = null;
  for (let i = 0; i < 100 && !slot; i++) {
    slot = await gate.acquire('team_a').catch(() => null);
    if (!slot) await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(slot, 'the only slot is free again: the lost acquisition was released');
  t.ok(releases.length >= 3, 'released again after the failed attempts');
  slot?.release();
});
