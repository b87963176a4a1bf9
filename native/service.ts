// The native backend's implementation of inference.v1.InferenceService.
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { create } from '@bufbuild/protobuf';
import {
  AudioEncoding,
  CapabilitiesResponseSchema,
  CommittedSchema,
  DesignedVoiceSchema,
  DesignVoiceResponseSchema,
  EngineHealthSchema,
  FinishReason,
  FinishSchema,
  GenerateResponseSchema,
  HealthResponseSchema,
  LimitsSchema,
  ModelInfoSchema,
  ModelKind,
  OutputFormatInfoSchema,
  SaveVoiceResponseSchema,
  SegmentSchema,
  ServingStatus,
  SpeechEventSchema,
  FlushSchema,
  SynthesizeRequestSchema,
  SynthesizeStreamResponseSchema,
  SynthesizeStreamsOutputSchema,
  SynthesizeStreamsResponseSchema,
  ToolCallSchema,
  TranscribeResponseSchema,
  TranscribeStreamResponseSchema,
  TranscribeStreamsOutputSchema,
  TranscribeStreamsResponseSchema,
  StreamStatusSchema,
  TranscribeConfigSchema,
  UsageSchema,
  VoiceInfoSchema,
  GenerateRequestSchema,
  GenerateStreamsOutputSchema,
  GenerateStreamsResponseSchema,
  type AudioChunk,
  type DesignVoiceRequest,
  type GenerateRequest,
  type GenerateResponse,
  type GenerateStreamsOutput,
  type GenerateStreamsRequest,
  type SynthesizeRequest,
  type SynthesizeStreamRequest,
  type SynthesizeStreamResponse,
  type SynthesizeStreamsOutput,
  type SynthesizeStreamsRequest,
  type TranscribeConfig,
  type TranscribeStreamResponse,
  type TranscribeStreamRequest,
  type TranscribeStreamsOutput,
  type TranscribeStreamsRequest,
} from '../src/gen/inference/v1/inference_pb.ts';
import type { InferenceServiceHandlers } from '../src/inference/grpc-service.ts';
import { bytesToPcm, parseWav, pcmBytes, wavHeader } from './audio.ts';
import { runScripted } from './engines/scripted.ts';
import { cutSentences } from './sentences.ts';
import { createStreamRecognizer, MissingEngineError, type Recognized, type StreamEvent } from './engines/synthetic-engine.ts';
import type { SpeechEngine, Timed } from './engines/types.ts';
import { segmentText, SpeechTimeline, speechStats, type Pacing } from './speech.ts';
import { invalid, StatusError } from './status.ts';
import type { Providers } from './providers/index.ts';
import { SegmentSpeaker, type LiveSpeaker } from './providers/speech.ts';
import { ProviderTimeline } from './providers/timeline.ts';
import type { StreamTranscriber } from './providers/transcription.ts';

/** Model names the native backend serves. */
export const SPEECH_MODELS = ['s2.1-pro', 's2.1-pro-free', 's2-pro', 's1'];
export const TRANSCRIPTION_MODELS = ['transcribe-1'];
/**
 * Chat models: the platform's agent tiers (served by the chat provider when one is set, else the
 * scripted model) and `scripted` itself, whatever the setting.
 */
export const CHAT_TIERS = ['llm-instant', 'llm-medium', 'llm-high'];
export const CHAT_MODELS = [...CHAT_TIERS, 'scripted'];
/** The voice-design model name: designs for what serves the speech models. */
export const VOICE_DESIGN_MODELS = ['voice-design-1'];
export const LIMITS = { maxTextChars: 20_000, maxAudioMs: 30 * 60_000, maxMessageBytes: 64 * 1024 * 1024 };

/** One recognition stream as its call (or its TranscribeStreams stream) drives it. */
interface RecognitionStream {
  /** A request event: the config (first), audio, commit. */
  input(ev: TranscribeStreamRequest['event']): void;
  /** Half-close: the pending events, then `done`. */
  end(): void;
  /** The caller gave up: stops without a status. */
  cancel(): void;
}

/** One live synthesis stream as its call (or its SynthesizeStreams stream) drives it. */
interface SynthesisStream {
  /** A request event: the config (first), text, flush. */
  input(ev: SynthesizeStreamRequest['event']): void;
  /** Half-close: what is left is spoken, then `done`. */
  end(): void;
  /** The caller gave up: stops without a status. */
  cancel(): void;
}

/** A realtime recognizer: PCM pushed in pieces of any size, events out (see StreamDecoder). */
export type StreamRecognizer = ReturnType<typeof createStreamRecognizer>;

export interface ServiceOptions {
  /** The engine behind SPEECH_MODELS (PARLEY_SPEECH_ENGINE). */
  speech: SpeechEngine;
  /** Every engine by name; the model names `espeak` and `synthetic` select one directly. */
  engines: Record<string, SpeechEngine>;
  /** Whole-recording recognition (the synthetic engine's recognizer). */
  recognize: (pcm: Int16Array, sampleRateHz: number) => Promise<Recognized>;
  /**
   * Offers TranscribeStreams (many recognition streams over one call) in Capabilities (default
   * true). false: not listed, so the platform keeps one TranscribeStream call per stream (the
   * handler still answers, as the contract allows for an unlisted RPC a caller tries anyway).
   */
  multiplexRecognition?: boolean;
  /** Offers SynthesizeStreams (many synthesis streams over one call) in Capabilities (default true); as multiplexRecognition. */
  multiplexSynthesis?: boolean;
  /** Offers GenerateStreams (many generations over one call) in Capabilities (default true); as multiplexRecognition. */
  multiplexGeneration?: boolean;
  /** The realtime recognizer of each TranscribeStream call (default: the synthetic engine's). */
  streamRecognizer?: (sampleRateHz: number) => StreamRecognizer;
  pacing: Pacing;
  /** Audio per chunk, in milliseconds. */
  chunkMs: number;
  /** Calls served at once; more get RESOURCE_EXHAUSTED. */
  maxConcurrentCalls: number;
  /** Observes every call with the metadata the platform sends (for logs and tests). */
  onCall?: (info: CallInfo) => void;
  /** Observes when this backend did the parts of a conversation's turn (PARLEY_BACKEND_TIMINGS). */
  onTiming?: (t: CallTiming) => void;
  /** Provider engines (docs/providers.md); each capability set replaces the built-in engine behind the default models. */
  providers?: Providers;
  /** Health of the speech detector in front of transcription providers, when there is one. */
  detectorHealth?: () => { ok: boolean; detail: string };
  logger: Logger;
}

/**
 * When the backend did its part of a turn, in ms since the epoch, keyed by the call's
 * `x-request-id` (the platform sends the session id there). bench/sessions.ts takes these
 * from the platform's turn timelines to measure what the platform adds between them.
 * - `transcribeStream`: an end of speech at stream position `atMs`: the audio at that position
 *   arrived at `heardAt`, the event was written at `sentAt` (none when that audio is older than
 *   the last 128–256 pieces received).
 * - `generate`: the call arrived at `receivedAt`; each text delta was written at `textAt[i]`.
 * - `synthesizeStream`: its first text arrived at `textAt`, its first audio was written at `audioAt`.
 */
export type CallTiming =
  | { rpc: 'transcribeStream'; requestId: string; atMs: number; heardAt: number; sentAt: number }
  | { rpc: 'generate'; requestId: string; receivedAt: number; textAt: number[] }
  | { rpc: 'synthesizeStream'; requestId: string; textAt: number; audioAt: number };

/** The backend process's event-loop delay since it started, written beside the call timings. */
export interface LoopTiming {
  rpc: 'loop';
  at: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/** What a call's metadata says about it. */
export interface CallInfo {
  rpc: string;
  traceparent: string;
  requestId: string;
  teamId: string;
  /** The request message of a call with one request (synthesize, generate), or Transcribe's config, as decoded. */
  request?: unknown;
}

/** A request header's first value, or '' (the platform's `traceparent`, `x-request-id`, `x-team-id`). */
const header = (md: grpc.Metadata, k: string) => String(md.get(k)[0] ?? '');
const requestIdOf = (md: grpc.Metadata) => header(md, 'x-request-id');
/** An input or output event of a shared call's stream (a oneof case and its value). */
type SharedEvent = { case: string | undefined; value?: unknown };
/** How a stream of a shared call sends: its outputs, the call's drain, its failure status, its OK status. */
interface SharedIo { out(event: SharedEvent): void; drained(): Promise<void> | null; fail(err: unknown): void; done(): void }

/** The metadata a TranscribeStream call would carry, for a stream of a TranscribeStreams call (observed as its own call). */
function streamMetadata(requestId: string, teamId: string, traceparent: string): grpc.Metadata {
  const md = new grpc.Metadata();
  if (requestId) md.set('x-request-id', requestId);
  if (teamId) md.set('x-team-id', teamId);
  if (traceparent) md.set('traceparent', traceparent);
  return md;
}

export { StatusError };

function toStatus(err: unknown): StatusError {
  if (err instanceof StatusError) return err;
  if (err instanceof MissingEngineError) return new StatusError(grpc.status.UNIMPLEMENTED, err.message);
  if (err instanceof Error && err.name === 'AbortError') return new StatusError(grpc.status.CANCELLED, 'cancelled');
  return new StatusError(grpc.status.INTERNAL, err instanceof Error ? err.message : String(err));
}

/** Sends a status error on any kind of server call. */
function fail(call: { emit(e: 'error', err: grpc.ServiceError): unknown; cancelled?: boolean }, err: unknown) {
  if (call.cancelled) return;
  const s = toStatus(err);
  call.emit('error', Object.assign(new Error(s.details), { code: s.code, details: s.details, metadata: s.metadata() }));
}

/** Writes with backpressure; rejects when the call was cancelled. */
function writer<T>(call: grpc.ServerWritableStream<unknown, T> | grpc.ServerDuplexStream<unknown, T>, signal: AbortSignal) {
  return async (msg: T) => {
    signal.throwIfAborted();
    if (!call.write(msg)) {
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
        call.once('drain', () => { signal.removeEventListener('abort', onAbort); resolve(); });
      });
    }
  };
}

/** The call's gRPC deadline in epoch ms, or undefined when it has none. */
function deadlineOf(call: { getDeadline(): grpc.Deadline }): number | undefined {
  const d = call.getDeadline();
  const ms = d instanceof Date ? d.getTime() : Number(d);
  return Number.isFinite(ms) ? ms : undefined;
}

function abortOn(call: { on(event: 'cancelled', listener: () => void): unknown }): AbortController {
  const ac = new AbortController();
  call.on('cancelled', () => ac.abort(Object.assign(new Error('cancelled'), { name: 'AbortError' })));
  return ac;
}

export function createService(o: ServiceOptions): { handlers: InferenceServiceHandlers; stats: () => { activeCalls: number; segmentsSynthesized: number } } {
  let activeCalls = 0;
  /** Sends the error to the caller; internal failures are logged. */
  const report = (call: Parameters<typeof fail>[0], err: unknown) => {
    if (toStatus(err).code === grpc.status.INTERNAL) o.logger.error({ err }, 'engine failed');
    fail(call, err);
  };
  const observe = (rpc: string, md: grpc.Metadata, request?: unknown) => {
    const info = { rpc, traceparent: header(md, 'traceparent'), requestId: requestIdOf(md), teamId: header(md, 'x-team-id') };
    o.logger.debug(info, 'call');
    o.onCall?.(request === undefined ? info : { ...info, request });
  };

  /** Counts a call for the concurrency limit and Health; returns its release. */
  function admit(): () => void {
    if (activeCalls >= o.maxConcurrentCalls) throw new StatusError(grpc.status.RESOURCE_EXHAUSTED, 'backend at its concurrency limit');
    activeCalls++;
    let done = false;
    return () => { if (!done) { done = true; activeCalls--; } };
  }

  const speechProvider = o.providers?.speech;
  const transcriptionProvider = o.providers?.transcription;
  const chatProvider = o.providers?.chat;

  /**
   * One generation, as a Generate call or a stream of a GenerateStreams call runs it: checks the
   * request, takes a slot of the concurrency limit, and writes its text deltas, tool calls and
   * finish through `io.write` (awaited: the call's or the shared call's backpressure).
   */
  async function generation(
    req: GenerateRequest,
    io: { requestId: string; signal: AbortSignal; deadline: number | undefined; write(event: GenerateResponse['event']): Promise<void> | void },
  ): Promise<void> {
    const receivedAt = Date.now();
    const release = admit();
    try {
      const viaProvider = !!chatProvider && (!req.model || CHAT_TIERS.includes(req.model) || req.model === chatProvider.provider.settings.model);
      if (req.model && !viaProvider && !CHAT_MODELS.includes(req.model)) throw new StatusError(grpc.status.NOT_FOUND, `Model not found: ${req.model}`);
      if (req.messages.length === 0 && !req.structured) throw invalid('messages: must not be empty');
      if (req.structured) {
        try { JSON.parse(req.structured.jsonSchema); } catch { throw invalid('structured.json_schema: not valid JSON'); }
      }
      for (const [i, t] of req.tools.entries()) {
        if (!t.name) throw invalid(`tools.${i}.name: required`);
        if (t.parametersJsonSchema) { try { JSON.parse(t.parametersJsonSchema); } catch { throw invalid(`tools.${i}.parameters_json_schema: not valid JSON`); } }
      }
      const textAt: number[] = [];
      const finish = (r: string, inputTokens: number, outputTokens: number) => {
        const reason = r === 'tool_calls' ? FinishReason.TOOL_CALLS : r === 'length' ? FinishReason.LENGTH : FinishReason.STOP;
        return io.write({ case: 'finish', value: create(FinishSchema, { reason, usage: create(UsageSchema, { inputTokens, outputTokens }) }) });
      };
      if (viaProvider) {
        for await (const e of chatProvider!.generate(req, { signal: io.signal, deadline: io.deadline })) {
          if (e.type === 'text') {
            if (o.onTiming) textAt.push(Date.now());
            await io.write({ case: 'textDelta', value: e.text });
          } else if (e.type === 'tool_call') {
            await io.write({ case: 'toolCall', value: create(ToolCallSchema, { id: e.id, name: e.name, argumentsJson: e.argumentsJson }) });
          } else await finish(e.reason, e.inputTokens, e.outputTokens);
        }
      } else {
        const r = runScripted({ messages: req.messages, tools: req.tools, toolChoice: req.toolChoice, structuredSchema: req.structured?.jsonSchema, maxTokens: req.maxTokens });
        for (const e of r.events) {
          if (e.textDelta !== undefined) {
            if (o.onTiming) textAt.push(Date.now());
            await io.write({ case: 'textDelta', value: e.textDelta });
          } else if (e.toolCall) await io.write({ case: 'toolCall', value: create(ToolCallSchema, e.toolCall) });
        }
        await finish(r.finish, r.inputTokens, r.outputTokens);
      }
      o.onTiming?.({ rpc: 'generate', requestId: io.requestId, receivedAt, textAt });
    } finally {
      release();
    }
  }

  function speechEngineFor(model: string): SpeechEngine | 'provider' {
    if (speechProvider && (!model || SPEECH_MODELS.includes(model) || model === speechProvider.provider.settings.model)) return 'provider';
    if (!model || SPEECH_MODELS.includes(model)) return o.speech;
    const e = o.engines[model];
    if (e) return e;
    throw new StatusError(grpc.status.NOT_FOUND, `Model not found: ${model}`);
  }

  /** Validates a synthesis configuration; returns the engine and the per-call options. */
  function speechConfig(req: SynthesizeRequest, streaming: boolean) {
    const engine = speechEngineFor(req.model);
    if (!streaming && !req.text.trim()) throw invalid('text: must not be empty');
    if (Array.from(req.text).length > LIMITS.maxTextChars) throw invalid(`text: at most ${LIMITS.maxTextChars} characters`);
    const voice = req.referenceId;
    if (engine === 'provider') {
      // The provider's voices are its own: an unknown one is refused by the provider (NOT_FOUND).
      if (!voice && req.references.length) throw new StatusError(grpc.status.UNIMPLEMENTED, `references: reference audio (voice cloning) is not supported by the ${speechProvider!.provider.what}; name one of its voices in reference_id, or set PARLEY_TTS_VOICE`);
    } else if (voice && !engine.voices.some((v) => v.id === voice) && !engine.acceptsVoice?.(voice)) throw new StatusError(grpc.status.NOT_FOUND, 'Reference not found');
    const speed = req.prosody?.speed || 1;
    if (speed < 0.5 || speed > 2) throw invalid('prosody.speed: must be between 0.5 and 2');
    const volumeDb = req.prosody?.volumeDb ?? 0;
    if (volumeDb < -20 || volumeDb > 20) throw invalid('prosody.volume_db: must be between -20 and 20');
    const chunkLength = req.chunkLength || 200;
    if (chunkLength < 100 || chunkLength > 300) throw invalid('chunk_length: must be between 100 and 300');
    const encoding = req.output?.encoding || AudioEncoding.PCM_S16LE;
    if (encoding !== AudioEncoding.PCM_S16LE && encoding !== AudioEncoding.WAV) throw invalid('output.encoding: this backend produces PCM_S16LE or WAV only');
    const rate = req.output?.sampleRateHz ?? 0;
    if (rate && (rate < 8000 || rate > 48000)) throw invalid('output.sample_rate_hz: must be between 8000 and 48000');
    return {
      engine,
      chunkLength,
      opts: { language: req.language, speed, voice, volumeDb, sampleRateHz: rate, encoding, chunkMs: o.chunkMs, pacing: o.pacing },
    };
  }

  /**
   * A streaming call's response headers, sent when it starts: they commit the call in the client
   * (grpc-js keeps every message written before them for a transparent retry; a recognizer's
   * first response is the first speech event, so caller audio would wait there until then).
   */
  const headersNow = (call: { sendMetadata(m: grpc.Metadata): void }) => call.sendMetadata(new grpc.Metadata());

  /** A speaker for a call served by the speech provider: its own live socket, or a request per segment. */
  function providerSpeaker(deadline: number | undefined, ac: AbortController, opts: ReturnType<typeof speechConfig>['opts'], chunkLength: number, write: (c: AudioChunk) => Promise<void>, live: boolean): LiveSpeaker {
    const sp = speechProvider!;
    const timeline = new ProviderTimeline({ sampleRateHz: opts.sampleRateHz, encoding: opts.encoding, chunkMs: opts.chunkMs, volumeDb: opts.volumeDb, speed: opts.speed });
    const scope = { signal: ac.signal, deadline };
    const po = { voice: opts.voice, speed: opts.speed, language: opts.language, sampleRateHz: opts.sampleRateHz };
    if (live && sp.live) return sp.live(po, timeline, scope, write);
    return new SegmentSpeaker(sp, po, timeline, scope, write, chunkLength, live);
  }

  /**
   * Who designs voices for a DesignVoice/SaveVoice model: the default (`voice-design-1`, empty,
   * or a speech model id) designs for what serves the speech models (the speech provider, else
   * the PARLEY_SPEECH_ENGINE engine); an engine's name (`espeak`) for that engine.
   */
  function designerFor(model: string): SpeechEngine | 'provider' {
    if (!model || VOICE_DESIGN_MODELS.includes(model) || SPEECH_MODELS.includes(model)) return speechProvider ? 'provider' : o.speech;
    if (speechProvider && model === speechProvider.provider.settings.model) return 'provider';
    const e = o.engines[model];
    if (e) return e;
    throw new StatusError(grpc.status.NOT_FOUND, `Model not found: ${model}`);
  }

  const cannotDesign = (who: string) =>
    new StatusError(grpc.status.UNIMPLEMENTED, `voice design: the ${who} cannot vary its voice; voice design needs the espeak engine (PARLEY_SPEECH_ENGINE=espeak, or the model espeak) or an ElevenLabs speech provider`);

  /** Validates a DesignVoice request (the contract's ranges). */
  function designRequest(req: DesignVoiceRequest) {
    if (!req.description.trim()) throw invalid('description: must not be empty');
    if (Array.from(req.description).length > 2000) throw invalid('description: at most 2000 characters');
    if (Array.from(req.text).length > 1000) throw invalid('text: at most 1000 characters');
    const count = req.count || 2;
    if (count < 1 || count > 4) throw invalid('count: must be between 1 and 4');
    const speed = req.speed || 1;
    if (!(speed > 0 && speed <= 3)) throw invalid('speed: must be above 0 and at most 3');
    const encoding = req.output?.encoding || AudioEncoding.PCM_S16LE;
    if (encoding !== AudioEncoding.PCM_S16LE && encoding !== AudioEncoding.WAV) throw invalid('output.encoding: this backend produces PCM_S16LE or WAV only');
    const rate = req.output?.sampleRateHz ?? 0;
    if (rate && (rate < 8000 || rate > 48000)) throw invalid('output.sample_rate_hz: must be between 8000 and 48000');
    return {
      encoding,
      design: {
        description: req.description.trim(), text: req.text.trim(), language: req.language, count, speed, sampleRateHz: rate,
        ...(req.seed !== undefined ? { seed: Number(BigInt.asUintN(32, req.seed)) } : {}),
      },
    };
  }

  /**
   * One realtime recognition stream: a TranscribeStream call, or one stream of a
   * TranscribeStreams call. Takes a slot of the concurrency limit (RESOURCE_EXHAUSTED when there
   * is none: thrown). `write` sends an event (in order; a promise is waited for before the next),
   * `fail` ends the stream with an error status, `done` after the last event of a half-closed one.
   */
  function recognitionStream(io: {
    requestId: string;
    write(event: TranscribeStreamResponse['event']): Promise<void> | void;
    fail(err: unknown): void;
    done(): void;
  }): RecognitionStream {
    const release = admit();
    const ac = new AbortController();
    let decoder: StreamRecognizer | null = null;
    let rateHz = 0;
    let chain = Promise.resolve();
    // Timing (only when observed): when the audio up to each stream position arrived, for the
    // last few seconds (end positions in ms, arrival times), and when each end of speech left.
    const timed = o.onTiming;
    let heardMs = 0;
    const arrivals: [number, number][] = [];
    // A position's arrival: the arrival of the piece holding it, less the audio after it in
    // that piece; null when that piece is no longer kept (or not yet heard).
    let dropped = 0; // the end of the last piece no longer kept
    const heardAt = (atMs: number) => {
      const i = arrivals.findIndex(([e]) => e >= atMs);
      const start = i > 0 ? arrivals[i - 1][0] : dropped;
      return i < 0 || start > atMs ? null : arrivals[i][1] - (arrivals[i][0] - atMs);
    };
    // A stopped stream writes nothing more (its events already queued are dropped).
    const write = (event: TranscribeStreamResponse['event']) => (ac.signal.aborted ? undefined : io.write(event));
    const then = (f: () => Promise<void> | void) => {
      chain = chain.then(f);
      // A write that failed (the call gone) is handled where the stream ends (`end`), or never
      // matters (a cancelled stream): not an unhandled rejection.
      chain.catch(() => {});
    };
    const send = (events: StreamEvent[], forceCommit: boolean) => {
      let committed = false;
      for (const ev of events) {
        let out: TranscribeStreamResponse['event'];
        if (ev.type === 'speech_started') out = { case: 'speechStarted', value: create(SpeechEventSchema, { atMs: ev.atMs }) };
        else if (ev.type === 'speech_ended') out = { case: 'speechEnded', value: create(SpeechEventSchema, { atMs: ev.atMs }) };
        else if (ev.type === 'partial') out = { case: 'partial', value: ev.text };
        else {
          committed = true;
          out = { case: 'committed', value: create(CommittedSchema, { text: ev.text, words: ev.words.map((w) => create(SegmentSchema, w)) }) };
        }
        const at = timed && ev.type === 'speech_ended' ? heardAt(ev.atMs) : null;
        if (timed && at !== null && ev.type === 'speech_ended') {
          const { atMs } = ev;
          then(() => {
            timed({ rpc: 'transcribeStream', requestId: io.requestId, atMs, heardAt: at, sentAt: Date.now() });
            return write(out);
          });
        } else then(() => write(out));
      }
      if (forceCommit && !committed) then(() => write({ case: 'committed', value: create(CommittedSchema, {}) }));
    };
    let transcriber: StreamTranscriber | null = null;
    let stopped = false;
    const stop = (err: unknown) => {
      if (stopped) return;
      stopped = true;
      transcriber?.close();
      ac.abort(err);
      io.fail(err);
      release();
    };
    return {
      input(ev) {
        if (ac.signal.aborted) return;
        try {
          if (ev.case === 'config') {
            if (decoder || transcriber) throw invalid('config: only the first message may be a config');
            checkTranscriptionModel(ev.value.model);
            const enc = ev.value.input?.encoding || AudioEncoding.PCM_S16LE;
            if (enc !== AudioEncoding.PCM_S16LE) throw invalid('config.input.encoding: TranscribeStream takes PCM_S16LE frames');
            rateHz = ev.value.input?.sampleRateHz ?? 0;
            if (rateHz < 8000 || rateHz > 48000) throw invalid('config.input.sample_rate_hz: must be between 8000 and 48000');
            if (transcriptionProvider) transcriber = transcriptionProvider.stream(rateHz, ev.value.language, { signal: ac.signal }, (e) => send([e], false), stop);
            else decoder = (o.streamRecognizer ?? createStreamRecognizer)(rateHz);
          } else if (!decoder && !transcriber) {
            throw invalid('config: the first message must be a config');
          } else if (ev.case === 'audio') {
            if (timed) {
              heardMs += (ev.value.length / 2 / rateHz) * 1000;
              arrivals.push([heardMs, Date.now()]);
              if (arrivals.length > 256) dropped = arrivals.splice(0, 128)[127][0];
            }
            if (transcriber) transcriber.push(bytesToPcm(ev.value));
            else send(decoder!.push(bytesToPcm(ev.value)), false);
          } else if (ev.case === 'commit') {
            if (transcriber) transcriber.commit();
            else send(decoder!.flush(), true);
          }
        } catch (err) {
          stop(err);
        }
      },
      end() {
        if (ac.signal.aborted) return;
        if (decoder) send(decoder.flush(), false);
        const rest = transcriber ? transcriber.end().then(() => chain) : chain;
        rest.then(() => {
          if (stopped) return;
          stopped = true;
          transcriber?.close();
          io.done();
          release();
        }, (err) => stop(err));
      },
      cancel() {
        stopped = true;
        transcriber?.close();
        if (!ac.signal.aborted) ac.abort(Object.assign(new Error('cancelled'), { name: 'AbortError' }));
        release();
      },
    };
  }

  /**
   * One live synthesis stream: a SynthesizeStream call, or one stream of a SynthesizeStreams call.
   * Takes a slot of the concurrency limit (RESOURCE_EXHAUSTED through `fail` when there is none).
   * `write` sends an event (awaited before the next: backpressure), `fail` ends the stream with an
   * error status, `done` after the last chunk of a half-closed one.
   */
  function synthesisStream(io: {
    requestId: string;
    deadline: number | undefined;
    write(event: SynthesizeStreamResponse['event']): Promise<void>;
    fail(err: unknown): void;
    done(): void;
  }): SynthesisStream {
    const ac = new AbortController();
    let release = () => {};
    // Timing (only when observed): the first text's arrival and the first audio's write.
    let textAt = 0;
    let audioAt = 0;
    const timed = o.onTiming;
    // Requests are handled in order by one loop; text waits in `buffer` until a sentence
    // ends, it grows past chunk_length, a flush arrives, or the caller half-closes.
    const queue: ({ text: string } | { flush: bigint } | { end: true } | { config: SynthesizeRequest })[] = [];
    let wake: (() => void) | null = null;
    const push = (e: (typeof queue)[number]) => { queue.push(e); wake?.(); };
    let cancelled = false;
    (async () => {
      release = admit();
      let timeline: SpeechTimeline | null = null;
      let speaker: LiveSpeaker | null = null;
      let chunkLength = 200;
      let buffer = '';
      // With a speech provider, audio is written by the speaker as it comes; the first audio is timed here.
      const writeChunk = (c: AudioChunk) => {
        ac.signal.throwIfAborted();
        if (timed && !audioAt && textAt && c.audio.length) {
          audioAt = Date.now();
          timed({ rpc: 'synthesizeStream', requestId: io.requestId, textAt, audioAt });
        }
        return io.write({ case: 'chunk', value: c });
      };
      const flushed = (id: bigint) => {
        ac.signal.throwIfAborted();
        return io.write({ case: 'flushed', value: create(FlushSchema, { id }) });
      };
      const speak = async (text: string, final: boolean) => {
        if (!timeline) throw invalid('config: the first message must be a config');
        const segs = segmentText(text, chunkLength);
        if (segs.length || final) await timeline.run(segs, writeChunk, final);
      };
      ac.signal.addEventListener('abort', () => wake?.(), { once: true });
      for (;;) {
        if (queue.length === 0) await new Promise<void>((r) => (wake = r));
        wake = null;
        ac.signal.throwIfAborted();
        const e = queue.shift()!;
        if ('config' in e) {
          if (timeline || speaker) throw invalid('config: only the first message may be a config');
          if (e.config.text) throw invalid('config.text: must be empty in SynthesizeStream');
          const c = speechConfig(e.config, true);
          chunkLength = c.chunkLength;
          if (c.engine === 'provider') speaker = providerSpeaker(io.deadline, ac, c.opts, chunkLength, writeChunk, true);
          else timeline = new SpeechTimeline(c.engine, c.opts, ac.signal);
        } else if (speaker) {
          if ('text' in e) speaker.text(e.text);
          else if ('flush' in e) {
            await speaker.flush();
            await flushed(e.flush);
          } else {
            await speaker.flush(true);
            return;
          }
        } else if ('text' in e) {
          if (!timeline) throw invalid('config: the first message must be a config');
          buffer += e.text;
          // Speak complete sentences now; keep the unfinished tail.
          const segs = segmentText(buffer, chunkLength);
          const complete = cutSentences(buffer)[1] === '' ? segs : segs.slice(0, -1);
          if (complete.length) {
            const text = complete.join('');
            buffer = buffer.slice(text.length);
            await speak(text, false);
          }
        } else if ('flush' in e) {
          const text = buffer;
          buffer = '';
          await speak(text, true);
          await flushed(e.flush);
        } else {
          if (buffer) await speak(buffer, true);
          return;
        }
      }
    })()
      .then(() => { if (!cancelled) io.done(); }, (err) => { if (!cancelled) io.fail(err); })
      .finally(() => {
        release();
        // Requests a failure left behind (the segment synthesized ahead) stop here.
        if (!ac.signal.aborted) ac.abort(new Error('call ended'));
      });
    return {
      input(ev) {
        if (ev.case === 'config') push({ config: ev.value });
        else if (ev.case === 'text') {
          if (timed && !textAt) textAt = Date.now();
          push({ text: ev.value });
        } else if (ev.case === 'flush') push({ flush: ev.value.id });
      },
      end() { push({ end: true }); },
      cancel() {
        cancelled = true;
        if (!ac.signal.aborted) ac.abort(Object.assign(new Error('cancelled'), { name: 'AbortError' }));
      },
    };
  }

  /**
   * A call of many streams (TranscribeStreams, SynthesizeStreams; docs/inference.md): each input
   * goes to its stream, each stream's outputs and last status come back tagged with its id, and
   * the outputs of one I/O phase leave as one message. `kind` is what the stream kind adds: how a
   * stream is made (`make`, may throw when there is no slot) and started (`begin`, with its
   * config), its other inputs, its end and cancellation, and which inputs for a stream that is not
   * open are dropped without a status (`quiet`).
   */
  function sharedStreams<T, Req extends { inputs: { stream: bigint; event: SharedEvent }[] }, Out>(
    call: grpc.ServerDuplexStream<Req, unknown>,
    kind: {
      rpc: string;
      streamRpc: string;
      output(stream: bigint, event: SharedEvent): Out;
      response(outputs: Out[]): unknown;
      quiet(ev: Req['inputs'][number]['event']): boolean;
      /** What a stream's call would have observed as its request (generate: the GenerateRequest). */
      request?(open: Extract<Req['inputs'][number]['event'], { case: 'open' }>['value']): unknown;
      make(open: Extract<Req['inputs'][number]['event'], { case: 'open' }>['value'], io: SharedIo): T;
      begin(t: T, open: Extract<Req['inputs'][number]['event'], { case: 'open' }>['value']): void;
      input(t: T, ev: Req['inputs'][number]['event']): void;
      closed?(t: T): void;
      end(t: T): void;
      cancel(t: T): void;
    },
  ): void {
    observe(kind.rpc, call.metadata);
    headersNow(call);
    // Outputs of every stream, written as one message once the current I/O phase has run.
    let outputs: Out[] = [];
    let scheduled = false;
    // While the call's write buffer is full (the platform reads slower than the streams let the
    // backend write), a stream that waits for it (synthesis, per chunk) waits for it to drain.
    let drained: { promise: Promise<void>; resolve: () => void } | null = null;
    const flush = () => {
      scheduled = false;
      if (!outputs.length || call.cancelled || call.writableEnded) return;
      const batch = outputs;
      outputs = [];
      if (!call.write(kind.response(batch)) && !drained) {
        let resolve = () => {};
        const promise = new Promise<void>((r) => (resolve = r));
        drained = { promise, resolve };
        call.once('drain', () => { drained = null; resolve(); });
      }
    };
    const out = (stream: bigint, event: SharedEvent) => {
      outputs.push(kind.output(stream, event));
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    };
    const streams = new Map<bigint, T>();
    // Ids increase on the call (docs/inference.md): a stream has ended iff its id is at most the
    // highest used and it is no longer open, so that a late input for one is not taken as a new
    // stream without a set of ended ids growing with the call.
    let highest = 0n;
    const ended = (id: bigint) => id <= highest && !streams.has(id);
    const close = (id: bigint) => {
      const t = streams.get(id);
      streams.delete(id);
      if (t !== undefined) kind.closed?.(t);
    };
    /** Ends the stream with `err` as its status, whether or not it was open. */
    const report = (id: bigint, err: unknown) => {
      if (id > highest) highest = id;
      close(id);
      const st = toStatus(err);
      if (st.code === grpc.status.INTERNAL) o.logger.error({ err }, 'engine failed');
      out(id, { case: 'status', value: create(StreamStatusSchema, { code: st.code, message: st.details }) });
    };
    const status = (id: bigint, err: unknown) => {
      if (!ended(id)) report(id, err);
    };
    call.on('data', (m: Req) => {
      for (const input of m.inputs) {
        const id = input.stream;
        const ev = input.event;
        const open = streams.get(id);
        if (ev.case === 'open') {
          if (open !== undefined) {
            // Its status ends it: nothing of it may follow.
            report(id, invalid('open: the stream is already open'));
            kind.cancel(open);
            continue;
          }
          if (id <= highest) {
            report(id, invalid('open: stream ids must increase on the call'));
            continue;
          }
          highest = id;
          const v = ev.value as Extract<Req['inputs'][number]['event'], { case: 'open' }>['value'];
          const meta = v as unknown as { requestId: string; teamId: string; traceparent: string };
          observe(kind.streamRpc, streamMetadata(meta.requestId, meta.teamId, meta.traceparent), kind.request?.(v));
          try {
            const t = kind.make(v, {
              out: (event) => out(id, event),
              drained: () => drained?.promise ?? null,
              fail: (err) => status(id, err),
              done: () => {
                if (ended(id)) return;
                close(id);
                out(id, { case: 'status', value: create(StreamStatusSchema, { code: grpc.status.OK, message: '' }) });
              },
            });
            streams.set(id, t);
            kind.begin(t, v);
          } catch (err) {
            // Opening failed (no slot): the stream never was open, and ends with this status.
            if (!streams.has(id)) report(id, err);
            else status(id, err);
          }
        } else if (open === undefined) {
          // An input for a stream that ended (a cancel crossing its status, audio or text after a
          // failure) is dropped; one for an id never opened is an error of that stream.
          if (!ended(id) && !kind.quiet(ev)) report(id, invalid('open: the first input of a stream must be open'));
        } else if (ev.case === 'end') kind.end(open);
        else if (ev.case === 'cancel') {
          close(id);
          kind.cancel(open);
        } else kind.input(open, ev);
      }
    });
    const stopAll = () => {
      for (const [id, t] of streams) {
        close(id);
        kind.cancel(t);
      }
      drained?.resolve();
    };
    call.on('end', () => {
      // The caller half-closed the call: every open stream ends as if half-closed, then the call.
      for (const t of streams.values()) kind.end(t);
      const finish = () => (streams.size ? setTimeout(finish, 10) : setImmediate(() => { flush(); if (!call.cancelled) call.end(); }));
      finish();
    });
    call.on('cancelled', stopAll);
    call.on('error', stopAll);
  }

  const handlers: InferenceServiceHandlers = {
    synthesize(call) {
      observe('synthesize', call.metadata, call.request);
      const ac = abortOn(call);
      let release = () => {};
      (async () => {
        release = admit();
        const { engine, opts, chunkLength } = speechConfig(call.request, false);
        if (engine === 'provider') {
          const speaker = providerSpeaker(deadlineOf(call), ac, opts, chunkLength, writer(call, ac.signal), false);
          speaker.text(call.request.text);
          await speaker.flush();
          call.end();
          return;
        }
        const timeline = new SpeechTimeline(engine, opts, ac.signal);
        await timeline.run(segmentText(call.request.text, chunkLength), writer(call, ac.signal), true);
        call.end();
      })()
        .catch((err) => report(call, err))
        .finally(() => {
          release();
          // Requests a failure left behind (the segment synthesized ahead) stop here.
          if (!ac.signal.aborted) ac.abort(new Error('call ended'));
        });
    },

    synthesizeStream(call) {
      observe('synthesizeStream', call.metadata);
      headersNow(call);
      const write = writer(call, abortOn(call).signal);
      const stream = synthesisStream({
        requestId: requestIdOf(call.metadata),
        deadline: deadlineOf(call),
        write: (event) => write(create(SynthesizeStreamResponseSchema, { event })),
        fail: (err) => report(call, err),
        done: () => call.end(),
      });
      call.on('data', (m: SynthesizeStreamRequest) => stream.input(m.event));
      call.on('end', () => stream.end());
      call.on('cancelled', () => stream.cancel());
    },

    synthesizeStreams(call) {
      /** A stream: its synthesis, the audio bytes it may still send, and a write waiting for credit. */
      interface Open { s: SynthesisStream; credit: number; waiting: (() => void)[]; stopped: boolean }
      const stopped = () => Object.assign(new Error('cancelled'), { name: 'AbortError' });
      sharedStreams<Open, SynthesizeStreamsRequest, SynthesizeStreamsOutput>(call, {
        rpc: 'synthesizeStreams',
        streamRpc: 'synthesizeStream',
        output: (stream, event) => create(SynthesizeStreamsOutputSchema, { stream, event: event as SynthesizeStreamsOutput['event'] }),
        response: (outputs) => create(SynthesizeStreamsResponseSchema, { outputs }),
        // A credit crossing a stream's status is dropped as a cancel is.
        quiet: (ev) => ev.case === 'cancel' || ev.case === 'credit',
        make(v, io) {
          const st: Open = { s: null as unknown as SynthesisStream, credit: v.credit, waiting: [], stopped: false };
          st.s = synthesisStream({
            requestId: v.requestId,
            deadline: undefined,
            write: async (event) => {
              if (event.case === 'chunk' && event.value.audio.length) {
                // Held back until the caller grants credit (a chunk may overrun what is left).
                while (st.credit <= 0 && !st.stopped) await new Promise<void>((r) => st.waiting.push(r));
                st.credit -= event.value.audio.length;
              }
              if (st.stopped) throw stopped();
              io.out(event);
              const drained = io.drained();
              if (drained) await drained;
            },
            fail: io.fail,
            done: io.done,
          });
          return st;
        },
        begin: (st, v) => st.s.input({ case: 'config', value: v.config ?? create(SynthesizeRequestSchema) }),
        input(st, ev) {
          if (ev.case === 'text') st.s.input(ev);
          else if (ev.case === 'flush') st.s.input(ev);
          else if (ev.case === 'credit') {
            st.credit += ev.value;
            for (const w of st.waiting.splice(0)) w();
          }
        },
        closed(st) {
          st.stopped = true;
          for (const w of st.waiting.splice(0)) w();
        },
        end: (st) => st.s.end(),
        cancel: (st) => st.s.cancel(),
      });
    },

    transcribe(call, callback) {
      // Observed with its config (the first message), or without one at the end if none came.
      let observed = false;
      let config: TranscribeConfig | undefined;
      const parts: Uint8Array[] = [];
      let size = 0;
      let release = () => {};
      let failed = false;
      const ac = abortOn(call);
      try {
        release = admit();
      } catch (err) {
        failed = true;
        callback(toGrpcError(err));
      }
      call.on('data', (m) => {
        if (!config && m.config) config = m.config;
        if (!observed) {
          observed = true;
          observe('transcribe', call.metadata, config);
        }
        if (failed || !m.audio.length) return;
        parts.push(m.audio);
        size += m.audio.length;
        // 30 minutes of 48 kHz 16-bit audio; more is refused before it fills the memory.
        if (size > (LIMITS.maxAudioMs / 1000) * 48000 * 2) {
          failed = true;
          parts.length = 0;
          release();
          callback(toGrpcError(invalid('audio: longer than the backend accepts')));
        }
      });
      call.on('end', async () => {
        if (!observed) {
          observed = true;
          observe('transcribe', call.metadata);
        }
        if (failed) return;
        try {
          if (!config) throw invalid('config: the first message must carry a config');
          checkTranscriptionModel(config.model);
          const all = new Uint8Array(size);
          let off = 0;
          for (const p of parts) { all.set(p, off); off += p.length; }
          const { pcm, sampleRateHz } = decodeInput(config, all);
          if ((pcm.length / sampleRateHz) * 1000 > LIMITS.maxAudioMs) throw invalid('audio: longer than the backend accepts');
          const durationMs = (pcm.length / sampleRateHz) * 1000;
          const r: Recognized & { segments?: Timed[] } = transcriptionProvider
            ? { durationMs, ...(await transcriptionProvider.transcribe(pcm, sampleRateHz, config.language, { signal: ac.signal, deadline: deadlineOf(call) })) }
            : await o.recognize(pcm, sampleRateHz);
          const seg = (t: Timed) => create(SegmentSchema, { text: t.text, startMs: Math.min(t.startMs, durationMs), endMs: Math.min(t.endMs, durationMs) });
          const segments = r.segments?.length ? r.segments : r.words.length ? [{ text: r.text, startMs: r.words[0].startMs, endMs: r.words[r.words.length - 1].endMs }] : [];
          callback(null, create(TranscribeResponseSchema, { text: r.text, durationMs: r.durationMs, words: r.words.map(seg), segments: segments.map(seg), language: config.language }));
        } catch (err) {
          if (!ac.signal.aborted) callback(toGrpcError(err));
        } finally {
          release();
          if (!ac.signal.aborted) ac.abort(new Error('call ended'));
        }
      });
      call.on('cancelled', () => release());
    },

    transcribeStream(call) {
      observe('transcribeStream', call.metadata);
      headersNow(call);
      const write = writer(call, abortOn(call).signal);
      let stream: RecognitionStream;
      try {
        stream = recognitionStream({
          requestId: requestIdOf(call.metadata),
          write: (event) => (call.cancelled ? undefined : write(create(TranscribeStreamResponseSchema, { event }))),
          fail: (err) => report(call, err),
          done: () => call.end(),
        });
      } catch (err) {
        report(call, err);
        return;
      }
      call.on('data', (m) => stream.input(m.event));
      call.on('end', () => stream.end());
      call.on('cancelled', () => stream.cancel());
    },

    transcribeStreams(call) {
      sharedStreams<RecognitionStream, TranscribeStreamsRequest, TranscribeStreamsOutput>(call, {
        rpc: 'transcribeStreams',
        streamRpc: 'transcribeStream',
        output: (stream, event) => create(TranscribeStreamsOutputSchema, { stream, event: event as TranscribeStreamsOutput['event'] }),
        response: (outputs) => create(TranscribeStreamsResponseSchema, { outputs }),
        quiet: (ev) => ev.case === 'cancel',
        make: (v, io) => recognitionStream({ requestId: v.requestId, write: io.out, fail: io.fail, done: io.done }),
        begin: (s, v) => s.input({ case: 'config', value: v.config ?? create(TranscribeConfigSchema) }),
        input(s, ev) {
          if (ev.case === 'audio') s.input(ev);
          else if (ev.case === 'commit') s.input(ev);
        },
        end: (s) => s.end(),
        cancel: (s) => s.cancel(),
      });
    },

    generate(call) {
      observe('generate', call.metadata, call.request);
      const ac = abortOn(call);
      const write = writer(call, ac.signal);
      generation(call.request, { requestId: requestIdOf(call.metadata), signal: ac.signal, deadline: deadlineOf(call), write: (event) => write(create(GenerateResponseSchema, { event })) })
        .then(() => call.end(), (err) => report(call, err))
        .finally(() => {
          if (!ac.signal.aborted) ac.abort(new Error('call ended'));
        });
    },

    generateStreams(call) {
      // A stream: its generation's abort controller (a cancel or the call ending stops it) and its outputs.
      interface Open { ac: AbortController; io: SharedIo }
      sharedStreams<Open, GenerateStreamsRequest, GenerateStreamsOutput>(call, {
        rpc: 'generateStreams',
        streamRpc: 'generate',
        output: (stream, event) => create(GenerateStreamsOutputSchema, { stream, event: event as GenerateStreamsOutput['event'] }),
        response: (outputs) => create(GenerateStreamsResponseSchema, { outputs }),
        quiet: (ev) => ev.case === 'cancel',
        request: (v) => v.request ?? create(GenerateRequestSchema),
        make: (_v, io) => ({ ac: new AbortController(), io }),
        begin({ ac, io }, v) {
          const req = v.request ?? create(GenerateRequestSchema);
          generation(req, {
            requestId: v.requestId,
            signal: ac.signal,
            deadline: undefined,
            write: (event) => {
              if (ac.signal.aborted) throw ac.signal.reason;
              io.out(event);
              return io.drained() ?? undefined;
            },
          }).then(io.done, (err) => { if (!ac.signal.aborted) io.fail(err); });
        },
        input: () => undefined,
        // A generation has nothing more to receive: half-closing lets it finish.
        end: () => undefined,
        cancel: ({ ac }) => { if (!ac.signal.aborted) ac.abort(Object.assign(new Error('cancelled'), { name: 'AbortError' })); },
      });
    },

    designVoice(call, callback) {
      observe('designVoice', call.metadata, call.request);
      const ac = abortOn(call);
      let release = () => {};
      (async () => {
        release = admit();
        const { encoding, design } = designRequest(call.request);
        const designer = designerFor(call.request.model);
        let voices;
        if (designer === 'provider') {
          if (!speechProvider!.design) throw cannotDesign(speechProvider!.provider.what);
          voices = await speechProvider!.design(design, { signal: ac.signal, deadline: deadlineOf(call) });
        } else {
          if (!designer.design) throw cannotDesign(`${designer.name} engine`);
          voices = await designer.design(design, ac.signal);
        }
        if (!voices.length) throw new StatusError(grpc.status.INTERNAL, 'voice design gave no voice');
        const res = create(DesignVoiceResponseSchema, {
          voices: voices.slice(0, design.count).map((v) => {
            const pcm = pcmBytes(v.pcm);
            let audio = pcm;
            if (encoding === AudioEncoding.WAV) {
              audio = new Uint8Array(44 + pcm.length);
              audio.set(wavHeader(v.sampleRateHz, pcm.length));
              audio.set(pcm, 44);
            }
            return create(DesignedVoiceSchema, {
              voiceId: v.voiceId, audio, encoding, sampleRateHz: v.sampleRateHz, durationMs: (v.pcm.length / v.sampleRateHz) * 1000,
              text: v.text, language: v.language, summary: v.summary,
            });
          }),
        });
        if (!call.cancelled) callback(null, res);
      })()
        .catch((err) => {
          if (toStatus(err).code === grpc.status.INTERNAL) o.logger.error({ err }, 'voice design failed');
          if (!call.cancelled) callback(toGrpcError(err));
        })
        .finally(() => release());
    },

    saveVoice(call, callback) {
      observe('saveVoice', call.metadata, call.request);
      const ac = abortOn(call);
      let release = () => {};
      (async () => {
        release = admit();
        const { voiceId, name, description, model } = call.request;
        const designer = designerFor(model);
        let kept: string;
        if (designer === 'provider') {
          if (!speechProvider!.save) throw cannotDesign(speechProvider!.provider.what);
          kept = await speechProvider!.save({ voiceId, name, description }, { signal: ac.signal, deadline: deadlineOf(call) });
        } else {
          // An engine's designed voices last by themselves: their id is their settings.
          if (!designer.acceptsVoice?.(voiceId)) throw new StatusError(grpc.status.NOT_FOUND, 'Reference not found');
          kept = voiceId;
        }
        if (!call.cancelled) callback(null, create(SaveVoiceResponseSchema, { voiceId: kept }));
      })()
        .catch((err) => {
          if (!call.cancelled) callback(toGrpcError(err));
        })
        .finally(() => release());
    },

    capabilities(call, callback) {
      observe('capabilities', call.metadata);
      const speech = o.speech;
      const langs = new Set<string>();
      for (const e of Object.values(o.engines)) e.languages.forEach((l) => langs.add(l));
      // Providers are described with whether they answer (the last probe; Health has the same).
      const state = new Map((o.providers?.health() ?? []).map((h) => [h.name.slice(0, 3), h]));
      const said = (cap: string) => {
        const h = state.get(cap);
        return h ? `; ${h.ok ? 'answering' : `not answering: ${h.detail}`}` : '';
      };
      const speechBy = speechProvider ? `served by the ${speechProvider.provider.what}${said('tts')}` : `served by the ${speech.name} engine`;
      const models = [
        ...SPEECH_MODELS.map((name, i) => create(ModelInfoSchema, { name, kind: ModelKind.SPEECH, languages: speechProvider ? [] : speech.languages, description: speechBy, isDefault: i === 0 })),
        ...Object.keys(o.engines).map((name) => create(ModelInfoSchema, { name, kind: ModelKind.SPEECH, languages: o.engines[name].languages, description: `the ${name} engine` })),
        create(ModelInfoSchema, { name: 'transcribe-1', kind: ModelKind.TRANSCRIPTION, description: transcriptionProvider ? `served by the ${transcriptionProvider.provider.what}${said('stt')}` : 'synthetic speech recognizer', isDefault: true }),
        ...CHAT_TIERS.map((name) => create(ModelInfoSchema, { name, kind: ModelKind.CHAT, description: chatProvider ? `served by the ${chatProvider.provider.what}${said('llm')}` : 'the scripted chat model' })),
        create(ModelInfoSchema, { name: 'scripted', kind: ModelKind.CHAT, description: 'deterministic scripted chat model', isDefault: !chatProvider }),
      ];
      if (chatProvider) models.push(create(ModelInfoSchema, { name: chatProvider.provider.settings.model, kind: ModelKind.CHAT, description: `served by the ${chatProvider.provider.what}${said('llm')}`, isDefault: true }));
      // Voice design: voice-design-1 designs for what serves the speech models, when that can
      // vary its voice; each engine that can is also a design model of its own name.
      if (speechProvider ? speechProvider.design : o.speech.design) {
        models.push(create(ModelInfoSchema, { name: VOICE_DESIGN_MODELS[0], kind: ModelKind.VOICE_DESIGN, description: `designs voices for the speech models (${speechProvider ? speechProvider.provider.what : `the ${o.speech.name} engine`})`, isDefault: true }));
      }
      for (const [name, e] of Object.entries(o.engines)) {
        if (e.design) models.push(create(ModelInfoSchema, { name, kind: ModelKind.VOICE_DESIGN, languages: e.languages, description: `designs voices for the ${name} engine: ${name === 'espeak' ? 'voice variant, pitch and pace' : 'its voice parameters'}` }));
      }
      if (speechProvider) models.push(create(ModelInfoSchema, { name: speechProvider.provider.settings.model, kind: ModelKind.SPEECH, description: speechBy }));
      const voices = speechProvider
        ? [create(VoiceInfoSchema, { id: speechProvider.voice, name: `${speechProvider.voice} (the provider's default voice; reference_id may name any of its voices)`, languages: [] })]
        : speech.voices.map((v) => create(VoiceInfoSchema, v));
      callback(null, create(CapabilitiesResponseSchema, {
        contractVersion: 'v1',
        backend: 'parley-native 0.1.0',
        models,
        voices,
        languages: [...langs],
        outputFormats: [
          create(OutputFormatInfoSchema, { encoding: AudioEncoding.PCM_S16LE, sampleRatesHz: [] }),
          create(OutputFormatInfoSchema, { encoding: AudioEncoding.WAV, sampleRatesHz: [] }),
        ],
        inputEncodings: [AudioEncoding.PCM_S16LE, AudioEncoding.WAV],
        limits: create(LimitsSchema, { maxTextChars: LIMITS.maxTextChars, maxAudioMs: LIMITS.maxAudioMs, maxConcurrentCalls: o.maxConcurrentCalls, maxMessageBytes: LIMITS.maxMessageBytes }),
        rpcs: ['Synthesize', 'SynthesizeStream', 'Transcribe', 'TranscribeStream', ...(o.multiplexRecognition === false ? [] : ['TranscribeStreams']), ...(o.multiplexSynthesis === false ? [] : ['SynthesizeStreams']), 'Generate', ...(o.multiplexGeneration === false ? [] : ['GenerateStreams']), 'Capabilities', 'Health', 'DesignVoice', 'SaveVoice'],
      }));
    },

    health(call, callback) {
      observe('health', call.metadata);
      const engines = Object.values(o.engines).map((e) => create(EngineHealthSchema, { name: e.name, ...e.health() }));
      engines.push(create(EngineHealthSchema, { name: 'scripted', ok: true, detail: 'deterministic chat model' }));
      for (const h of o.providers?.health() ?? []) engines.push(create(EngineHealthSchema, h));
      if (o.detectorHealth) engines.push(create(EngineHealthSchema, { name: 'speech detector', ...o.detectorHealth() }));
      callback(null, create(HealthResponseSchema, { status: ServingStatus.SERVING, engines, activeCalls: activeCalls }));
    },
  };

  return { handlers, stats: () => ({ activeCalls, segmentsSynthesized: speechStats.segmentsSynthesized }) };
}

function checkTranscriptionModel(model: string) {
  if (model && !TRANSCRIPTION_MODELS.includes(model)) throw new StatusError(grpc.status.NOT_FOUND, `Model not found: ${model}`);
}

function decodeInput(config: TranscribeConfig, bytes: Uint8Array): { pcm: Int16Array; sampleRateHz: number } {
  const enc = config.input?.encoding ?? AudioEncoding.UNSPECIFIED;
  if (enc === AudioEncoding.PCM_S16LE) {
    const rate = config.input?.sampleRateHz ?? 0;
    if (rate < 8000 || rate > 48000) throw invalid('config.input.sample_rate_hz: must be between 8000 and 48000 for PCM_S16LE');
    return { pcm: bytesToPcm(bytes), sampleRateHz: rate };
  }
  if (enc === AudioEncoding.WAV || enc === AudioEncoding.UNSPECIFIED) {
    const w = parseWav(bytes);
    if (w) return w;
    throw invalid('audio: not a PCM WAV file');
  }
  throw invalid('config.input.encoding: this backend decodes PCM_S16LE and WAV only');
}

function toGrpcError(err: unknown): grpc.ServiceError {
  const s = toStatus(err);
  return Object.assign(new Error(s.details), { code: s.code, details: s.details, metadata: s.metadata() });
}
