/** Post-call webhooks: signing, the durable delivery worker, the delivery log. */
export { SIGNATURE_HEADER, signatureHeader, verifySignature } from './sign.ts';
export { WebhookWorker, type WebhookWorkerOptions } from './worker.ts';
export { WebhookDeliveryService, toDelivery, webhookDelivery, webhookDeliveryList, type WebhookDelivery } from './deliveries.ts';

/** Read with the rest of the configuration (src/config.ts). */
export { parseBackoff } from '../config.ts';
