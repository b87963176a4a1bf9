/**
 * Per-speaker recording of a session (docs/api/recordings.md): the runtime taps the caller's audio as it
 * arrives and the agent's audio as it goes out (both 16 kHz mono 16-bit PCM) and hands them
 * here; each speaker becomes one WAV track, time-aligned with the session (silence where that
 * speaker is quiet), written to a file as it goes. Caller frames are placed at their arrival,
 * agent frames at their play time (the playout's schedule, `actors/playout.ts`), not at the
 * moment they were sent: frames that a stalled event loop sent late and together were placed
 * after silence, cutting the agent's words in the recording though the caller's jitter buffer
 * absorbs such a stall. At the end each file's header is completed;
 * with S3 configured the file is uploaded and the local copy removed. The actor never sees
 * any of this.
 */
import { write as fsWrite } from 'node:fs';
import { mkdir, open, readFile, rm, rmdir, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { SESSION_SAMPLE_RATE_HZ } from '../../actors/types.ts';
import { WAV_HEADER_BYTES, wavHeader } from '../audio/index.ts';
import type { Logger } from '../log.ts';
import type { Sql } from '../store/db.ts';
import { untilStored } from '../store/retry.ts';
import { finishRecordingTrack, insertRecordingTracks } from './store.ts';
import { S3Error, type S3Client } from './s3.ts';

const BYTES_PER_MS = (SESSION_SAMPLE_RATE_HZ * 2) / 1000;
/** A gap in a speaker's audio shorter than this is not filled with silence (jitter). */
const GAP_TOLERANCE_MS = 60;
/**
 * Audio is written to a track's file in chunks of this size (about 2 s), not frame by frame: a
 * file write costs about the same whatever its size, and one per 20 ms frame cost more CPU than
 * the rest of the audio path (bench/README.md). Memory: one pending chunk per track while it
 * holds audio not yet written, which is most of a call (a quiet speaker's part-filled chunk
 * waits for their next words): two per talking session, about half of its memory. Smaller
 * chunks were measured and not taken (docs/decisions.md, D-REC-1).
 */
export const WRITE_CHUNK_BYTES = 64 * 1024;
/** Chunk buffers kept for reuse across every track of the process (at most this many). */
const POOL_MAX = 256;
/** One track's upload to S3 may take this long before it counts as failed. */
const UPLOAD_TIMEOUT_MS = 120_000;

/**
 * Free chunk buffers: a written chunk's buffer goes back here instead of to the garbage
 * collector (64 KB per track per 2 s at a thousand sessions is ~64 MB/s of external memory
 * otherwise, and each allocation nudges V8 towards a collection).
 */
const pool: Uint8Array[] = [];
const takeChunk = () => pool.pop() ?? new Uint8Array(WRITE_CHUNK_BYTES);
const giveChunk = (b: Uint8Array) => {
  if (pool.length < POOL_MAX) pool.push(b);
};

/** `fs.write` at a position, as a promise (the callback form: cheaper than `FileHandle.write`). */
const writeAt = (fd: number, b: Uint8Array, len: number, at: number) =>
  new Promise<void>((resolve, reject) => fsWrite(fd, b, 0, len, at, (err) => (err ? reject(err) : resolve())));

export type TrackRole = 'agent' | 'user';
export const TRACK_ROLES: TrackRole[] = ['agent', 'user'];

/** What the runtime calls for a recorded session. */
export interface SessionRecorder {
  /** Caller audio, as it arrives. */
  user(pcm: Uint8Array): void;
  /** Agent audio, as it is sent to the caller; `playAt` is its play time (clock ms). */
  agent(pcm: Uint8Array, playAt: number): void;
  /** Ends the tracks: completes the files, uploads them when stored in S3, settles the rows. */
  finish(): Promise<void>;
}

/** The object key of a track inside the store (local folder or bucket). */
export const trackKey = (sessionId: string, role: TrackRole) => `${sessionId}/${role}.wav`;

/**
 * One speaker's WAV file, written as audio arrives. Silence longer than what is left of the
 * pending chunk is never written: it leaves a hole in the file (positional writes past the end),
 * which reads back as zeros, so a track of a speaker who is mostly quiet (the agent listening)
 * costs writes only for what was said. A shorter gap is zeros inside the pending chunk.
 */
export class Track {
  private fh: Promise<FileHandle>;
  private chain: Promise<void>;
  /** PCM bytes placed so far (audio and silence), written or pending. */
  bytes = 0;
  /** Audio placed but not yet written: the last `pendingBytes` of `bytes`. */
  private pending: Uint8Array | null = null;
  private pendingBytes = 0;
  error: unknown = null;

  constructor(
    readonly path: string,
    private readonly startedAt: number,
    /** Told once, at the first failed write (the open and the header included). */
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    this.fh = mkdir(dirname(path), { recursive: true }).then(() => open(path, 'w'));
    this.chain = this.fh.then((f) => f.write(wavHeader(SESSION_SAMPLE_RATE_HZ), 0, WAV_HEADER_BYTES, 0)).then(
      () => undefined,
      (err) => this.fail(err),
    );
  }

  /** Stops the track: what is pending is dropped, nothing more is written. The first error wins. */
  fail(err: unknown): void {
    if (this.error) return;
    this.error = err;
    if (this.pending) giveChunk(this.pending);
    this.pending = null;
    this.pendingBytes = 0;
    this.onError(err);
  }

  /** Places `pcm` at `now` on the session's timeline (after silence if the speaker was quiet). */
  push(pcm: Uint8Array, now: number): void {
    if (this.error || pcm.length === 0) return;
    const due = Math.floor(((now - this.startedAt) * BYTES_PER_MS) / 2) * 2;
    const gap = due - this.bytes;
    if (gap > GAP_TOLERANCE_MS * BYTES_PER_MS) {
      if (this.pending && gap <= WRITE_CHUNK_BYTES - this.pendingBytes) {
        // A short gap (frames that arrived late, a pause between words) inside the pending
        // chunk: zeros in the chunk, not a write of their own. Late frames are the common case
        // under load; flushing at each one wrote a small chunk per late frame.
        this.place(null, gap);
      } else {
        // Silence: what is pending goes out now and the gap stays a hole in the file.
        this.flush();
        this.bytes += gap;
      }
    }
    this.place(pcm, pcm.length); // copied: the caller's buffer may be reused
  }

  /**
   * Appends `pcm` (or `n` bytes of silence when null: zeros, the chunk buffers are reused) to
   * the pending chunk, writing the chunk out each time it fills.
   */
  private place(pcm: Uint8Array | null, n: number): void {
    let off = 0;
    while (off < n) {
      this.pending ??= takeChunk();
      const k = Math.min(n - off, WRITE_CHUNK_BYTES - this.pendingBytes);
      if (pcm) this.pending.set(k === pcm.length ? pcm : pcm.subarray(off, off + k), this.pendingBytes);
      else this.pending.fill(0, this.pendingBytes, this.pendingBytes + k);
      this.pendingBytes += k;
      this.bytes += k;
      off += k;
      if (this.pendingBytes === WRITE_CHUNK_BYTES) this.flush();
    }
  }

  /** Writes the pending chunk at its place in the file; its buffer goes back to the pool after. */
  private flush(): void {
    const p = this.pending;
    if (!p) return;
    const len = this.pendingBytes;
    const at = WAV_HEADER_BYTES + this.bytes - len;
    this.pending = null;
    this.pendingBytes = 0;
    this.chain = this.chain
      .then(async () => {
        if (this.error) return;
        const f = await this.fh;
        await writeAt(f.fd, p, len, at);
      })
      .catch((err) => this.fail(err))
      .finally(() => giveChunk(p));
  }

  private closing: Promise<number> | null = null;

  /** Completes the header; resolves with the PCM byte count, rejects if any write failed. Idempotent. */
  close(): Promise<number> {
    return (this.closing ??= this.closeOnce());
  }

  private async closeOnce(): Promise<number> {
    this.flush();
    await this.chain;
    const f = await this.fh.catch((err) => {
      this.fail(err);
      return null;
    });
    if (f) {
      if (!this.error) await f.write(wavHeader(SESSION_SAMPLE_RATE_HZ, this.bytes), 0, WAV_HEADER_BYTES, 0).catch((err) => this.fail(err));
      await f.close().catch(() => undefined);
    }
    if (this.error) throw this.error;
    return this.bytes;
  }
}

export interface RecorderOptions {
  sql: Sql;
  /** Local folder of recordings (and of S3 uploads until they are sent). */
  dir: string;
  s3: S3Client | null;
  log: Logger;
}

/** Why a recording failed, as stored on its tracks (`error_code`, `error`). */
export interface RecordingFailure {
  code: 'disk_full' | 'write_failed' | 'upload_failed';
  message: string;
}

const errnoOf = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | null)?.code;

/** A local write that failed: `disk_full` for ENOSPC (and EDQUOT, a full quota), else `write_failed`. */
export function writeFailure(err: unknown): RecordingFailure {
  const errno = errnoOf(err);
  if (errno === 'ENOSPC' || errno === 'EDQUOT') return { code: 'disk_full', message: `Recording stopped: the recordings disk is full (${errno})` };
  return { code: 'write_failed', message: `The track could not be written${errno ? ` (${errno})` : ''}` };
}

/** An upload to S3 that failed, saying why (the store's status, a timeout, or no connection); never a secret. */
export function uploadFailure(err: unknown): RecordingFailure {
  const why = err instanceof S3Error
    ? `the store answered ${err.status}`
    : (err as Error | null)?.name === 'TimeoutError'
      ? `the store did not answer within ${UPLOAD_TIMEOUT_MS / 1000} s`
      : errnoOf(err)
        ? `the local copy could not be read (${errnoOf(err)})`
        : 'the store could not be reached';
  return { code: 'upload_failed', message: `The track could not be uploaded: ${why}` };
}

/**
 * Starts recording a session: registers its tracks and opens their files.
 *
 * A failed local write (a full disk above all) stops the whole recording at once, during the
 * call: every track stops taking audio, its partial file is removed (it would never be served,
 * and on a full disk its space is wanted), and its row is settled `failed` with the reason, so
 * the recording and the session record say why while the call goes on. One warning is logged
 * per session. The session itself never hears of it (D-REC-2).
 */
export function startRecorder(o: RecorderOptions, sessionId: string, now: () => number): SessionRecorder {
  const storage = o.s3 ? 's3' : 'local';
  const startedAt = now();
  let stopped = false;
  let stopping: Promise<void> | null = null;
  const stop = (err: unknown) => {
    if (stopped) return;
    stopped = true; // before failing the other tracks, which tell this again
    const failure = writeFailure(err);
    o.log.warn({ sessionId, error_code: failure.code, errno: errnoOf(err), dir: o.dir }, failure.message);
    for (const track of tracks.values()) track.fail(err);
    stopping = (async () => {
      await registered.catch(() => undefined);
      await Promise.all([...tracks].map(async ([role, track]) => {
        await track.close().catch(() => undefined);
        await rm(track.path, { force: true }).catch(() => undefined);
        await stored(() => finishRecordingTrack(o.sql, sessionId, role, { status: 'failed', error: failure.message, errorCode: failure.code }))
          .catch((e) => o.log.error({ err: e, sessionId }, 'recording failure not recorded'));
      }));
      await rmdir(join(o.dir, sessionId)).catch(() => undefined); // the session's folder, once empty
    })();
  };
  const tracks = new Map(TRACK_ROLES.map((role) => [role, new Track(join(o.dir, trackKey(sessionId, role)), startedAt, stop)]));
  // A row written while the store is unreachable is retried (`untilStored`, src/store/retry.ts:
  // 250 ms doubling to 5 s, for up to 10 minutes), warned once, as the session's own record is;
  // it was given up at once, leaving the tracks of a session that started or ended during the
  // outage unregistered or unsettled. The writes are idempotent. Other failures throw at once.
  const stored = <T>(write: () => Promise<T>) =>
    untilStored(write, { onUnreachable: (err) => o.log.warn({ err, sessionId }, 'recording not stored yet: the store is unreachable, retrying') });
  const registered = stored(() => insertRecordingTracks(o.sql, sessionId, TRACK_ROLES.map((role) => ({ role, storage, objectKey: trackKey(sessionId, role) }))));
  registered.catch((err) => o.log.error({ err, sessionId }, 'recording tracks not registered'));
  let finishing: Promise<void> | null = null;

  /** A track written whole: uploaded when stored in S3, then settled; an upload failure is returned. */
  const settle = async (role: TrackRole, track: Track, bytes: number): Promise<RecordingFailure | null> => {
    if (o.s3) {
      try {
        const body = await readFile(track.path);
        await o.s3.put(trackKey(sessionId, role), body, 'audio/wav', AbortSignal.timeout(UPLOAD_TIMEOUT_MS));
      } catch (err) {
        // The local copy stays (complete) in the folder for the operator.
        const failure = uploadFailure(err);
        await stored(() => finishRecordingTrack(o.sql, sessionId, role, { status: 'failed', error: failure.message, errorCode: failure.code }))
          .catch((e) => o.log.error({ err: e, sessionId }, 'recording failure not recorded'));
        return failure;
      }
      await rm(track.path, { force: true }).catch(() => undefined);
    }
    await stored(() => finishRecordingTrack(o.sql, sessionId, role, { status: 'complete', sizeBytes: bytes + WAV_HEADER_BYTES, durationMs: Math.round(bytes / BYTES_PER_MS) }))
      .catch((e) => o.log.error({ err: e, sessionId }, 'recording outcome not recorded'));
    return null;
  };

  // The tracks themselves, not a lookup in `tracks` per frame: a Map lookup by name was 0.7 % of
  // the platform's thread with 1,000 silent callers (bench/README.md, thirtieth pass).
  const userTrack = tracks.get('user')!;
  const agentTrack = tracks.get('agent')!;
  return {
    user(pcm) { if (!finishing) userTrack.push(pcm, now()); },
    agent(pcm, playAt) { if (!finishing) agentTrack.push(pcm, playAt); },
    finish() {
      return (finishing ??= (async () => {
        await registered.catch(() => undefined);
        // Completing the files is the last local write: a full disk may show only now.
        const closed = await Promise.all([...tracks].map(([role, track]) => track.close().then((bytes) => ({ role, track, bytes }), () => null)));
        if (stopping) return void (await stopping);
        const failures = (await Promise.all(closed.map((c) => c && settle(c.role, c.track, c.bytes)))).filter((f) => f);
        if (failures.length) o.log.warn({ sessionId, error_code: 'upload_failed', tracks: failures.length }, `Recording not stored: ${failures[0]!.message}`);
      })());
    },
  };
}

