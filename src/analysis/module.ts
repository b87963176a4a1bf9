import { defineModule } from '../modules.ts';
import { AnalysisWorker } from './index.ts';

/** Post-call analysis: a durable job on the session row; settling queues call.analyzed. */
export const analysisModule = defineModule({
  name: 'analysis',
  needs: ['log', 'sql', 'inference', 'config'],
  start({ log, sql, inference, config }, onClose) {
    const analysisWorker = new AnalysisWorker({ sql, inference, log, backoffMs: config.analysisBackoffMs });
    analysisWorker.start();
    onClose(() => analysisWorker.close());
    return { analysisWorker };
  },
});
