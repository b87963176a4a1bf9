import { AUTH_MESSAGES } from '../auth/principal.ts';
import { defineModule } from '../modules.ts';
import { mountSandboxCalls } from '../telephony/sandbox-socket.ts';
import { resolveVoice } from '../voices/service.ts';
import { mountPhoneCallRoutes } from './routes.ts';
import { PhoneCallService } from './service.ts';

/**
 * Calls: inbound calls answered by the session runtime, POST /v1/agent/phone-calls, the
 * sandbox phones at wss /v1/telephony/sandbox/calls (unless PARLEY_SANDBOX_CALLS=off), and
 * LiveKit's webhooks (SIP participants joining a number's rooms are inbound calls). At close
 * the sandbox carrier goes first: its handed-off calls end, and their transfer minutes are
 * recorded.
 */
export const phoneCallsModule = defineModule({
  name: 'phone-calls',
  needs: ['http', 'config', 'log', 'sql', 'state', 'box', 'sessions', 'runtime', 'inference', 'telephony', 'authenticate'],
  async start({ http, config, log, sql, state, box, sessions, runtime, inference, telephony, authenticate }, onClose) {
    const phoneCalls = new PhoneCallService({
      sql, state, box, sessions, runtime, carriers: telephony.carriers, inference, log, outboundAllow: config.outboundAllow,
      resolveVoice: (teamId, id) => resolveVoice(sql, teamId, id), settings: config.phoneCalls,
      livekit: telephony.livekitAgents,
    });
    await phoneCalls.start();
    onClose(async () => {
      telephony.sandbox.calls.close();
      await phoneCalls.close();
    });
    mountPhoneCallRoutes(http, phoneCalls);
    if (telephony.livekitSip && config.livekit) {
      const { mountLivekitWebhook } = await import('../telephony/livekit-webhook.ts');
      mountLivekitWebhook(http, { apiKey: config.livekit.apiKey, apiSecret: config.livekit.apiSecret, carrier: telephony.livekitSip, log });
    }
    if (config.sandboxCalls) {
      mountSandboxCalls(http, telephony.sandbox.calls, { log, authenticate: (token) => authenticate(token, AUTH_MESSAGES) });
    }
    return { phoneCalls };
  },
});
