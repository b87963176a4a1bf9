import { rm } from 'node:fs/promises';
import { defineModule } from '../modules.ts';
import { RecordingService } from './index.ts';
import { mountRecordingRoutes } from './routes.ts';

/**
 * Per-speaker tracks of sessions with record_audio, in PARLEY_RECORDINGS_DIR or S3-compatible
 * storage (PARLEY_RECORDINGS_S3_*); a temporary folder with the `memory` store, removed at close.
 */
export const recordingsModule = defineModule({
  name: 'recordings',
  needs: ['http', 'config', 'log', 'sql', 'box'],
  start({ http, config, log, sql, box }, onClose) {
    const at = config.recordings;
    const recordings = new RecordingService({ sql, box, log, dir: at.dir, s3: at.s3 });
    if (at.ephemeral) onClose(() => rm(at.dir, { recursive: true, force: true }));
    mountRecordingRoutes(http, recordings);
    return { recordings };
  },
});
