import { defineModule } from '../modules.ts';
import { WebhookDeliveryService, WebhookWorker } from './index.ts';
import { mountWebhookRoutes } from './routes.ts';

/**
 * Post-call webhooks: the worker delivers what ending a session queued in Postgres (closing
 * hands attempts in flight back to the queue before the store closes), and the delivery log.
 */
export const webhooksModule = defineModule({
  name: 'webhooks',
  needs: ['http', 'config', 'log', 'sql', 'box'],
  start({ http, config, log, sql, box }, onClose) {
    const webhookWorker = new WebhookWorker({ sql, box, log, allow: config.outboundAllow, backoffMs: config.webhookBackoffMs });
    webhookWorker.start();
    onClose(() => webhookWorker.close());
    mountWebhookRoutes(http, new WebhookDeliveryService(sql, { maxAttempts: webhookWorker.maxAttempts }));
    return { webhookWorker };
  },
});
