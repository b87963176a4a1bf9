import { defineModule } from '../modules.ts';
import { createSharedState } from './index.ts';

/** The shared state: Redis across nodes, or in memory for one node. */
export const stateModule = (prefix?: string) => defineModule({
  name: 'shared-state',
  needs: ['config', 'log', 'health'],
  async start({ config, log, health }, onClose) {
    const state = await createSharedState({ redisUrl: config.redisUrl, prefix, logger: log, commandTimeoutMs: config.redisCommandTimeoutMs });
    onClose(() => state.close());
    health.register('shared_state', async () => (await state.ping(), { status: 'ok', detail: state.kind }));
    return { state };
  },
});
