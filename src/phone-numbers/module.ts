import { defineModule } from '../modules.ts';
import { Carriers, SandboxCarrier } from '../telephony/index.ts';
import { PhoneRentalJob } from './rental-job.ts';
import { mountPhoneNumberRoutes } from './routes.ts';
import { PhoneNumberService } from './service.ts';

/**
 * Phone numbers and carriers: the embedded sandbox carrier, the livekit-sip carrier (provider
 * `managed`) when LiveKit SIP is configured, /v1/agent/phone-numbers, and the durable daily
 * rental job on every node (SKIP LOCKED shares the work). Offers the carriers (`telephony`).
 * The LiveKit SIP carrier (livekit-server-sdk) loads only when LiveKit is configured.
 */
export const phoneNumbersModule = defineModule({
  name: 'phone-numbers',
  needs: ['http', 'config', 'log', 'sql', 'livekitAgents'],
  async start({ http, config, log, sql, livekitAgents }, onClose) {
    const sandbox = new SandboxCarrier();
    const sip = config.livekit ? await import('../telephony/livekit-sip.ts') : undefined;
    const livekitSip = config.livekit && sip ? new sip.LivekitSipCarrier({ ...config.livekit, outboundTrunkId: config.livekitSipOutboundTrunkId }, log) : undefined;
    const carriers = new Carriers(livekitSip ? [sandbox, livekitSip] : [sandbox]);
    mountPhoneNumberRoutes(http, new PhoneNumberService({ sql, carriers, dailyPriceMicros: config.phoneNumberDailyPriceMicros, limit: config.phoneNumberLimit, log }));
    const phoneRental = new PhoneRentalJob({ sql, log });
    phoneRental.start();
    onClose(() => phoneRental.stop());
    return { telephony: { sandbox, livekitSip, livekitAgents, carriers }, phoneRental };
  },
});
