import type { HttpApp } from '../http/app.ts';
import { webhookDelivery, webhookDeliveryList, type WebhookDeliveryService } from './deliveries.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';


/** The post-call webhook delivery log of a session, and redelivery (issue 8; D-HOOK-1). */
export function mountWebhookRoutes(http: HttpApp, deliveries: WebhookDeliveryService): void {
  const tags = ['Webhooks'];
  http.route({
    method: 'GET', path: '/v1/agent/sessions/{session_id}/webhook-deliveries', auth: 'required',
    doc: {
      summary: 'Post-call webhook deliveries of a session: one entry per endpoint and event',
      tags,
      responses: { 200: { description: 'The delivery log', schema: webhookDeliveryList }, 404: { description: 'Missing or another team\'s session', schema: errorBody } },
    },
    handler: async (ctx) => ({ status: 200, body: await deliveries.list(who(ctx), ctx.params.session_id!) }),
  });
  http.route({
    method: 'POST', path: '/v1/agent/sessions/{session_id}/webhook-deliveries/{delivery_id}/redeliver', auth: 'required',
    doc: {
      summary: 'Queue a delivery again (same body, new signature, a fresh budget of attempts)',
      tags,
      responses: {
        202: { description: 'Queued; due now', schema: webhookDelivery },
        404: { description: 'Missing session or delivery', schema: errorBody },
        409: { description: 'An attempt is in flight', schema: errorBody },
      },
    },
    handler: async (ctx) => ({ status: 202, body: await deliveries.redeliver(who(ctx), ctx.params.session_id!, ctx.params.delivery_id!) }),
  });
}
