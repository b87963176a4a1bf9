import type { HttpApp } from '../http/app.ts';
import { errorBody } from '../http/openapi.ts';
import { widgetConfig, type WidgetConfigService } from './service.ts';

/** GET /v1/agent/agents/{agent_id}/widget: the embeddable widget's display config (no key). */
export function mountWidgetConfigRoutes(http: HttpApp, widget: WidgetConfigService): void {
  http.route({
    method: 'GET', path: '/v1/agent/agents/{agent_id}/widget', auth: 'none',
    doc: {
      summary: 'Display config for the embeddable <parley-agent> widget: public agents only, same Origin gate as keyless session creation; attributes on the embed tag override every field',
      tags: ['Agents'],
      responses: {
        200: { description: 'Display fields (only ever added to)', schema: widgetConfig },
        403: { description: 'Agent is not public; Origin header is required for public agents; Origin not allowed', schema: errorBody },
        404: { description: 'Unknown agent', schema: errorBody },
      },
    },
    handler: async (ctx) => ({ status: 200, body: await widget.get(ctx.params.agent_id!, ctx.headers.origin) }),
  });
}
