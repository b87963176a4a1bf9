import { defineModule } from '../modules.ts';
import { mountAgentTestRoutes } from './routes.ts';
import { AgentTestService } from './service.ts';

/** Agent tests: text-only runs of an agent against a scripted user, judged by criteria. */
export const agentTestsModule = defineModule({
  name: 'agent-tests',
  needs: ['http', 'config', 'log', 'sql', 'box', 'inference'],
  start({ http, config, log, sql, box, inference }) {
    mountAgentTestRoutes(http, new AgentTestService({ sql, inference, box, log, allow: config.outboundAllow }));
  },
});
