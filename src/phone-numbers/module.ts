import { defineModule } from '../modules.ts';
import { Carriers, SandboxCarrier } from '../telephony/index.ts';
import { LivekitSipCarrier, livekitSipFromEnv } from '../telephony/livekit-sip.ts';
import { PhoneRentalJob } from './rental-job.ts';
import { mountPhoneNumberRoutes } from './routes.ts';
import { PhoneNumberService } from './service.ts';

/**
 * Phone numbers and carriers: the embedded sandbox carrier, the livekit-sip carrier (provider
 * `managed`) when LiveKit SIP is configured, /v1/agent/phone-numbers, and the durable daily
 * rental job on every node (SKIP LOCKED shares the work). Offers the carriers (`telephony`).
 */
export const phoneNumbersModule = defineModule({
  name: 'phone-numbers',
  needs: ['http', 'config', 'log', 'sql', 'livekitAgents'],
  start({ http, config, log, sql, livekitAgents }, onClose) {
    const sandbox = new SandboxCarrier();
    const livekitSip = config.livekit ? new LivekitSipCarrier(livekitSipFromEnv({ LIVEKIT_SIP_OUTBOUND_TRUNK_ID: config.livekitSipOutboundTrunkId ?? undefined }, config.livekit), log) : undefined;
    const carriers = new Carriers(livekitSip ? [sandbox, livekitSip] : [sandbox]);
    mountPhoneNumberRoutes(http, new PhoneNumberService({ sql, carriers, dailyPriceMicros: config.phoneNumberDailyPriceMicros, limit: config.phoneNumberLimit, log }));
    const phoneRental = new PhoneRentalJob({ sql, log });
    phoneRental.start();
    onClose(() => phoneRental.stop());
    return { telephony: { sandbox, livekitSip, livekitAgents, carriers }, phoneRental };
  },
});
