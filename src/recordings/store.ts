import type { Sql } from '../store/db.ts';

/** One `session_recordings` row (migration 009): one speaker's track of a session. */
export interface RecordingTrackRow {
  session_id: string;
  role: 'agent' | 'user';
  status: 'active' | 'complete' | 'failed';
  storage: 'local' | 's3';
  object_key: string;
  content_type: string;
  size_bytes: number | null;
  duration_ms: number | null;
  started_at: Date;
  ended_at: Date | null;
  error: string | null;
  error_code: string | null;
}

/** Registers the tracks of a session being recorded (status `active`); an existing row is left as it is. */
export async function insertRecordingTracks(sql: Sql, sessionId: string, tracks: { role: string; storage: string; objectKey: string }[]): Promise<void> {
  if (tracks.length === 0) return;
  const rows = tracks.map((t) => ({ session_id: sessionId, role: t.role, storage: t.storage, object_key: t.objectKey }));
  await sql`insert into session_recordings ${sql(rows)} on conflict (session_id, role) do nothing`;
}

/** Settles one track: `complete` with its size and duration, or `failed` with an error. */
export async function finishRecordingTrack(
  sql: Sql,
  sessionId: string,
  role: string,
  o: { status: 'complete' | 'failed'; sizeBytes?: number; durationMs?: number; error?: string; errorCode?: string },
): Promise<void> {
  await sql`
    update session_recordings set status = ${o.status}, size_bytes = ${o.sizeBytes ?? null}, duration_ms = ${o.durationMs ?? null},
      ended_at = clock_timestamp(), error = ${o.error ?? null}, error_code = ${o.errorCode ?? null}
    where session_id = ${sessionId} and role = ${role}`;
}

/** The tracks of a session, agent first. */
export function listRecordingTracks(sql: Sql, sessionId: string): Promise<RecordingTrackRow[]> {
  return sql<RecordingTrackRow[]>`select * from session_recordings where session_id = ${sessionId} order by role`;
}

/** One track (for serving its bytes). */
export async function getRecordingTrack(sql: Sql, sessionId: string, role: string): Promise<RecordingTrackRow | undefined> {
  const [row] = await sql<RecordingTrackRow[]>`select * from session_recordings where session_id = ${sessionId} and role = ${role}`;
  return row;
}
