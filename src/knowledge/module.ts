import { defineModule } from '../modules.ts';
import { mountKnowledgeRoutes } from './routes.ts';
import { KnowledgeService } from './service.ts';

/** Knowledge sources (/v1/agent/knowledge-sources). */
export const knowledgeModule = defineModule({
  name: 'knowledge',
  needs: ['http', 'sql'],
  start({ http, sql }) {
    mountKnowledgeRoutes(http, new KnowledgeService(sql));
  },
});
