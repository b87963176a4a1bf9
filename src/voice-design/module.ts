import { defineModule } from '../modules.ts';
import { CreditGate, recordUsage } from '../speech/usage.ts';
import { mountVoiceDesignRoutes } from './routes.ts';
import { DesignTokens, VoiceDesignService } from './service.ts';

/** POST /v1/voice-design: candidates from a description (the backend's DesignVoice). */
export const voiceDesignModule = defineModule({
  name: 'voice-design',
  needs: ['http', 'log', 'sql', 'box', 'inference', 'speechConcurrency'],
  start({ http, log, sql, box, inference, speechConcurrency }) {
    const voiceDesign = new VoiceDesignService({
      inference, log, tokens: new DesignTokens(box), credit: new CreditGate(sql), concurrency: speechConcurrency,
      onDesigned: async (teamId) => void (await recordUsage(sql, { teamId, kind: 'voice_designs', amount: 1, model: 'voice-design-1' }, log)),
    });
    mountVoiceDesignRoutes(http, voiceDesign);
    return { voiceDesign };
  },
});
