// The `elevenlabs` transcription engine: the ElevenLabs-style realtime speech-to-text socket
// `{base}/v1/speech-to-text/realtime` with manual commits (ElevenLabs Scribe realtime, another
// Parley's `/compat/elevenlabs`). 16 kHz PCM in `input_audio_chunk` messages; the speech
// detector here takes turns (turns.ts) and commits each utterance when it ends; partials from
// `partial_transcript`, the transcript from `committed_transcript` and its word times from
// `committed_transcript_with_timestamps` (asked with `include_timestamps=true`).
import * as grpc from '@grpc/grpc-js';
import { StreamResampler } from '../audio.ts';
import type { Timed } from '../engines/types.ts';
import { StatusError } from '../status.ts';
import { socketUrl, type CallScope, type Provider } from './http.ts';
import { languageCode, MIN_UPLOAD_MS, type Transcript, type TranscriptionProvider } from './transcription.ts';
import { socketTranscription } from './socket-transcription.ts';
import type { TurnDetectorFactory } from './vad.ts';
import { openSocket, type ProviderSocket } from './ws.ts';

const RATE = 16_000;
const CHUNK_MS = 250;
/** How long a `committed_transcript` waits for its timestamps message before it goes without. */
const TIMESTAMPS_WAIT_MS = 300;

const b64 = (pcm: Int16Array) => Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString('base64');

/** An error message of the protocol (`auth_error`, `rate_limited`, `input_error`, …) as a status. */
function messageError(p: Provider, m: Record<string, any>): StatusError {
  const kind = String(m.message_type);
  const said = String(m.error ?? m.message ?? kind).slice(0, 200);
  if (/auth|unauthori|permission/i.test(kind)) return new StatusError(grpc.status.FAILED_PRECONDITION, `${p.what} refused the credentials: check the API key setting`);
  if (/quota|rate_limit|limit_exceeded/i.test(kind)) return new StatusError(grpc.status.RESOURCE_EXHAUSTED, `${p.what} rate limit reached: ${said}`, 1000);
  if (/input_error|invalid/i.test(kind)) return new StatusError(grpc.status.INVALID_ARGUMENT, `${p.what} refused the audio: ${said}`);
  return new StatusError(grpc.status.UNAVAILABLE, `${p.what} failed: ${said}`);
}

class ScribeSession {
  private readonly socket: Promise<ProviderSocket>;
  private readonly resampler: StreamResampler;
  private uncommitted = 0;
  /** Samples sent on the socket so far: the provider's word times count from its first sample. */
  private sent = 0;
  /** Where each pending commit's audio starts on the socket's timeline (samples). */
  private pending: { from: number; resolve(t: Transcript): void; reject(e: unknown): void }[] = [];
  private segmentFrom = 0;
  private failure: unknown = null;
  private closed = false;
  onPartial?: (text: string) => void;
  onFailure?: (err: unknown) => void;

  constructor(private readonly p: Provider, rateHz: number, language: string, scope: CallScope) {
    this.resampler = new StreamResampler(rateHz, RATE);
    const q = new URLSearchParams({ model_id: p.settings.model, audio_format: `pcm_${RATE}`, commit_strategy: 'manual', include_timestamps: 'true' });
    const lang = languageCode(language);
    if (lang) q.set('language_code', lang);
    this.socket = openSocket(p, socketUrl(p.settings.baseUrl, `/v1/speech-to-text/realtime?${q}`), scope).then((s) => {
      void this.read(s);
      return s;
    });
    this.socket.catch((err) => this.fail(err));
  }

  private fail(err: unknown) {
    const first = this.failure === null;
    this.failure ??= err;
    for (const w of this.pending.splice(0)) w.reject(this.failure);
    if (first && !this.closed) this.onFailure?.(err);
  }

  private async read(s: ProviderSocket) {
    let text: string | null = null;
    let wait: NodeJS.Timeout | null = null;
    const settle = (words: Timed[]) => {
      if (wait) clearTimeout(wait);
      wait = null;
      const w = this.pending.shift();
      const t = text ?? '';
      text = null;
      w?.resolve({ text: t.trim(), words });
    };
    try {
      for await (const m of s.messages) {
        const kind = m.message_type;
        if (kind === 'session_started') continue;
        if (kind === 'partial_transcript') {
          if (typeof m.text === 'string' && m.text.trim()) this.onPartial?.(m.text.trim());
        } else if (kind === 'committed_transcript') {
          text = String(m.text ?? '');
          wait = setTimeout(() => settle([]), TIMESTAMPS_WAIT_MS);
        } else if (kind === 'committed_transcript_with_timestamps') {
          if (text === null) text = String(m.text ?? '');
          const from = ((this.pending[0]?.from ?? 0) / RATE) * 1000;
          const words: Timed[] = Array.isArray(m.words)
            ? m.words
                .filter((w: any) => w && (w.type === undefined || w.type === 'word') && typeof w.text === 'string' && w.text.trim() && Number.isFinite(w.start) && Number.isFinite(w.end))
                .map((w: any) => ({ text: String(w.text).trim(), startMs: Math.max(0, w.start * 1000 - from), endMs: Math.max(0, Math.max(w.start, w.end) * 1000 - from) }))
            : [];
          settle(words);
        } else if (typeof kind === 'string' && /error|exceeded|limited|quota/i.test(kind)) {
          throw messageError(this.p, m);
        }
      }
      if (this.pending.length) throw new StatusError(grpc.status.UNAVAILABLE, `${this.p.what} closed the socket before the transcript`);
    } catch (err) {
      if (wait) clearTimeout(wait);
      this.fail(err);
    }
  }

  append(pcm: Int16Array) {
    const at16 = this.resampler.push(pcm);
    if (at16.length) this.send16(at16);
  }

  private send16(pcm: Int16Array) {
    this.uncommitted += pcm.length;
    this.sent += pcm.length;
    void this.socket.then((s) => {
      const step = (RATE * CHUNK_MS) / 1000;
      for (let i = 0; i < pcm.length; i += step) s.send({ message_type: 'input_audio_chunk', audio_base_64: b64(pcm.subarray(i, i + step)), commit: false, sample_rate: RATE });
    }, () => {});
  }

  commit(): Promise<Transcript> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.uncommitted === 0) return Promise.resolve({ text: '', words: [] });
    const min = (RATE * MIN_UPLOAD_MS) / 1000;
    if (this.uncommitted < min) this.send16(new Int16Array(min - this.uncommitted));
    this.uncommitted = 0;
    const from = this.segmentFrom;
    this.segmentFrom = this.sent;
    return new Promise<Transcript>((resolve, reject) => {
      this.pending.push({ from, resolve, reject });
      void this.socket.then((s) => s.send({ message_type: 'input_audio_chunk', audio_base_64: '', commit: true, sample_rate: RATE }), () => {});
    });
  }

  close() {
    this.closed = true;
    void this.socket.then((s) => s.close(), () => {});
    this.fail(new StatusError(grpc.status.CANCELLED, 'stream closed'));
  }
}

export function createElevenLabsTranscription(p: Provider, detector: TurnDetectorFactory): TranscriptionProvider {
  return socketTranscription(p, detector, (rateHz, language, scope) => new ScribeSession(p, rateHz, language, scope), '/v1/models');
}
