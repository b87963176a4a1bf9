// The `elevenlabs` speech engine (ElevenLabs, another Parley's `/compat/elevenlabs`):
// - Synthesize: `POST {base}/v1/text-to-speech/{voice}/stream/with-timestamps` (newline-delimited
//   JSON: base64 PCM with character timings), one request per segment;
// - SynthesizeStream: the `stream-input` socket, text passed on as it comes (a sentence end asks
//   for generation with `flush: true`); a flush of the call ends the socket's text (`text: ""`),
//   waits for `isFinal`, and the next text opens a new socket.
// PCM is asked at the call's rate when the provider has it (16, 24, 44.1, 48 kHz), else 24 kHz
// and resampled. Character timings are the provider's; they may count from the start of each
// audio message (ElevenLabs) or of the socket (Parley): a time going backwards tells which.
//
// Voice design (DesignVoice, SaveVoice): `POST {base}/v1/text-to-voice/design` (previews with a
// `generated_voice_id`, PCM at the call's rate) and `POST {base}/v1/text-to-voice` (a preview
// kept in the account's voice library; its `voice_id` is what speech then names).
import * as grpc from '@grpc/grpc-js';
import type { AudioChunk } from '../../src/gen/inference/v1/inference_pb.ts';
import { resampleLinear } from '../audio.ts';
import type { DesignedVoice, DesignRequest, Timed } from '../engines/types.ts';
import { sentenceEnds } from '../sentences.ts';
import { StatusError } from '../status.ts';
import { providerRequest, readJson, socketUrl, type CallScope, type Provider, type ProviderResponse } from './http.ts';
import { Pipe, voiceRefused, type LiveSpeaker, type ProviderSpeechOptions, type SpeechProvider } from './speech.ts';
import type { ProviderAudio, ProviderTimeline, SegmentWriter } from './timeline.ts';
import { PcmReader } from './tts-openai.ts';
import { openSocket, type ProviderSocket } from './ws.ts';

const PCM_RATES = [16_000, 24_000, 44_100, 48_000];
/** ElevenLabs' voice-design model. */
export const ELEVENLABS_DESIGN_MODEL = 'eleven_multilingual_ttv_v2';
/** ElevenLabs wants a voice description of at least 20 characters when a preview is kept. */
const MIN_KEPT_DESCRIPTION = 20;
/** Its previews speak 100 to 1,000 characters. */
const MIN_PREVIEW_TEXT = 100;
const DEFAULT_RATE = 24_000;
/** ElevenLabs takes voice_settings.speed from 0.7 to 1.2. */
const SPEED = { min: 0.7, max: 1.2 };

const rateFor = (wanted: number) => (PCM_RATES.includes(wanted) ? wanted : DEFAULT_RATE);
/** Whether the text so far ends a sentence (its end counts: the provider is told to speak it now). */
const endsSentence = (text: string) => sentenceEnds(text).at(-1) === text.length;

/**
 * Character timings of one message, on the timeline of its request or socket. `state` keeps
 * what came before: where the audio stood and the last start time seen.
 */
export function alignedChars(chars: string[], startsMs: number[], endsMs: number[], state: { audioMs: number; lastStartMs: number; relative: boolean | null }): Timed[] {
  if (!chars.length) return [];
  // Times that go back before what was already timed count from this message's audio.
  if (state.relative === null && state.lastStartMs >= 0 && startsMs[0]! + 1 < state.lastStartMs) state.relative = true;
  const base = state.relative ? state.audioMs : 0;
  const out = chars.map((c, i) => ({ text: c, startMs: base + startsMs[i]!, endMs: base + Math.max(startsMs[i]!, endsMs[i] ?? startsMs[i]!) }));
  state.lastStartMs = out[out.length - 1]!.startMs;
  return out;
}

/** An ElevenLabs-style error frame as a status. */
function frameError(p: Provider, m: Record<string, any>): StatusError {
  const code = Number(m.code ?? m.status ?? 0);
  const said = String(m.message ?? m.error ?? 'error').slice(0, 200);
  if (code === 401 || code === 403 || /auth|unauthori|api key/i.test(said)) return new StatusError(grpc.status.FAILED_PRECONDITION, `${p.what} refused the credentials: check the API key setting`);
  if (code === 429 || /rate limit|quota|too many/i.test(said)) return new StatusError(grpc.status.RESOURCE_EXHAUSTED, `${p.what} rate limit reached: ${said}`, 1000);
  if (code >= 400 && code < 500 && code !== 408) return new StatusError(grpc.status.INVALID_ARGUMENT, `${p.what} refused the request: ${said}`);
  return new StatusError(grpc.status.UNAVAILABLE, `${p.what} failed: ${said}`);
}

export class ElevenLabsSpeech implements SpeechProvider {
  readonly timestamps = true;
  constructor(
    readonly provider: Provider,
    readonly voice: string,
  ) {}

  /** Any other call of the provider's HTTP API (JSON in, response out). */
  request(method: string, path: string, body: unknown, scope: CallScope): Promise<ProviderResponse> {
    return providerRequest(this.provider, `${this.provider.settings.baseUrl}${path}`, { method, headers: body === undefined ? {} : { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) }, scope);
  }

  voiceSettings(o: ProviderSpeechOptions): Record<string, unknown> | undefined {
    return o.speed && o.speed !== 1 ? { speed: Math.min(SPEED.max, Math.max(SPEED.min, o.speed)) } : undefined;
  }

  async *synthesize(text: string, o: ProviderSpeechOptions, scope: CallScope): AsyncGenerator<ProviderAudio> {
    const rate = rateFor(o.sampleRateHz);
    const voice = o.voice || this.voice;
    const body: Record<string, unknown> = { text, model_id: this.provider.settings.model };
    const vs = this.voiceSettings(o);
    if (vs) body.voice_settings = vs;
    let res: ProviderResponse;
    try {
      res = await this.request('POST', `/v1/text-to-speech/${encodeURIComponent(voice)}/stream/with-timestamps?output_format=pcm_${rate}`, body, scope);
    } catch (err) {
      throw voiceRefused(err, true);
    }
    const reader = new PcmReader();
    const state = { audioMs: 0, lastStartMs: -1, relative: null as boolean | null };
    const decoder = new TextDecoder();
    let buf = '';
    const parse = (line: string): ProviderAudio | null => {
      if (!line.trim()) return null;
      let m: Record<string, any>;
      try {
        m = JSON.parse(line);
      } catch {
        return null;
      }
      if (m.error || m.detail) throw frameError(this.provider, typeof m.detail === 'object' ? { ...m.detail, code: m.detail.status } : m);
      const pcm = typeof m.audio_base64 === 'string' ? reader.read(Buffer.from(m.audio_base64, 'base64')) : new Int16Array(0);
      const a = m.alignment;
      const chars = a && Array.isArray(a.characters)
        ? alignedChars(a.characters, (a.character_start_times_seconds ?? []).map((s: number) => s * 1000), (a.character_end_times_seconds ?? []).map((s: number) => s * 1000), state)
        : [];
      state.audioMs += (pcm.length / rate) * 1000;
      return { pcm, sampleRateHz: rate, chars };
    };
    try {
      for await (const bytes of res.body) {
        buf += decoder.decode(bytes, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const piece = parse(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
          if (piece) yield piece;
        }
      }
      const last = parse(buf + decoder.decode());
      if (last) yield last;
    } finally {
      res.close();
    }
  }

  live(o: ProviderSpeechOptions, timeline: ProviderTimeline, scope: CallScope, write: (c: AudioChunk) => Promise<void>): LiveSpeaker {
    return new StreamInput(this, o, timeline, scope, write);
  }

  async probe(scope: CallScope) {
    const res = await this.request('GET', '/v1/models', undefined, scope);
    res.close();
  }

  /** Previews of a described voice; each `generated_voice_id` is a voice only once kept (`save`). */
  async design(req: DesignRequest, scope: CallScope): Promise<DesignedVoice[]> {
    const rate = rateFor(req.sampleRateHz);
    const body: Record<string, unknown> = { voice_description: req.description, model_id: ELEVENLABS_DESIGN_MODEL };
    // The provider speaks previews of 100 to 1,000 characters: a shorter text is not sent, and
    // the previews say a text the provider writes (each candidate's text and summary say so).
    const ownText = Array.from(req.text).length >= MIN_PREVIEW_TEXT;
    if (ownText) body.text = req.text;
    else body.auto_generate_text = true;
    if (req.seed !== undefined) body.seed = req.seed;
    let res: ProviderResponse;
    try {
      // Not idempotent: each call designs (and bills) anew on the provider.
      res = await providerRequest(this.provider, `${this.provider.settings.baseUrl}/v1/text-to-voice/design?output_format=pcm_${rate}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }, scope, false);
    } catch (err) {
      // A server of this kind without the endpoint (another Parley's /compat/elevenlabs, a
      // proxy) does not offer voice design: the contract's UNIMPLEMENTED, not a refusal.
      if (err instanceof StatusError && err.code === grpc.status.FAILED_PRECONDITION && /HTTP 404/.test(err.details)) {
        throw new StatusError(grpc.status.UNIMPLEMENTED, 'voice design: the ElevenLabs-style speech provider does not offer it (HTTP 404 on /v1/text-to-voice/design)');
      }
      throw err;
    }
    const doc = (await readJson(res)) as { previews?: { audio_base_64?: string; generated_voice_id?: string; language?: string }[]; text?: string };
    const previews = (doc.previews ?? []).filter((p) => typeof p.generated_voice_id === 'string' && typeof p.audio_base_64 === 'string');
    if (!previews.length) throw new StatusError(grpc.status.UNAVAILABLE, `${this.provider.what} answered the voice design without previews`);
    const notApplied = `${req.speed !== 1 ? ' The speed is not applied (the provider designs at its own pace).' : ''}${req.text && !ownText ? ` The text was not used (the provider speaks ${MIN_PREVIEW_TEXT} to 1,000 characters): it wrote the preview's own.` : ''}`;
    return previews.slice(0, req.count).map((p, i) => {
      let pcm = new PcmReader().read(Buffer.from(p.audio_base_64!, 'base64'));
      let sampleRateHz = rate;
      if (req.sampleRateHz && req.sampleRateHz !== rate) {
        pcm = resampleLinear(pcm, rate, req.sampleRateHz);
        sampleRateHz = req.sampleRateHz;
      }
      return {
        voiceId: p.generated_voice_id!,
        pcm,
        sampleRateHz,
        text: doc.text ?? (ownText ? req.text : ''),
        language: p.language ?? req.language,
        // What the caller reads: the provider's kind, never its address.
        summary: `ElevenLabs voice design (${ELEVENLABS_DESIGN_MODEL}), preview ${i + 1} of ${previews.length}: the description is the provider's prompt, applied as the provider understands it.${notApplied} Saving it keeps it in the provider's voice library.`,
      };
    });
  }

  /** Keeps a preview in the account's voice library; answers its voice id. */
  async save(req: { voiceId: string; name: string; description: string }, scope: CallScope): Promise<string> {
    let description = req.description.trim() || `A voice designed through Parley: ${req.name}`;
    if (description.length < MIN_KEPT_DESCRIPTION) description = `A voice designed through Parley: ${description}`;
    let res: ProviderResponse;
    try {
      res = await providerRequest(this.provider, `${this.provider.settings.baseUrl}/v1/text-to-voice`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ voice_name: req.name || 'Parley voice', voice_description: description.slice(0, 1000), generated_voice_id: req.voiceId }) }, scope, false);
    } catch (err) {
      // A preview the provider no longer has (or never had) is the contract's unknown voice.
      if (err instanceof StatusError && /not found|HTTP 404/i.test(err.details)) throw new StatusError(grpc.status.NOT_FOUND, 'Reference not found');
      throw voiceRefused(err, true);
    }
    const doc = (await readJson(res)) as { voice_id?: unknown };
    if (typeof doc.voice_id !== 'string' || !doc.voice_id) throw new StatusError(grpc.status.UNAVAILABLE, `${this.provider.what} kept the voice without answering its voice_id`);
    return doc.voice_id;
  }
}

/** One SynthesizeStream over `stream-input` sockets (one per stretch of text between flushes). */
class StreamInput implements LiveSpeaker {
  private current: { socket: Promise<ProviderSocket>; writer: SegmentWriter; done: Promise<void>; text: string } | null = null;
  /** Everything written so far (generations write one after another). */
  private tail: Promise<void> = Promise.resolve();
  private failure: unknown = null;
  private lastFinal = true;

  constructor(
    private readonly engine: ElevenLabsSpeech,
    private readonly o: ProviderSpeechOptions,
    private readonly timeline: ProviderTimeline,
    private readonly scope: CallScope,
    private readonly write: (c: AudioChunk) => Promise<void>,
  ) {}

  private open() {
    const p = this.engine.provider;
    const rate = rateFor(this.o.sampleRateHz);
    const voice = this.o.voice || this.engine.voice;
    const q = new URLSearchParams({ model_id: p.settings.model, output_format: `pcm_${rate}`, sync_alignment: 'true', inactivity_timeout: '180' });
    const writer = this.timeline.segment('', true);
    const socket = openSocket(p, socketUrl(p.settings.baseUrl, `/v1/text-to-speech/${encodeURIComponent(voice)}/stream-input?${q}`), this.scope).then((s) => {
      const init: Record<string, unknown> = { text: ' ' };
      const vs = this.engine.voiceSettings(this.o);
      if (vs) init.voice_settings = vs;
      s.send(init);
      return s;
    }, (err) => {
      throw voiceRefused(err, true);
    });
    const pieces = new Pipe<ProviderAudio>();
    // Messages to audio pieces, in order; chunks written by `pump` in the call's order.
    void socket.then(async (s) => {
      const reader = new PcmReader();
      const state = { audioMs: 0, lastStartMs: -1, relative: null as boolean | null };
      try {
        for await (const m of s.messages) {
          if (m.error || (m.message && !m.audio && !m.isFinal)) throw frameError(p, m);
          const pcm = typeof m.audio === 'string' && m.audio ? reader.read(Buffer.from(m.audio, 'base64')) : new Int16Array(0);
          const a = m.alignment;
          const chars = a && Array.isArray(a.chars) ? alignedChars(a.chars, a.charStartTimesMs ?? [], (a.charStartTimesMs ?? []).map((t: number, i: number) => t + Number((a.charDurationsMs ?? a.charsDurationsMs ?? [])[i] ?? 0)), state) : [];
          state.audioMs += (pcm.length / rate) * 1000;
          if (pcm.length || chars.length) pieces.push({ pcm, sampleRateHz: rate, chars });
          if (m.isFinal) break;
        }
        pieces.end();
      } catch (err) {
        pieces.end(err);
      } finally {
        s.close();
      }
    }, (err) => pieces.end(err));
    const done = this.tail.then(async () => {
      for await (const piece of pieces) for (const c of writer.push(piece)) await this.write(c);
    });
    done.catch(() => {});
    this.lastFinal = false;
    return { socket, writer, done, text: '' };
  }

  text(piece: string): void {
    if (!piece || this.failure) return;
    const cur = (this.current ??= this.open());
    cur.writer.appendText(piece);
    cur.text += piece;
    const flush = endsSentence(cur.text);
    if (flush) cur.text = '';
    void cur.socket.then((s) => s.send(flush ? { text: piece, flush: true } : { text: piece }), () => {});
  }

  async flush(onlyIfPending = false): Promise<void> {
    const cur = this.current;
    this.current = null;
    if (!cur) {
      if (onlyIfPending || this.lastFinal) return;
    }
    if (cur) void cur.socket.then((s) => s.send({ text: '' }), () => {});
    this.tail = (cur ? cur.done : this.tail).then(async () => {
      const chunks = cur ? cur.writer.end(true) : this.timeline.segment('', true).end(true);
      for (const c of chunks) await this.write(c);
      this.lastFinal = true;
    });
    try {
      await this.tail;
    } catch (err) {
      this.failure ??= err;
      throw err;
    }
  }
}

export function createElevenLabsSpeech(p: Provider, voice: string): SpeechProvider {
  return new ElevenLabsSpeech(p, voice);
}
