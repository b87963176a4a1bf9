import { z } from 'zod';
import { ServiceError, notFound } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import type { Sql } from '../store/db.ts';
import { getSession } from '../sessions/store.ts';
import { listSessionDeliveries, redeliver, type DeliveryRow } from './store.ts';

/** One entry of a session's delivery log: one endpoint × one event. */
export const webhookDelivery = z.object({
  delivery_id: z.string(),
  session_id: z.string(),
  event: z.enum(['call.ended', 'call.analyzed']),
  url: z.string(),
  endpoint_index: z.number().int().describe('Position of the endpoint in webhooks.post_call of the version the session ran'),
  status: z.enum(['pending', 'delivering', 'delivered', 'failed']),
  attempts: z.number().int().describe('Attempts made in the current budget (a redelivery starts a new one)'),
  max_attempts: z.number().int(),
  last_status_code: z.number().int().nullable().describe('HTTP status of the last attempt; null when no response arrived'),
  last_error: z.string().nullable(),
  next_attempt_at: z.string().nullable().describe('When the next attempt is due (pending only)'),
  delivered_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export const webhookDeliveryList = z.object({ deliveries: z.array(webhookDelivery) });
export type WebhookDelivery = z.infer<typeof webhookDelivery>;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toDelivery(r: DeliveryRow, maxAttempts: number): WebhookDelivery {
  return {
    delivery_id: r.id,
    session_id: r.session_id,
    event: r.event as WebhookDelivery['event'],
    url: r.url,
    endpoint_index: r.endpoint_index,
    status: r.status,
    attempts: r.attempts,
    max_attempts: maxAttempts,
    last_status_code: r.last_status_code,
    last_error: r.last_error,
    next_attempt_at: r.status === 'pending' ? iso(r.next_attempt_at) : null,
    delivered_at: iso(r.delivered_at),
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

/** The delivery log and redelivery, independent of HTTP. */
export class WebhookDeliveryService {
  constructor(
    private readonly sql: Sql,
    private readonly o: { maxAttempts: number; onQueued?: () => void },
  ) {}

  async list(p: Principal, sessionId: string): Promise<{ deliveries: WebhookDelivery[] }> {
    if (!(await getSession(this.sql, p.teamId, sessionId))) throw notFound('Session');
    const rows = await listSessionDeliveries(this.sql, p.teamId, sessionId);
    return { deliveries: rows.map((r) => toDelivery(r, this.o.maxAttempts)) };
  }

  async redeliver(p: Principal, sessionId: string, deliveryId: string): Promise<WebhookDelivery> {
    if (!(await getSession(this.sql, p.teamId, sessionId))) throw notFound('Session');
    const r = await redeliver(this.sql, p.teamId, sessionId, deliveryId);
    if (r === undefined) throw notFound('Webhook delivery');
    if (r === 'busy') throw new ServiceError('conflict', 'Webhook delivery is being attempted; try again when it finishes');
    this.o.onQueued?.();
    return toDelivery(r, this.o.maxAttempts);
  }
}
