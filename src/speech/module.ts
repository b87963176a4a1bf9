import client from 'prom-client';
import { defineModule } from '../modules.ts';
import { startTracing } from '../telemetry/tracing.ts';
import { resolveVoice } from '../voices/service.ts';
import { mountAsrRoutes } from './asr-routes.ts';
import { AsrService } from './asr.ts';
import { SpeechConcurrency } from './concurrency.ts';
import { mountLiveRoute } from './live.ts';
import { mountTtsRoutes } from './tts-routes.ts';
import { TtsService } from './tts.ts';
import { configureUsage, CreditGate, flushUsage, recordUsage, usageBacklog } from './usage.ts';

/**
 * The speech API: synthesis (/v1/tts, /v1/tts/stream/with-timestamp, wss /v1/tts/live) and
 * transcription (/v1/asr), traced, under the per-team speech concurrency cap (spend tier, or
 * PARLEY_SPEECH_CONCURRENCY) that native and compat requests share.
 */
export const speechModule = defineModule({
  name: 'speech',
  needs: ['http', 'config', 'log', 'sql', 'state', 'inference', 'authenticate', 'metrics'],
  start({ http, config, log, sql, state, inference, authenticate, metrics }, onClose) {
    const tracing = startTracing({ config: config.tracing });
    onClose(() => tracing.shutdown());
    onClose(() => flushUsage(sql, config.drainTimeoutMs)); // usage waiting for its batch or the store (runs before the store closes)
    configureUsage(sql, { backlogMax: config.usageBacklogMax, log });
    new client.Gauge({
      name: 'parley_usage_backlog',
      help: 'Usage records waiting to be written (the store unreachable); at PARLEY_USAGE_BACKLOG_MAX new billable calls are refused (503).',
      registers: [metrics.registry],
      collect() {
        this.set(usageBacklog(sql).waiting);
      },
    });
    const speechConcurrency = new SpeechConcurrency({ state, sql, log, override: config.speechConcurrency });
    onClose(() => speechConcurrency.close());
    const tts = new TtsService({
      inference, sql, log, tracing,
      resolveVoice: (teamId, id) => resolveVoice(sql, teamId, id),
      authenticate,
      concurrency: speechConcurrency,
    });
    mountTtsRoutes(http, tts);
    mountLiveRoute(http, tts);
    const asr = new AsrService(inference, {
      log,
      credit: new CreditGate(sql),
      concurrency: speechConcurrency,
      tracing,
      onTranscribed: async (u) => void (await recordUsage(sql, { teamId: u.teamId, kind: 'asr_seconds', amount: u.seconds, model: u.model }, log)),
    });
    mountAsrRoutes(http, asr);
    return { tracing, speechConcurrency, tts, asr };
  },
});
