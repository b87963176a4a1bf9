import { defineModule } from '../modules.ts';
import { mountVoiceRoutes } from './routes.ts';
import { VoiceService } from './service.ts';

/** Voice models (/model): cloned voices, and designed candidates saved (the voice-design module keeps them). */
export const voicesModule = defineModule({
  name: 'voices',
  needs: ['http', 'log', 'sql', 'inference', 'voiceDesign'],
  start({ http, log, sql, inference, voiceDesign }) {
    mountVoiceRoutes(http, new VoiceService(sql, inference, log, (teamId, id, name, description, o) => voiceDesign.keep(teamId, id, name, description, o)));
  },
});
