import type { HttpApp } from '../http/app.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';
import { phoneCallBody, phoneCallCreated, phoneCallError, type PhoneCallService } from './service.ts';

/** POST /v1/agent/phone-calls (docs/api/phone.md): refusals carry a `reason` beside status and message. */
export function mountPhoneCallRoutes(http: HttpApp, calls: PhoneCallService): void {
  http.route({
    method: 'POST', path: '/v1/agent/phone-calls', auth: 'required', body: 'json', input: { body: phoneCallBody },
    doc: {
      summary: 'Place an outbound call: the agent talks to to_number from one of your numbers. Answers at once (status queued); poll the session for dial_status. Header Idempotency-Key replays for 24 h.',
      tags: ['Phone calls'],
      responses: {
        201: { description: 'Queued: the session id of the call', schema: phoneCallCreated },
        402: { description: 'insufficient_credit', schema: phoneCallError },
        403: { description: 'outbound_disabled', schema: phoneCallError },
        404: { description: 'number_not_found, agent_not_found', schema: phoneCallError },
        409: { description: 'agent_not_published, idempotency_key_conflict', schema: phoneCallError },
        422: { description: 'Field errors; number_provider_unsupported, number_inactive, destination_invalid, destination_not_allowed, premium_destination_blocked, self_call_blocked, idempotency_key_reuse as the entry type' },
        429: { description: 'daily_limit_exceeded (200 per UTC day, refused attempts count), concurrency_limit_exceeded (10 ringing or live); Retry-After in seconds', schema: phoneCallError },
        503: { description: 'Session capacity reached, or a dependency is unavailable: safe to retry with the same key', schema: errorBody },
      },
    },
    handler: async (ctx) => calls.create(who(ctx), ctx.input.body, ctx.body, ctx.headers['idempotency-key']),
  });
}
