/**
 * Transcription (`POST /v1/asr`, docs/api/asr.md): the request (multipart or MessagePack), the
 * limits, the call to the backend's Transcribe and the response shape. Other surfaces (the
 * compat families' speech-to-text) reuse `AsrService.transcribe`.
 *
 * Rules (D-ASR-1):
 * - `multipart/form-data` or `application/msgpack`; anything else, JSON included → bare 415;
 * - explicit nulls count as absent and unknown fields are ignored (as on `/v1/tts`);
 * - audio ≤ 20 MiB (413), decodable (400), 1 s to 60 min long (400); no credit → 402;
 *   over the team's speech concurrency cap → 429 (`concurrency.ts`);
 * - usage (`asr_seconds`, the decoded duration) is recorded after each transcription;
 * - the audio is decoded here and sent to the backend as 16 kHz mono PCM.
 */
import { z } from 'zod';
import { decodeAudio, int16ToPcmBytes, resampleAll } from '../audio/index.ts';
import { ServiceError, toServiceError } from '../errors.ts';
import { AudioEncoding } from '../gen/inference/v1/inference_pb.ts';
import type { InferenceClient } from '../inference/index.ts';
import type { RequestSpan, Tracing } from '../telemetry/tracing.ts';
import type { Logger } from '../log.ts';

/** Largest audio upload (docs/api/asr.md: 20 MB). */
export const ASR_MAX_AUDIO_BYTES = 20 * 1024 * 1024;
/** The route's body limit: the audio plus room for the multipart envelope and fields. */
export const ASR_BODY_LIMIT = ASR_MAX_AUDIO_BYTES + 64 * 1024;
export const ASR_MIN_DURATION_MS = 1000;
export const ASR_MAX_DURATION_MS = 60 * 60_000;
/** The rate the backend receives. */
export const ASR_SAMPLE_RATE_HZ = 16_000;
/** The recognition model id used for usage records. */
export const ASR_MODEL = 'transcribe-1';

/** A timed span in milliseconds. */
export interface TimedText {
  text: string;
  startMs: number;
  endMs: number;
}

export interface Transcript {
  text: string;
  /** Duration of the decoded upload. */
  durationMs: number;
  /** Phrase-level segments. */
  segments: TimedText[];
  words: TimedText[];
  /** The language hint as sent (null when none). */
  language: string | null;
}

export interface TranscribeOptions {
  language?: string;
  signal?: AbortSignal;
  requestId?: string;
  traceparent?: string;
}

/** Called after each successful transcription (usage records). Failures are logged, never surfaced. */
export type TranscriptionHook = (e: { teamId: string; seconds: number; model: string }) => Promise<void> | void;

export class AsrService {
  constructor(
    private readonly inference: InferenceClient,
    private readonly opts: {
      log: Logger;
      /** Refuses a team without credit (402) before any work; none: no check. */
      credit?: { ensure(teamId: string): Promise<void> };
      /** The per-team concurrency cap (429 over it), held for the whole transcription; none: no cap. */
      concurrency?: { acquire(teamId: string, signal?: AbortSignal): Promise<{ release(): void }> };
      onTranscribed?: TranscriptionHook;
      /** Request spans (a valid traceparent continues the caller's trace). */
      tracing?: Tracing;
    },
  ) {}

  /**
   * Decodes `audio` (any common format), checks the duration limits, and transcribes it with
   * the backend's Transcribe as 16 kHz mono PCM.
   */
  async transcribe(teamId: string, audio: Uint8Array, o: TranscribeOptions = {}): Promise<Transcript> {
    const span = this.opts.tracing?.startRequest('asr', o.traceparent);
    try {
      const out = await this.transcribeTraced(teamId, audio, o, span);
      span?.end();
      return out;
    } catch (err) {
      const e = toServiceError(err);
      span?.end({ status: e.status, message: e.message });
      throw err;
    }
  }

  private async transcribeTraced(teamId: string, audio: Uint8Array, o: TranscribeOptions, request: RequestSpan | undefined): Promise<Transcript> {
    await this.opts.credit?.ensure(teamId);
    const slot = await this.opts.concurrency?.acquire(teamId, o.signal);
    try {
      return await this.transcribeHeld(teamId, audio, o, request);
    } finally {
      slot?.release();
    }
  }

  private async transcribeHeld(teamId: string, audio: Uint8Array, o: TranscribeOptions, request: RequestSpan | undefined): Promise<Transcript> {
    if (audio.byteLength === 0) throw new ServiceError('bad_request', 'audio is empty');
    if (audio.byteLength > ASR_MAX_AUDIO_BYTES) throw new ServiceError('payload_too_large', `audio exceeds ${ASR_MAX_AUDIO_BYTES} bytes (20 MB)`);
    const decoded = await decodeAudio(audio);
    if (decoded.durationMs < ASR_MIN_DURATION_MS) throw new ServiceError('bad_request', 'Audio is shorter than 1 second');
    if (decoded.durationMs > ASR_MAX_DURATION_MS) throw new ServiceError('bad_request', 'Audio is longer than 60 minutes');
    const pcm = resampleAll(decoded.pcm, decoded.sampleRateHz, ASR_SAMPLE_RATE_HZ);
    const call = request?.child('inference.Transcribe', { 'parley.model': ASR_MODEL });
    const res = await this.inference
      .transcribe(
        { language: o.language ?? '', input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: ASR_SAMPLE_RATE_HZ } },
        pieces(int16ToPcmBytes(pcm)),
        { signal: o.signal, requestId: o.requestId, traceparent: call?.traceparent ?? o.traceparent, teamId },
      )
      .finally(() => call?.span.end());
    const span = (s: { text: string; startMs: number; endMs: number }): TimedText => ({ text: s.text, startMs: s.startMs, endMs: s.endMs });
    const out: Transcript = {
      text: res.text,
      durationMs: decoded.durationMs,
      segments: res.segments.map(span),
      words: res.words.map(span),
      language: o.language ?? null,
    };
    if (this.opts.onTranscribed) {
      try {
        await this.opts.onTranscribed({ teamId, seconds: decoded.durationMs / 1000, model: ASR_MODEL });
      } catch (err) {
        this.opts.log.warn({ err }, 'asr usage record failed');
      }
    }
    return out;
  }

  /**
   * Opens the backend's streaming recognition (TranscribeStream) for interim text while audio
   * arrives: the realtime speech-to-text sockets show it as partial transcripts. Nothing is
   * billed here and no concurrency slot is held: the committed transcriptions are billed and
   * capped, each through `transcribe`. A team without credit gets no interim stream (402).
   */
  async interim(teamId: string, o: InterimOptions): Promise<InterimStream> {
    await this.opts.credit?.ensure(teamId);
    const s = await this.inference.transcribeStream(
      { model: ASR_MODEL, language: o.language ?? '', input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: o.sampleRateHz } },
      { signal: o.signal, requestId: o.requestId, traceparent: o.traceparent, teamId },
    );
    async function* texts(): AsyncGenerator<string> {
      for await (const r of s) if (r.event.case === 'partial') yield r.event.value;
    }
    return { send: (pcm) => s.sendAudio(pcm), end: () => s.end(), texts: texts() };
  }
}

/** Interim recognition of a live audio stream (`AsrService.interim`). */
export interface InterimStream {
  /** Appends 16-bit mono PCM at the stream's rate (copied before it returns). */
  send(pcm: Uint8Array): void;
  /** Ends the stream (no more audio). */
  end(): void;
  /** Each interim text of the current segment (the whole segment so far), as the recognizer has it. */
  texts: AsyncIterable<string>;
}

export interface InterimOptions {
  sampleRateHz: number;
  language?: string;
  signal?: AbortSignal;
  requestId?: string;
  traceparent?: string;
}

/** gRPC messages stay small: long recordings go to the backend in 1 MiB pieces. */
const PIECE_BYTES = 1024 * 1024;
function pieces(bytes: Uint8Array): Uint8Array | AsyncIterable<Uint8Array> {
  if (bytes.byteLength <= PIECE_BYTES) return bytes;
  return (async function* () {
    for (let at = 0; at < bytes.byteLength; at += PIECE_BYTES) yield bytes.subarray(at, at + PIECE_BYTES);
  })();
}

/** Form and MessagePack booleans: true/false, and the strings a form sends. */
const boolish = z.union([z.boolean(), z.enum(['true', 'false', 'True', 'False', '1', '0']).transform((v) => v === 'true' || v === 'True' || v === '1')]);

/** `POST /v1/asr` fields after the body is read (unknown fields are dropped). */
export const asrRequestSchema = z.object({
  audio: z.instanceof(Uint8Array),
  language: z.string().max(35).optional(),
  ignore_timestamps: boolish.default(true),
});
export type AsrRequest = z.output<typeof asrRequestSchema>;

const span = z.object({ text: z.string(), start: z.number(), end: z.number() });
export const asrResponseSchema = z.object({
  text: z.string(),
  duration: z.number().meta({ description: 'Seconds' }),
  segments: z.array(span),
  language_code: z.string().nullable(),
  language: z.string().nullable(),
  words: z.array(span).optional().meta({ description: 'Only with ignore_timestamps=false' }),
});

const seconds = (ms: number) => Math.round(ms) / 1000;

/** The ISO 639-1 part of a BCP-47 hint (`en-US` → `en`), or null. */
export function languageCode(hint: string | null): string | null {
  const m = hint ? /^([A-Za-z]{2,3})(?:[-_]|$)/.exec(hint.trim()) : null;
  return m ? m[1]!.toLowerCase() : null;
}

/**
 * The response body: text, duration and segments in seconds (millisecond precision),
 * `language_code` (the recognised language: the hint's primary subtag, since the backend
 * recognises in the hinted language; null without a hint), `language` (the hint echoed),
 * and `words` when precise timestamps were asked for.
 */
export function asrResponseBody(t: Transcript, ignoreTimestamps: boolean): z.output<typeof asrResponseSchema> {
  const toSpan = (s: TimedText) => ({ text: s.text, start: seconds(s.startMs), end: seconds(s.endMs) });
  const body: z.output<typeof asrResponseSchema> = {
    text: t.text,
    duration: seconds(t.durationMs),
    segments: t.segments.map(toSpan),
    language_code: languageCode(t.language),
    language: t.language,
  };
  if (!ignoreTimestamps) body.words = t.words.map(toSpan);
  return body;
}
