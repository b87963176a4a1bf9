import { defineModule } from '../modules.ts';
import { mountToolRoutes } from './routes.ts';
import { ToolService } from './service.ts';
import { mountToolTestRoutes } from './test-routes.ts';
import { ToolTestService } from './test-service.ts';

/** Workspace tools (/v1/agent/tools) and the tool test; offers the one ToolService. */
export const toolsModule = defineModule({
  name: 'tools',
  needs: ['http', 'sql', 'box', 'config'],
  start({ http, sql, box, config }) {
    const tools = new ToolService(sql, box);
    mountToolRoutes(http, tools);
    mountToolTestRoutes(http, new ToolTestService({ resolveTool: (teamId, id) => tools.resolveToolForRuntime(teamId, id), allow: config.outboundAllow }));
    return { tools };
  },
});
