import { defineModule } from '../modules.ts';
import { pin, references } from './references.ts';
import { mountDraftRoutes } from './routes.ts';
import { DraftService } from './service.ts';

/** The draft config, publish and versions of an agent. */
export const draftsModule = defineModule({
  name: 'drafts',
  needs: ['http', 'sql', 'box'],
  start({ http, sql, box }) {
    mountDraftRoutes(http, new DraftService(sql, box, references, pin));
  },
});
