/**
 * Recordings, independent of HTTP: the runtime's recorder factory, the recording view of a
 * session (docs/api/recordings.md) with signed track URLs, and the bytes behind a local signed URL.
 *
 * Signed URLs live 1 h (D-REC-1). Local storage: a platform URL whose
 * `signature` is an HMAC (the secret box's fingerprint key) over session, role and expiry.
 * S3: a SigV4 presigned GET of the object, straight from the store.
 */
import { timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ServiceError, notFound } from '../errors.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import type { Principal } from '../auth/principal.ts';
import type { Logger } from '../log.ts';
import type { Sql } from '../store/db.ts';
import { getRecordingTrack, listRecordingTracks, type RecordingTrackRow } from './store.ts';
import { getSession } from '../sessions/store.ts';
import { startRecorder, trackKey, type SessionRecorder, type TrackRole } from './recorder.ts';
import { S3Client, type S3Config } from './s3.ts';

/** How long a signed track URL works. */
export const RECORDING_URL_TTL_MS = 60 * 60 * 1000;

export const recordingTrack = z.object({
  role: z.enum(['agent', 'user', 'human']),
  status: z.enum(['requested', 'active', 'complete', 'failed']),
  url: z.string().nullable().describe('Signed URL of the WAV track (16 kHz mono), valid until expires_at; null until complete'),
  expires_at: z.string().nullable(),
  duration_ms: z.number().int().nullable(),
  started_at: z.string().nullable(),
  ended_at: z.string().nullable(),
  error: z.string().nullable(),
  error_code: z.string().nullable(),
});
export const recordingView = z.object({
  session_id: z.string(),
  status: z.enum(['processing', 'complete', 'failed']),
  tracks: z.array(recordingTrack),
  error: z.string().nullable(),
  error_code: z.string().nullable(),
  error_message: z.string().nullable(),
});
export type RecordingView = z.infer<typeof recordingView>;

/** The recording's state in the session record (`recording`): null when it was never recorded. */
export const recordingSummary = recordingView.pick({ status: true, error: true, error_code: true, error_message: true });
export type RecordingSummary = z.infer<typeof recordingSummary>;

/**
 * The state of a recording from its tracks: `processing` while one is active, `failed` when
 * every track failed (with the first track's reason), else `complete`.
 */
export function summarizeRecording(tracks: Pick<RecordingTrackRow, 'status' | 'error' | 'error_code'>[]): RecordingSummary {
  const status = tracks.some((t) => t.status === 'active') ? 'processing' : tracks.every((t) => t.status === 'failed') ? 'failed' : 'complete';
  if (status !== 'failed') return { status, error: null, error_code: null, error_message: null };
  const first = tracks[0];
  const same = tracks.every((t) => t.error_code === first?.error_code);
  return {
    status,
    error: 'recording_failed',
    error_code: first?.error_code ?? null,
    error_message: (same ? first?.error : null) ?? 'No track of this session could be stored',
  };
}

export interface RecordingServiceOptions {
  sql: Sql;
  box: SecretBox;
  log: Logger;
  /** Local folder (`PARLEY_RECORDINGS_DIR`). */
  dir: string;
  /** S3-compatible storage (`PARLEY_RECORDINGS_S3_*`), or null for the local folder. */
  s3: S3Config | null;
  now?: () => number;
}

/** Where the request came from, to build absolute local URLs (like `websocket_url`). */
export interface UrlBase {
  host?: string;
  forwardedProto?: string;
}

export class RecordingService {
  readonly s3: S3Client | null;
  private readonly now: () => number;

  constructor(private readonly o: RecordingServiceOptions) {
    this.now = o.now ?? Date.now;
    this.s3 = o.s3 ? new S3Client(o.s3, () => new Date(this.now())) : null;
  }

  get storage(): 'local' | 's3' {
    return this.s3 ? 's3' : 'local';
  }

  /** The runtime's tap for a session with `record_audio`. */
  start(sessionId: string, now: () => number): SessionRecorder {
    return startRecorder({ sql: this.o.sql, dir: this.o.dir, s3: this.s3, log: this.o.log }, sessionId, now);
  }

  private sign(sessionId: string, role: string, expiresS: number): string {
    return this.o.box.fingerprint(`recording-url\n${sessionId}\n${role}\n${expiresS}`);
  }

  private url(t: RecordingTrackRow, base: UrlBase, expiresS: number): string {
    if (t.storage === 's3') {
      if (!this.s3) throw new ServiceError('unavailable', 'Recording storage is not configured');
      return this.s3.presignGet(t.object_key, RECORDING_URL_TTL_MS / 1000);
    }
    const scheme = base.forwardedProto?.split(',')[0]?.trim().toLowerCase() === 'https' ? 'https' : 'http';
    const q = new URLSearchParams({ expires: String(expiresS), signature: this.sign(t.session_id, t.role, expiresS) });
    return `${scheme}://${base.host || 'localhost'}/v1/agent/sessions/${encodeURIComponent(t.session_id)}/recording/tracks/${t.role}?${q}`;
  }

  /** The recording of one of the team's sessions; 404 `Recording not found` when it was never recorded. */
  async view(p: Principal, sessionId: string, base: UrlBase): Promise<RecordingView> {
    const session = await getSession(this.o.sql, p.teamId, sessionId);
    if (!session) throw notFound('Session');
    const rows = await listRecordingTracks(this.o.sql, sessionId);
    if (rows.length === 0) throw new ServiceError('not_found', 'Recording not found');
    const expiresMs = Math.floor((this.now() + RECORDING_URL_TTL_MS) / 1000) * 1000;
    const tracks = rows.map((t) => {
      const ready = t.status === 'complete';
      return {
        role: t.role,
        status: t.status,
        url: ready ? this.url(t, base, expiresMs / 1000) : null,
        expires_at: ready ? new Date(expiresMs).toISOString() : null,
        duration_ms: t.duration_ms,
        started_at: t.started_at.toISOString(),
        ended_at: t.ended_at ? t.ended_at.toISOString() : null,
        error: t.error,
        error_code: t.error_code,
      };
    });
    const { status, ...why } = summarizeRecording(rows);
    return { session_id: sessionId, status, tracks, ...why };
  }

  /** The recording's state for the session record; null when the session was never recorded. */
  async summary(sessionId: string): Promise<RecordingSummary | null> {
    const rows = await listRecordingTracks(this.o.sql, sessionId);
    return rows.length ? summarizeRecording(rows) : null;
  }

  /** The bytes behind a local signed URL; 404 for a bad or expired signature (nothing is revealed). */
  async download(sessionId: string, role: string, expires: string | null, signature: string | null): Promise<Buffer> {
    const gone = () => new ServiceError('not_found', 'Recording not found');
    const expiresS = Number(expires);
    if (!signature || !Number.isInteger(expiresS) || expiresS * 1000 < this.now()) throw gone();
    const want = Buffer.from(this.sign(sessionId, role, expiresS));
    const got = Buffer.from(signature);
    if (want.length !== got.length || !timingSafeEqual(want, got)) throw gone();
    const t = await getRecordingTrack(this.o.sql, sessionId, role);
    if (!t || t.status !== 'complete' || t.storage !== 'local') throw gone();
    try {
      return await readFile(join(this.o.dir, trackKey(sessionId, role as TrackRole)));
    } catch (cause) {
      throw new ServiceError('not_found', 'Recording not found', { cause });
    }
  }
}
