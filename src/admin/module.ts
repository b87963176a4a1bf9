import { defineModule } from '../modules.ts';
import { mountAdminRoutes } from './routes.ts';
import { storeAdmin } from './service.ts';

/** /admin/v1: the CLI's way into the embedded store this process holds (only with a claim on its folder). */
export const adminModule = defineModule({
  name: 'admin',
  needs: ['http', 'sql', 'claim', 'localHost'],
  start({ http, sql, claim, localHost }) {
    if (claim) mountAdminRoutes(http, storeAdmin(sql), { token: claim.token, host: localHost });
  },
});
