/**
 * `wss /compat/elevenlabs/v1/speech-to-text/realtime` (docs/api/compat.md "Family C
 * sockets", "Clients"; D-COMPAT-12).
 *
 * Handshake (HTTP answers in the family envelope, before the upgrade): the key in
 * `xi-api-key` (or `Authorization: Bearer`), none → 401 `unauthorized`, invalid → 401
 * `provider_error`; or `?token=` with a single-use `realtime_scribe` token (tokens.ts; the
 * official client then sends no key), unknown, used or expired → 401 `unauthorized`; `commit_strategy` `manual` only (`vad` and others → 400);
 * `audio_format` `pcm_<rate>` only, 8000–48000 Hz (default `pcm_16000`; `ulaw_8000` and
 * others → 400); `X-Service-` headers → 400 (native parameters do not apply to speech to
 * text). `language_code` is forwarded to recognition and echoed.
 *
 * After the upgrade the server sends `session_started` first. Client messages:
 * `{message_type: "input_audio_chunk", audio_base_64, commit?}`; every other shape is
 * ignored. Audio is bare 16-bit PCM at the handshake's rate (the per-message `sample_rate`
 * is not used: a mismatch gives a wrong transcript, not an error). Each commit transcribes
 * the audio since the previous commit through the native recognition service and answers
 * `committed_transcript{text}`, then `committed_transcript_with_timestamps{text,
 * language_code, words[]}`, in commit order; word times are seconds on the session's audio
 * timeline. While audio arrives, `partial_transcript{text}` carries the current segment's
 * text so far, from a streaming recognition of that segment (no usage recorded: the commits
 * are billed); a commit ends it and the next segment gets its own, so no partial ever shows
 * text of a segment already committed. When it cannot run (no credit, backend without
 * streaming), there are simply no partials. More than 100 MiB of uncommitted audio → `input_error`: that append is
 * dropped and the socket stays open. A failed recognition → an error message of the
 * vendor's kinds (`input_error`, `quota_exceeded`, `rate_limited`, `transcriber_error`).
 * The connection lifetime (docs/api/compat.md: 3600 s) reached → `session_time_limit_exceeded`,
 * then close 1000 `connection lifetime reached`; commits still in recognition are dropped.
 */
import { randomUUID } from 'node:crypto';
import { wavHeader } from '../../audio/index.ts';
import { toServiceError } from '../../errors.ts';
import type { Authenticate } from '../../auth/principal.ts';
import type { HttpApp } from '../../http/app.ts';
import type { Logger } from '../../log.ts';
import { ASR_MIN_DURATION_MS, type AsrService, type InterimStream, type Transcript } from '../../speech/asr.ts';
import type { SharedState } from '../../state/index.ts';
import { ELEVENLABS_BASE, ElevenLabsError } from './common.ts';
import { sttResponse } from './stt.ts';
import { authenticateKeyOrToken, type KeyIsLive } from './tokens.ts';
import { LIFETIME_CLOSE, mountJsonSocket, type JsonSocket, type SocketSession, type SocketTimers, type UpgradeRequest } from './ws-socket.ts';

export interface RealtimeSttDeps {
  asr: AsrService;
  authenticate: Authenticate;
  log: Logger;
  /** Single-use tokens (`?token=`). */
  state: SharedState;
  /** Whether a token's issuing key is still usable (none: not checked). */
  keyIsLive?: KeyIsLive;
  /** The lifetime clock; the default outside tests. */
  timers?: SocketTimers;
}

/** Uncommitted audio a session may hold (docs/api/compat.md: 100 MiB). */
export const REALTIME_AUDIO_LIMIT_BYTES = 100 * 1024 * 1024;
export const DEFAULT_AUDIO_FORMAT = 'pcm_16000';
/** Audio held for a segment's streaming recognition while it opens (then dropped: partials only). */
const INTERIM_PENDING_LIMIT_BYTES = 2 * 1024 * 1024;

interface SttState {
  teamId: string;
  sampleRateHz: number;
  audioFormat: string;
  languageCode: string;
  modelId: string;
  includeTimestamps: boolean;
  includeLanguageDetection: boolean;
  traceparent: string | undefined;
}

/** Handshake checks (all before the upgrade). */
export async function acceptRealtimeStt(r: UpgradeRequest, deps: Pick<RealtimeSttDeps, 'authenticate' | 'state'>): Promise<SttState> {
  const strategy = r.query.get('commit_strategy') ?? 'manual';
  if (strategy !== 'manual') {
    throw new ElevenLabsError('invalid_request', `commit_strategy ${strategy} is not supported: only manual commits are available (send commit: true)`);
  }
  const audioFormat = r.query.get('audio_format') || DEFAULT_AUDIO_FORMAT;
  const m = /^pcm_(\d+)$/.exec(audioFormat);
  const sampleRateHz = m ? Number(m[1]) : NaN;
  if (!(sampleRateHz >= 8000 && sampleRateHz <= 48000)) {
    throw new ElevenLabsError('invalid_request', `audio_format ${audioFormat} is not supported: use pcm_<rate> (8000 to 48000 Hz) with 16-bit mono samples`);
  }
  if (Object.keys(r.headers).some((h) => h.startsWith('x-service-'))) {
    throw new ElevenLabsError('invalid_request', 'Native parameter headers (X-Service-*) do not apply to speech to text');
  }
  const principal = await authenticateKeyOrToken(r, 'realtime_scribe', deps);
  return {
    teamId: principal.teamId,
    sampleRateHz,
    audioFormat,
    languageCode: r.query.get('language_code') ?? '',
    modelId: r.query.get('model_id') ?? '',
    includeTimestamps: r.query.get('include_timestamps') === 'true',
    includeLanguageDetection: r.query.get('include_language_detection') === 'true',
    traceparent: r.headers['traceparent'],
  };
}

/** One realtime transcription connection. */
export class RealtimeSttSession implements SocketSession {
  private readonly ac = new AbortController();
  private pieces: Buffer[] = [];
  private bytes = 0;
  /** Audio already committed, in milliseconds: where the next commit's words start. */
  private committedMs = 0;
  private chain: Promise<void> = Promise.resolve();
  /**
   * Partial transcripts come from a streaming recognition of the current segment. Each commit
   * ends that stream and opens a new one for the next segment (`interimGen` counts them), so a
   * lagging stream can never show text of a segment already committed.
   */
  private interimGen = 0;
  private interimStream: InterimStream | null = null;
  /** Audio of the current segment that arrived while its stream was opening. */
  private interimPending: Buffer[] | null = null;
  private interimPendingBytes = 0;

  constructor(
    private readonly deps: RealtimeSttDeps,
    private readonly socket: JsonSocket,
    private readonly state: SttState,
    private readonly requestId: string,
  ) {
    socket.send({
      message_type: 'session_started',
      session_id: randomUUID().replace(/-/g, ''),
      config: {
        sample_rate: state.sampleRateHz,
        audio_format: state.audioFormat,
        language_code: state.languageCode || null,
        commit_strategy: 'manual',
        model_id: state.modelId,
        include_timestamps: state.includeTimestamps,
        include_language_detection: state.includeLanguageDetection,
      },
    });
    this.openInterim();
  }

  /** Opens the streaming recognition of a new segment; its partial texts go to the client. */
  private openInterim(): void {
    const gen = ++this.interimGen;
    this.interimStream = null;
    this.interimPending = [];
    this.interimPendingBytes = 0;
    const current = () => gen === this.interimGen && !this.socket.closed;
    this.deps.asr
      .interim(this.state.teamId, { sampleRateHz: this.state.sampleRateHz, language: this.state.languageCode || undefined, signal: this.ac.signal, requestId: this.requestId, traceparent: this.state.traceparent })
      .then(async (stream) => {
        if (!current()) return stream.end();
        this.interimStream = stream;
        for (const piece of this.interimPending ?? []) stream.send(piece);
        this.interimPending = null;
        let last = '';
        for await (const text of stream.texts) {
          if (!current()) continue; // a committed segment's stream: drained, not shown
          if (!text || text === last) continue;
          last = text;
          this.socket.send({ message_type: 'partial_transcript', text });
        }
      })
      .catch((err) => {
        // Partials stop for this segment; commits are transcribed as before.
        if (gen === this.interimGen) this.interimPending = null;
        if (!this.ac.signal.aborted) this.deps.log.debug({ err }, 'realtime interim recognition unavailable');
      });
  }

  /** The current segment's audio, to its streaming recognition (held while the stream opens). */
  private interimAudio(audio: Buffer): void {
    if (this.interimStream) this.interimStream.send(audio);
    else if (this.interimPending && this.interimPendingBytes + audio.byteLength <= INTERIM_PENDING_LIMIT_BYTES) {
      this.interimPending.push(audio);
      this.interimPendingBytes += audio.byteLength;
    }
  }

  onMessage(text: string): void {
    if (this.socket.closed) return;
    let m: unknown;
    try {
      m = JSON.parse(text);
    } catch {
      return; // other message shapes are ignored
    }
    if (!m || typeof m !== 'object' || Array.isArray(m)) return;
    const msg = m as { message_type?: unknown; audio_base_64?: unknown; commit?: unknown };
    if (msg.message_type !== 'input_audio_chunk') return;
    if (typeof msg.audio_base_64 === 'string' && msg.audio_base_64.length > 0) {
      const audio = Buffer.from(msg.audio_base_64, 'base64');
      if (this.bytes + audio.byteLength > REALTIME_AUDIO_LIMIT_BYTES) {
        this.socket.send({ message_type: 'input_error', error: `Uncommitted audio would exceed ${REALTIME_AUDIO_LIMIT_BYTES} bytes (100 MiB): chunk dropped; commit first` });
      } else {
        this.pieces.push(audio);
        this.bytes += audio.byteLength;
        this.interimAudio(audio);
      }
    }
    if (msg.commit === true) this.commit();
  }

  onClose(): void {
    this.interimGen++;
    this.interimStream?.end();
    this.ac.abort(Object.assign(new Error('client closed'), { name: 'AbortError' }));
    this.pieces = [];
    this.bytes = 0;
  }

  onExpire(): void {
    this.socket.send({ message_type: 'session_time_limit_exceeded', error: 'The connection reached its lifetime limit (3600 s); open a new connection' });
    this.socket.end(LIFETIME_CLOSE.code, LIFETIME_CLOSE.reason);
  }

  private commit(): void {
    // The segment is done: its stream finishes in the background, unseen; the next gets a new one.
    this.interimStream?.end();
    this.openInterim();
    const pcm = Buffer.concat(this.pieces, this.bytes);
    this.pieces = [];
    this.bytes = 0;
    const samples = Math.floor(pcm.byteLength / 2);
    const durationMs = (samples / this.state.sampleRateHz) * 1000;
    const offsetMs = this.committedMs;
    this.committedMs += durationMs;
    this.chain = this.chain.then(() => this.transcribe(pcm.subarray(0, samples * 2), offsetMs));
  }

  private async transcribe(pcm: Buffer, offsetMs: number): Promise<void> {
    if (this.socket.closed) return;
    let t: Transcript;
    try {
      t = pcm.byteLength === 0 ? { text: '', durationMs: 0, segments: [], words: [], language: null } : await this.recognize(pcm);
    } catch (err) {
      if (this.ac.signal.aborted || this.socket.closed) return;
      const e = toServiceError(err);
      if (e.code === 'internal') this.deps.log.error({ err }, 'realtime transcription failed');
      const kind = e.status === 402 ? 'quota_exceeded' : e.status === 429 ? 'rate_limited' : e.status < 500 ? 'input_error' : 'transcriber_error';
      this.socket.send({ message_type: kind, error: e.message });
      return;
    }
    if (this.socket.closed) return;
    const shifted: Transcript = { ...t, words: t.words.map((w) => ({ text: w.text, startMs: w.startMs + offsetMs, endMs: w.endMs + offsetMs })) };
    const vendor = sttResponse(shifted, { audio: new Uint8Array(0), languageCode: this.state.languageCode, granularity: 'word' });
    this.socket.send({ message_type: 'committed_transcript', text: t.text });
    this.socket.send({ message_type: 'committed_transcript_with_timestamps', text: t.text, language_code: this.state.languageCode || null, words: vendor.words });
  }

  /**
   * The native recognition of one commit's samples, wrapped as WAV. The native minimum
   * duration (1 s) is met by padding short commits with silence at the end, which leaves
   * the transcript and the word times unchanged.
   */
  private recognize(pcm: Buffer): Promise<Transcript> {
    const rate = this.state.sampleRateHz;
    const minBytes = Math.ceil((rate * ASR_MIN_DURATION_MS) / 1000) * 2 + 2;
    const dataBytes = Math.max(pcm.byteLength, minBytes);
    const wav = new Uint8Array(44 + dataBytes);
    wav.set(wavHeader(rate, dataBytes), 0);
    wav.set(pcm, 44);
    return this.deps.asr.transcribe(this.state.teamId, wav, {
      language: this.state.languageCode || undefined,
      signal: this.ac.signal,
      requestId: this.requestId,
      traceparent: this.state.traceparent,
    });
  }
}

/** Mounts the realtime transcription socket. */
export function mountRealtimeStt(http: HttpApp, deps: RealtimeSttDeps): void {
  mountJsonSocket<SttState>(http, `${ELEVENLABS_BASE}/v1/speech-to-text/realtime`, 0, {
    log: deps.log,
    lifetimeMs: deps.timers?.lifetimeMs,
    accept: (r) => acceptRealtimeStt(r, deps),
    open: (socket, state, requestId) => new RealtimeSttSession(deps, socket, state, requestId),
  });
}
