/** Post-call webhooks: signing, the durable delivery worker, the delivery log. */
export { SIGNATURE_HEADER, signatureHeader, verifySignature } from './sign.ts';
export { WebhookWorker, type WebhookWorkerOptions } from './worker.ts';
export { WebhookDeliveryService, toDelivery, webhookDelivery, webhookDeliveryList, type WebhookDelivery } from './deliveries.ts';

/**
 * `PARLEY_WEBHOOK_BACKOFF_MS`: comma-separated delays between attempts (default `1000,5000`,
 * docs/api/webhooks.md). Meant for tests and drills; an invalid value throws at start-up.
 */
export function parseBackoff(env: string | undefined, name = 'PARLEY_WEBHOOK_BACKOFF_MS'): number[] | undefined {
  if (env === undefined || env.trim() === '') return undefined;
  const list = env.split(',').map((s) => Number(s.trim()));
  if (list.some((n) => !Number.isFinite(n) || n < 0)) throw new Error(`${name} must be comma-separated non-negative milliseconds`);
  return list;
}
