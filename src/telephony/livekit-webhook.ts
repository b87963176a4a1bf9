/**
 * `POST /v1/telephony/livekit/webhook`: LiveKit's webhooks, for the livekit-sip carrier. Point
 * the LiveKit server's `webhook.urls` here (its `api_key` must be the platform's
 * `LIVEKIT_API_KEY`). Each request is verified with livekit-server-sdk's `WebhookReceiver`:
 * the `Authorization` header is a JWT signed with the API secret whose `sha256` claim is the
 * body's digest; anything else is 401.
 *
 * - `participant_joined` of a SIP participant in a room of a number's dispatch rule
 *   (`parley-call-…`): an inbound call (`inboundFromParticipant`); the phone-call service
 *   creates its session (transport `livekit`) and sends the agent participant into that room.
 * - `participant_left` of a SIP participant: the phone hung up (its leg ends).
 * Other events are acknowledged and ignored. Answers 200 `{}`.
 */
import { WebhookReceiver } from 'livekit-server-sdk';
import { ServiceError } from '../errors.ts';
import type { HttpApp } from '../http/app.ts';
import type { Logger } from '../log.ts';
import type { LivekitSipCarrier } from './livekit-sip.ts';

export const LIVEKIT_WEBHOOK_PATH = '/v1/telephony/livekit/webhook';
/** `ParticipantInfo.Kind.SIP` of the LiveKit protocol. */
const SIP_KIND = 3;

export function mountLivekitWebhook(http: HttpApp, o: { apiKey: string; apiSecret: string; carrier: Pick<LivekitSipCarrier, 'calls'>; log: Logger }): void {
  const receiver = new WebhookReceiver(o.apiKey, o.apiSecret);
  http.route({
    method: 'POST', path: LIVEKIT_WEBHOOK_PATH, auth: 'none', body: 'any', bodyLimit: 256 * 1024,
    doc: {
      summary: "LiveKit server webhooks (livekit-sip carrier): SIP participants joining a number's rooms become inbound calls. Authorization: LiveKit's signed JWT (sha256 of the body).",
      tags: ['Phone calls'],
      responses: { 200: { description: 'Accepted' }, 401: { description: 'Missing or invalid LiveKit signature' } },
    },
    handler: async (ctx) => {
      const body = ctx.rawBody?.toString('utf8') ?? '';
      const auth = (ctx.headers['authorization'] ?? '').replace(/^Bearer\s+/i, '');
      let event;
      try {
        event = await receiver.receive(body, auth);
      } catch (err) {
        ctx.log.warn({ err: (err as Error).message }, 'LiveKit webhook refused');
        throw new ServiceError('unauthenticated', 'Invalid LiveKit webhook signature');
      }
      const p = event.participant;
      const room = event.room?.name ?? '';
      if (p && room && p.kind === SIP_KIND) {
        if (event.event === 'participant_joined') {
          const call = o.carrier.calls.inboundFromParticipant({ room, identity: p.identity, attributes: { ...p.attributes } });
          if (call) o.log.info({ callId: call.callId }, 'LiveKit SIP call arrived');
        } else if (event.event === 'participant_left' || event.event === 'participant_connection_aborted') {
          o.carrier.calls.participantLeft({ room, identity: p.identity });
        }
      }
      return { status: 200, body: {} };
    },
  });
}
