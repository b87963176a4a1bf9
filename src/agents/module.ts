import { configHash, createDefaultDraft, patchDraft } from '../agent-config/index.ts';
import { references } from '../drafts/references.ts';
import { defineModule } from '../modules.ts';
import { mountAgentRoutes } from './routes.ts';
import { AgentService } from './service.ts';
import { AgentCache } from './cache.ts';

/** /v1/agent/agents; a new agent's draft is the defaults, patched with the creation's `config`. */
export const agentsModule = defineModule({
  name: 'agents',
  needs: ['http', 'sql', 'box', 'state', 'log'],
  async start({ http, sql, box, state, log }, onClose) {
    const agentCache = new AgentCache(state, log);
    const unsubscribe = await agentCache.start();
    onClose(unsubscribe);
    const agents = new AgentService(sql, {
      initial: async (teamId, patch) => {
        const base = createDefaultDraft();
        if (patch === undefined) return { config: base, hash: configHash(base) };
        const r = await patchDraft(base, patch, { box, resolve: references(teamId, sql) }, { at: ['config'] });
        return { config: r.draft, hash: r.hash };
      },
    }, agentCache);
    mountAgentRoutes(http, agents);
    return { agentCache };
  },
});
