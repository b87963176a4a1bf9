/**
 * The post-call webhook delivery worker. Every node runs one; the queue is the
 * `webhook_deliveries` table, so the row is the truth and nothing lives only in memory:
 *
 * - a poll claims due rows (`FOR UPDATE SKIP LOCKED`, under a lease), so nodes never send
 *   the same attempt twice while both are alive, and a dead node's claim is taken over when its
 *   lease expires (at-least-once);
 * - each claimed row is one attempt through `outboundFetch` (the SSRF guard, every time):
 *   10 s timeout, only 2xx succeeds, 3 attempts in all with 1 s then 5 s between them;
 * - the endpoints of a session are independent (in parallel), while within one endpoint
 *   `call.ended` finishes (delivered or dropped) before `call.analyzed` is claimed;
 * - every attempt is signed afresh (`t` = now) over the row's unchanged body;
 * - stopping the node aborts attempts in flight and gives their rows back, due at once.
 */
import { randomBytes } from 'node:crypto';
import type { SecretBox } from '../crypto/secrets.ts';
import type { Logger } from '../log.ts';
import { outboundFetch, OutboundError, type Resolver } from '../net/index.ts';
import type { Sql } from '../store/db.ts';
import { claimDueDeliveries, recordAttempt, type AttemptOutcome, type DeliveryRow } from './store.ts';
import { SIGNATURE_HEADER, signatureHeader } from './sign.ts';
import { LeasePoller } from '../jobs/lease-poller.ts';

export interface WebhookWorkerOptions {
  sql: Sql;
  box: SecretBox;
  log: Logger;
  /** `host:port` entries the SSRF guard lets through (`PARLEY_OUTBOUND_ALLOW`). */
  allow: string[];
  /** Name resolution for the guard; tests inject one. */
  lookup?: Resolver;
  /** Delay before attempt n+1 after attempt n fails; default `[1000, 5000]` (docs/api/webhooks.md). */
  backoffMs?: number[];
  /** Attempts in all, default 3. */
  maxAttempts?: number;
  /** Per attempt, default 10,000. */
  timeoutMs?: number;
  /** How often the queue is polled, default 500. */
  pollMs?: number;
  /** Attempts in flight on this node at most, default 32. */
  concurrency?: number;
}

/** Response bytes kept from a receiver (only the status matters). */
const RESPONSE_BYTES = 4096;

export class WebhookWorker {
  readonly backoffMs: number[];
  readonly maxAttempts: number;
  readonly timeoutMs: number;
  private readonly claimId = `wk_${randomBytes(9).toString('hex')}`;
  private readonly poller: LeasePoller<DeliveryRow>;

  constructor(private readonly o: WebhookWorkerOptions) {
    this.backoffMs = o.backoffMs ?? [1000, 5000];
    this.maxAttempts = o.maxAttempts ?? 3;
    this.timeoutMs = o.timeoutMs ?? 10_000;
    this.poller = new LeasePoller<DeliveryRow>({
      name: 'webhook',
      log: o.log,
      pollMs: o.pollMs ?? 500,
      concurrency: o.concurrency ?? 32,
      // A claim outlives the attempt's timeout with room to record the outcome.
      claim: (limit) => claimDueDeliveries(o.sql, { limit, leaseMs: this.timeoutMs + 20_000, claimId: this.claimId }),
      key: (row) => row.id,
      run: async (row, signal) => {
        const outcome = await this.attempt(row, signal);
        await recordAttempt(o.sql, row.id, this.claimId, outcome);
      },
      failure: (row) => ({ fields: { deliveryId: row.id }, msg: 'webhook delivery outcome not recorded' }),
    });
  }

  start(): void {
    this.poller.start();
  }

  /** Claims and starts what is due now; resolves once claimed (not once delivered). */
  tick(): Promise<number> {
    return this.poller.tick();
  }

  /** Stops polling, aborts attempts in flight and hands their rows back to the queue. */
  close(): Promise<void> {
    return this.poller.close();
  }

  /** One attempt; never throws. */
  private async attempt(row: DeliveryRow, signal: AbortSignal): Promise<AttemptOutcome> {
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      'User-Agent': 'Parley-Webhooks/1',
      'X-Service-Webhook-Id': row.id,
    };
    if (row.secret_sealed !== null) {
      let secret: string;
      try {
        secret = this.o.box.open(row.secret_sealed);
      } catch (err) {
        // Never send unsigned what should be signed: a different master key is not transient.
        this.o.log.error({ err, deliveryId: row.id }, 'webhook signing secret cannot be opened');
        return { kind: 'failed', statusCode: null, error: 'Signing secret cannot be opened' };
      }
      headers[SIGNATURE_HEADER] = signatureHeader(secret, row.body);
    }
    try {
      const res = await outboundFetch(
        row.url,
        { method: 'POST', headers, body: row.body, timeoutMs: this.timeoutMs, signal, maxRedirects: 0, maxResponseBytes: RESPONSE_BYTES },
        { allow: this.o.allow, lookup: this.o.lookup },
      );
      if (res.status >= 200 && res.status < 300) {
        this.o.log.info({ deliveryId: row.id, event: row.event, attempt: row.attempts, status: res.status }, 'webhook delivered');
        return { kind: 'delivered', statusCode: res.status };
      }
      return this.failure(row, res.status, `Endpoint answered ${res.status}`, false);
    } catch (err) {
      if (signal.aborted) return { kind: 'released' };
      const final = err instanceof OutboundError && (err.reason === 'ssrf_blocked' || err.reason === 'invalid_url');
      const message = err instanceof OutboundError ? err.message : 'Delivery failed';
      return this.failure(row, null, message, final, err);
    }
  }

  /** A refused destination is final at once: the guard will refuse it again in 1 s. */
  private failure(row: DeliveryRow, statusCode: number | null, error: string, final: boolean, err?: unknown): AttemptOutcome {
    const last = final || row.attempts >= this.maxAttempts;
    this.o.log.warn(
      { err, deliveryId: row.id, event: row.event, attempt: row.attempts, status: statusCode, final: last, pii: { url: row.url } },
      'webhook attempt failed',
    );
    if (last) return { kind: 'failed', statusCode, error };
    const delayMs = this.backoffMs[Math.min(row.attempts - 1, this.backoffMs.length - 1)] ?? 0;
    return { kind: 'retry', statusCode, error, delayMs };
  }
}
