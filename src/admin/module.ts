import { defineModule } from '../modules.ts';
import { mountAdminRoutes } from './routes.ts';
import { storeAdmin } from './service.ts';
import { announceAuthChange } from '../auth/keys.ts';

/** /admin/v1: the CLI's way into the embedded store this process holds (only with a claim on its folder). */
export const adminModule = defineModule({
  name: 'admin',
  needs: ['http', 'sql', 'claim', 'localHost', 'verifier', 'state'],
  start({ http, sql, claim, localHost, verifier, state }) {
    const authChanged = async () => {
      verifier.clear();
      await announceAuthChange(state);
    };
    if (claim) mountAdminRoutes(http, storeAdmin(sql, authChanged), { token: claim.token, host: localHost });
  },
});
