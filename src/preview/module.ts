import { pin } from '../drafts/references.ts';
import { defineModule } from '../modules.ts';
import { mountPreviewRoutes } from './routes.ts';
import { PreviewService } from './service.ts';

/** Builder preview calls (docs/api/preview.md): sessions of the draft frozen at creation. */
export const previewModule = defineModule({
  name: 'preview',
  needs: ['http', 'sql', 'sessions'],
  start({ http, sql, sessions }) {
    mountPreviewRoutes(http, new PreviewService({ sql, sessions, pin }));
  },
});
