import { defineModule } from '../modules.ts';
import { mountUsageRoutes } from './routes.ts';
import { UsageService } from './service.ts';

/** The team, its usage by day and kind, and its credit ledger (the console's Usage page). */
export const usageModule = defineModule({
  name: 'usage',
  needs: ['http', 'sql'],
  start({ http, sql }) {
    mountUsageRoutes(http, new UsageService(sql));
  },
});
