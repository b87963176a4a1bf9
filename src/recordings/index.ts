/** Session recordings: per-speaker WAV tracks in a local folder or S3-compatible storage. */
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export { RecordingService, RECORDING_URL_TTL_MS, recordingView, recordingTrack, type RecordingView, type RecordingServiceOptions, type UrlBase } from './service.ts';
export { startRecorder, trackKey, TRACK_ROLES, type SessionRecorder, type TrackRole } from './recorder.ts';
export { S3Client, S3Error, presignUrl, signHeaders, s3ConfigFromEnv, uriEncode, amzDate, type S3Config } from './s3.ts';

/**
 * `PARLEY_RECORDINGS_DIR`, else `<data dir>/recordings`; with the ephemeral store (`memory`)
 * a folder of its own under the system's temporary directory (`ephemeral`: remove it at close).
 */
export function recordingsDir(env: NodeJS.ProcessEnv, dataDir: string): { dir: string; ephemeral: boolean } {
  const dir = env.PARLEY_RECORDINGS_DIR?.trim();
  if (dir) return { dir: resolve(dir), ephemeral: false };
  // Ephemeral store, ephemeral recordings: a folder of this platform alone, removed when it closes.
  if (dataDir === 'memory') return { dir: join(tmpdir(), `parley-recordings-${process.pid}-${randomBytes(4).toString('hex')}`), ephemeral: true };
  return { dir: resolve(dataDir, 'recordings'), ephemeral: false };
}
