import { defineModule } from '../modules.ts';
import { mountWalletRoutes } from './routes.ts';
import { WalletService } from './service.ts';

/** The wallet the official speech clients' `user` calls read. */
export const walletModule = defineModule({
  name: 'wallet',
  needs: ['http', 'sql'],
  start({ http, sql }) {
    mountWalletRoutes(http, new WalletService(sql));
  },
});
