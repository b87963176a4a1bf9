/** Session recordings: per-speaker WAV tracks in a local folder or S3-compatible storage. */

export { RecordingService, RECORDING_URL_TTL_MS, recordingView, recordingTrack, recordingSummary, summarizeRecording, type RecordingView, type RecordingSummary, type RecordingServiceOptions, type UrlBase } from './service.ts';
export { startRecorder, trackKey, TRACK_ROLES, writeFailure, uploadFailure, type SessionRecorder, type TrackRole, type RecordingFailure } from './recorder.ts';
export { S3Client, S3Error, presignUrl, signHeaders, uriEncode, amzDate } from './s3.ts';
export { s3ConfigFromEnv, type S3Config } from '../config.ts';

/** Read with the rest of the configuration (src/config.ts). */
export { recordingsDir } from '../config.ts';
