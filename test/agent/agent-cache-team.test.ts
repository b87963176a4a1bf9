// The agent cache answers only the caller's team, from memory, from the store, and when its
// Redis barrier fails and it reads the store directly (src/agents/cache.ts, D-API-5).
import t from 'tap';
import { AgentCache } from '../../src/agents/cache.ts';
import type { SharedState } from '../../src/state/types.ts';

/** Shared state as the cache sees it: a Redis-kind state whose barrier answers or fails. */
function state(syncFails: boolean): SharedState {
  return { kind: 'redis', sync: async () => { if (syncFails) throw new Error('Redis is down'); } } as unknown as SharedState;
}
const row = { team_id: 'team-a', id: 'agent-1' };

t.test('barrier up: the owner reads its agent, another team gets nothing, from the store or memory', async (t) => {
  const cache = new AgentCache(state(false));
  const load = async () => row;
  t.same(await cache.readForCreation('team-b', 'agent-1', load), undefined, 'another team, from the store');
  t.same(await cache.readForCreation('team-a', 'agent-1', load), row, 'the owner, from memory');
  t.same(await cache.readForCreation('team-b', 'agent-1', load), undefined, 'another team, from memory');
  t.same(await cache.readForCreation(undefined, 'agent-1', load), row, 'a keyless read of any team');
});

t.test('barrier down: the store is read directly, still only for the owner', async (t) => {
  const cache = new AgentCache(state(true));
  const load = async () => row;
  t.same(await cache.readForCreation('team-b', 'agent-1', load), undefined, "another team's agent is not found");
  t.same(await cache.readForCreation('team-a', 'agent-1', load), row);
  t.same(await cache.read('team-b', 'agent-1', load as never), undefined, 'the config read likewise');
});
