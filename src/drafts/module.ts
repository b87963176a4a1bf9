import { defineModule } from '../modules.ts';
import { pin, references } from './references.ts';
import { mountDraftRoutes } from './routes.ts';
import { DraftService } from './service.ts';

/** The draft config, publish and versions of an agent. */
export const draftsModule = defineModule({
  name: 'drafts',
  needs: ['http', 'sql', 'box', 'agentCache'],
  start({ http, sql, box, agentCache }) {
    mountDraftRoutes(http, new DraftService(sql, box, references, pin, agentCache));
  },
});
