import { defineModule } from '../modules.ts';
import { mountWidgetConfigRoutes } from './routes.ts';
import { WidgetConfigService } from './service.ts';

/** The embeddable widget's display config, behind the keyless gate (docs/widget.md). */
export const widgetConfigModule = defineModule({
  name: 'widget-config',
  needs: ['http', 'sql'],
  start({ http, sql }) {
    mountWidgetConfigRoutes(http, new WidgetConfigService(sql));
  },
});
