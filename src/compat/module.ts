import { keyIsLive } from '../auth/store-keys.ts';
import { defineModule } from '../modules.ts';
import { mountElevenLabsRoutes } from './elevenlabs/routes.ts';
import { registerCompatEnvelopes } from './errors.ts';
import { mountOpenAiCompat } from './openai/index.ts';

/** Every compat realtime socket (families A, B, Groq and C) lives at most 3600 s (docs/api/compat.md). */
const COMPAT_LIFETIME_MS = 3600 * 1000;

/**
 * The compatibility layer, translated into the speech services: families A, B and Groq-style
 * (/compat/v1, /compat/api/v1, /compat/openai/v1) and family C (/compat/elevenlabs). Errors
 * the HTTP layer answers under /compat (404, 405, 413) come in each family's envelope.
 */
export const compatModule = defineModule({
  name: 'compat',
  needs: ['http', 'log', 'sql', 'state', 'tts', 'asr', 'authenticate'],
  start({ http, log, sql, state, tts, asr, authenticate }) {
    mountOpenAiCompat(http, { tts, asr, authenticate, realtimeLifetimeMs: COMPAT_LIFETIME_MS });
    registerCompatEnvelopes(http);
    mountElevenLabsRoutes(http, { tts, asr, sql, log, state, timers: { lifetimeMs: COMPAT_LIFETIME_MS }, authenticate, keyIsLive: (teamId, id) => keyIsLive(sql, teamId, id) });
  },
});
