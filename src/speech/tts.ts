/**
 * The synthesis service behind `POST /v1/tts`, `POST /v1/tts/stream/with-timestamp` and
 * `wss /v1/tts/live`: validation, credit, voice resolution, tracing, the backend call
 * through a synthesis-stream actor, encoding and usage.
 */
import { runSynthesis, type SynthesisOutcome } from '../../actors/synthesis.ts';
import { createEncoder, pcmBytesToInt16, type AudioEncoder } from '../audio/index.ts';
import { toServiceError } from '../errors.ts';
import type { Authenticate } from '../auth/principal.ts';
import type { AudioChunk } from '../gen/inference/v1/inference_pb.ts';
import type { InferenceClient, SynthesizeInput } from '../inference/index.ts';
import type { Logger } from '../log.ts';
import type { StreamSink } from '../sink.ts';
import type { Sql } from '../store/db.ts';
import type { RequestSpan, Tracing } from '../telemetry/tracing.ts';
import { parseSynthesisRequest, toBackendRequest, type SynthesisRequest, type VoiceResolver } from './request.ts';
import type { SpeechConcurrency, SpeechSlot } from './concurrency.ts';
import { AlignmentTracker } from './tts-alignment.ts';
import { CreditGate, recordUsage } from './usage.ts';

export interface TtsDeps {
  inference: Pick<InferenceClient, 'synthesize' | 'synthesizeStream'>;
  sql: Sql;
  log: Logger;
  tracing: Tracing;
  /** Stored voices (src/voices/service.ts `resolveVoice`, bound to the store). */
  resolveVoice: VoiceResolver;
  /** The platform's key check (for the live socket's upgrade). */
  authenticate: Authenticate;
  /** Credit check before a call; default: a CreditGate on `sql`. */
  credit?: Pick<CreditGate, 'ensure'>;
  /** The per-team concurrency cap (429 over it); none: no cap. */
  concurrency?: Pick<SpeechConcurrency, 'acquire'>;
}

/** Where a synthesis is in flight and what the backend has produced (tests, /metrics). */
export interface TtsStats {
  /** Syntheses in flight (HTTP and live). */
  active: number;
  /** Backend audio chunks received, over all calls. */
  chunksReceived: number;
  /** Backend audio bytes (PCM) received, over all calls. */
  audioBytesReceived: number;
  /** Outcomes so far. */
  done: number;
  cancelled: number;
  failed: number;
}

/** The caller of one synthesis. */
export interface Caller {
  teamId: string;
  requestId: string;
  traceparent?: string;
  signal: AbortSignal;
  /** A concurrency slot the caller already holds (the live socket takes it at the upgrade); `prepare` then takes none. */
  slot?: SpeechSlot;
}

/** A prepared call: validated request, backend request, request span. */
export interface Prepared {
  req: SynthesisRequest;
  input: SynthesizeInput;
  span: RequestSpan;
}

/** One delivery of `TtsService.synthesize`. */
export interface SynthesisPiece {
  /** The backend chunk the audio came from; null for the encoder's tail after the last chunk. */
  chunk: AudioChunk | null;
  /** Encoded audio; may be empty (the encoder buffers, or has no tail). */
  bytes: Uint8Array;
  /** The encoder's content type. */
  contentType: string;
}

export { SPEECH_AUTH_MESSAGES } from '../auth/principal.ts';

export class TtsService {
  readonly stats: TtsStats = { active: 0, chunksReceived: 0, audioBytesReceived: 0, done: 0, cancelled: 0, failed: 0 };
  readonly credit: Pick<CreditGate, 'ensure'>;

  constructor(readonly deps: TtsDeps) {
    this.credit = deps.credit ?? new CreditGate(deps.sql);
  }

  /**
   * Validates, checks credit, takes a concurrency slot and resolves voices. Errors here are
   * plain JSON answers.
   *
   * The slot is held until the call is over: every user of a `Prepared` ends its `span`
   * exactly once, when the call finished, failed or was cancelled, and ending it releases the
   * slot; so does `caller.signal` (the client went away). One acquire here covers every
   * synthesis surface: the native routes, the live socket and the compat families.
   */
  async prepare(spanName: string, raw: unknown, modelHeader: string | undefined, caller: Caller, requireText = true): Promise<Prepared> {
    const request = this.deps.tracing.startRequest(spanName, caller.traceparent);
    let slot: SpeechSlot | undefined;
    const span: RequestSpan = {
      span: request.span,
      traceId: request.traceId,
      child: (name, attributes) => request.child(name, attributes),
      end: (error) => {
        slot?.release();
        request.end(error);
      },
    };
    try {
      const req = parseSynthesisRequest(raw, modelHeader, { requireText });
      request.span.setAttributes({ 'parley.model': req.model, 'parley.format': req.format, 'parley.characters': req.characters });
      await this.credit.ensure(caller.teamId);
      slot = caller.slot ?? (await this.deps.concurrency?.acquire(caller.teamId, caller.signal));
      const input = await toBackendRequest(req, caller.teamId, this.deps.resolveVoice);
      return { req, input, span };
    } catch (err) {
      const e = toServiceError(err);
      span.end({ status: e.status, message: e.message });
      throw err;
    }
  }

  /**
   * Backend audio as encoded bytes, one array per backend chunk (possibly empty while an
   * encoder buffers). The encoder is made on the first chunk, at the rate the backend
   * answers with. Pulling drives the backend: nothing is read ahead.
   */
  async *encoded(p: Prepared, caller: Caller, signal: AbortSignal, state: { encoder?: AudioEncoder }): AsyncGenerator<{ chunk: AudioChunk; bytes: Uint8Array }> {
    const call = p.span.child('inference.Synthesize', { 'parley.model': p.req.model });
    try {
      const chunks = this.deps.inference.synthesize(p.input, { signal, traceparent: call.traceparent, requestId: caller.requestId, teamId: caller.teamId });
      for await (const chunk of chunks) {
        this.stats.chunksReceived++;
        this.stats.audioBytesReceived += chunk.audio.length;
        state.encoder ??= await this.encoderFor(p.req, chunk.sampleRateHz || p.req.sampleRateHz);
        // The chunk's audio is this call's own (a decoded gRPC message): the encoder may keep it.
        const pcm = pcmBytesToInt16(chunk.audio);
        yield { chunk, bytes: join(pcm.length ? state.encoder.push(pcm, true) : []) };
      }
    } finally {
      call.span.end();
    }
  }

  encoderFor(req: SynthesisRequest, inputSampleRateHz: number): Promise<AudioEncoder> {
    return createEncoder({ format: req.format, sampleRateHz: req.sampleRateHz, inputSampleRateHz, mp3BitrateKbps: req.body.mp3_bitrate, opusBitrate: req.opusBitrate });
  }

  /**
   * Runs one prepared synthesis through a synthesis actor: `deliver` gets each backend
   * chunk's encoded audio in order (possibly empty while the encoder buffers), then the
   * encoder's tail once (`chunk: null`, possibly empty). A promise from `deliver` holds the
   * backend back until it settles. The call is settled in every outcome: the request span
   * ends (which releases the concurrency slot) and usage is recorded once on success.
   * Resolves `done`, or `cancelled` when `caller.signal` aborted; throws the failure as a
   * `ServiceError` (logged when internal).
   */
  async synthesize(p: Prepared, caller: Caller, deliver: (piece: SynthesisPiece) => Promise<void> | void): Promise<'done' | 'cancelled'> {
    const state: { encoder?: AudioEncoder } = {};
    this.stats.active++;
    const { result } = runSynthesis<{ chunk: AudioChunk; bytes: Uint8Array }>(
      {
        open: (signal) => this.encoded(p, caller, signal, state),
        // `encoded` makes the encoder before its first chunk.
        deliver: ({ chunk, bytes }) => deliver({ chunk, bytes, contentType: state.encoder!.contentType }),
        finish: async () => {
          state.encoder ??= await this.encoderFor(p.req, p.req.sampleRateHz);
          await deliver({ chunk: null, bytes: join(state.encoder.end()), contentType: state.encoder.contentType });
        },
      },
      caller.signal,
    );
    const r = await result;
    this.stats.active--;
    this.stats[r.outcome]++;
    if (r.outcome === 'done') {
      p.span.end();
      void recordUsage(this.deps.sql, { teamId: caller.teamId, kind: 'tts_characters', amount: p.req.characters, model: p.req.model }, this.deps.log, { later: true });
      return 'done';
    }
    if (r.outcome === 'cancelled') {
      p.span.end({ status: 499, message: 'client closed the request' });
      return 'cancelled';
    }
    const e = toServiceError(r.error);
    p.span.end({ status: e.status, message: e.message });
    if (e.code === 'internal') this.deps.log.error({ err: r.error }, 'synthesis failed');
    throw e;
  }

  /**
   * Runs one streamed synthesis into `sink` with backpressure: audio bytes (`audio`), or
   * alignment events (`sse`: a `message` event per chunk). Resolves when it ends; throws
   * when it failed before the first byte (the caller answers an error) or, in audio mode,
   * after it (the caller destroys the body); in event mode a failure after the first byte
   * is an `error` event, then the stream ends.
   */
  async stream(p: Prepared, caller: Caller, sink: StreamSink, mode: 'audio' | 'sse'): Promise<SynthesisOutcome> {
    const tracker = mode === 'sse' ? new AlignmentTracker(p.req.body.text, p.req.body.chunk_length) : null;
    const send = (bytes: Uint8Array, chunk: AudioChunk | null): Promise<void> | undefined =>
      tracker ? sink.event('message', tracker.event(chunk, bytes)) : sink.bytes(bytes);
    const end = async (tail: Uint8Array) => {
      if (tail.length || tracker) await send(tail, null);
      sink.close();
    };
    try {
      return await this.synthesize(p, caller, ({ chunk, bytes, contentType }) => {
        sink.open(contentType);
        return chunk ? send(bytes, chunk) : end(bytes);
      });
    } catch (err) {
      const e = toServiceError(err);
      if (tracker && sink.started && !sink.aborted) {
        await sink.event('error', { status: e.status, message: e.message });
        sink.close();
        return 'failed';
      }
      throw e;
    }
  }
}

/** One buffer from several (no copy for one). */
export function join(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  if (parts.length === 0) return EMPTY;
  return Buffer.concat(parts);
}
const EMPTY = new Uint8Array(0);

