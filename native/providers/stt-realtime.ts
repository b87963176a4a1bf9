// The `openai-realtime` transcription engine: the realtime transcription socket
// `{base}/realtime?intent=transcription` (OpenAI, speaches, vLLM, another Parley). The session
// is set to 24 kHz PCM with `turn_detection: null`: the speech detector here takes turns
// (turns.ts), sends each utterance's audio as it comes (`input_audio_buffer.append`) and commits
// it when the utterance ends. Partials come from the transcription deltas
// (`conversation.item.input_audio_transcription.delta`, or vLLM's `transcription.delta`); the
// transcript from `.completed` (or `transcription.done`). No word timestamps.
import * as grpc from '@grpc/grpc-js';
import { StreamResampler } from '../audio.ts';
import { StatusError } from '../status.ts';
import { socketUrl, type CallScope, type Provider } from './http.ts';
import { languageCode, MIN_UPLOAD_MS, type Transcript, type TranscriptionProvider } from './transcription.ts';
import { socketTranscription } from './socket-transcription.ts';
import type { TurnDetectorFactory } from './vad.ts';
import { openSocket, type ProviderSocket } from './ws.ts';

const RATE = 24_000;
/** Audio per append message (ms). */
const APPEND_MS = 500;

const b64 = (pcm: Int16Array) => Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString('base64');

/** An error event of the protocol as a status. */
function eventError(p: Provider, e: Record<string, any>): StatusError {
  const err = e.error ?? {};
  const code = String(err.code ?? err.type ?? '');
  const msg = String(err.message ?? 'error').slice(0, 200);
  if (/auth|unauthori|invalid_api_key|permission/i.test(code + msg)) return new StatusError(grpc.status.FAILED_PRECONDITION, `${p.what} refused the credentials: check the API key setting`);
  if (/rate_limit|quota/i.test(code)) return new StatusError(grpc.status.RESOURCE_EXHAUSTED, `${p.what} rate limit reached: ${msg}`, 1000);
  return new StatusError(grpc.status.UNAVAILABLE, `${p.what} failed: ${msg}`);
}

/** One realtime transcription session on a socket. */
class RealtimeSession {
  private socket: Promise<ProviderSocket>;
  private readonly resampler: StreamResampler;
  /** Samples (24 kHz) appended since the last commit. */
  private uncommitted = 0;
  private pending: { resolve(t: Transcript): void; reject(e: unknown): void }[] = [];
  /** Item ids of commits in order, and their texts so far. */
  private readonly items: string[] = [];
  private readonly partials = new Map<string, string>();
  private failure: unknown = null;
  private closed = false;
  onPartial?: (text: string) => void;
  /** The session failed (the socket refused or died), whether or not a commit was waiting. */
  onFailure?: (err: unknown) => void;

  constructor(private readonly p: Provider, rateHz: number, language: string, scope: CallScope) {
    this.resampler = new StreamResampler(rateHz, RATE);
    this.socket = openSocket(p, socketUrl(p.settings.baseUrl, '/realtime?intent=transcription'), scope).then((s) => {
      const transcription: Record<string, unknown> = { model: p.settings.model };
      const lang = languageCode(language);
      if (lang) transcription.language = lang;
      s.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: RATE }, transcription, turn_detection: null } } } });
      void this.read(s, transcription);
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

  private async read(s: ProviderSocket, transcription: Record<string, unknown>) {
    let updated = false;
    try {
      for await (const e of s.messages) {
        switch (e.type) {
          case 'session.updated':
          case 'transcription_session.updated':
            updated = true;
            break;
          case 'error':
            // A server of the older protocol refuses the GA session.update: its own shape instead.
            if (!updated && /session|unknown|invalid/i.test(String(e.error?.code ?? '') + String(e.error?.message ?? ''))) {
              updated = true;
              s.send({ type: 'transcription_session.update', session: { input_audio_format: 'pcm16', input_audio_transcription: transcription, turn_detection: null } });
              break;
            }
            throw eventError(this.p, e);
          case 'input_audio_buffer.committed':
            if (typeof e.item_id === 'string') this.items.push(e.item_id);
            break;
          case 'conversation.item.input_audio_transcription.delta':
          case 'transcription.delta': {
            const id = String(e.item_id ?? this.items[this.items.length - 1] ?? '');
            const text = (this.partials.get(id) ?? '') + String(e.delta ?? '');
            this.partials.set(id, text);
            if (text.trim()) this.onPartial?.(text.trim());
            break;
          }
          case 'conversation.item.input_audio_transcription.completed':
          case 'transcription.done': {
            const text = String(e.transcript ?? e.text ?? '');
            this.partials.delete(String(e.item_id ?? ''));
            this.pending.shift()?.resolve({ text: text.trim(), words: [] });
            break;
          }
          case 'conversation.item.input_audio_transcription.failed':
            throw new StatusError(grpc.status.UNAVAILABLE, `${this.p.what} could not transcribe: ${String(e.error?.message ?? 'failed').slice(0, 200)}`);
          default:
            break;
        }
      }
      if (this.pending.length) throw new StatusError(grpc.status.UNAVAILABLE, `${this.p.what} closed the socket before the transcript`);
    } catch (err) {
      this.fail(err);
    }
  }

  /** Audio at the stream's rate. */
  append(pcm: Int16Array) {
    const at24 = this.resampler.push(pcm);
    if (at24.length) this.send24(at24);
  }

  private send24(pcm: Int16Array) {
    this.uncommitted += pcm.length;
    void this.socket.then((s) => {
      for (let i = 0; i < pcm.length; i += (RATE * APPEND_MS) / 1000) s.send({ type: 'input_audio_buffer.append', audio: b64(pcm.subarray(i, i + (RATE * APPEND_MS) / 1000)) });
    }, () => {});
  }

  /** Commits what was appended; resolves with its transcript ('' when nothing was). */
  commit(): Promise<Transcript> {
    if (this.failure) return Promise.reject(this.failure);
    // The resampler holds back under a millisecond of audio: it goes with the next commit.
    if (this.uncommitted === 0) return Promise.resolve({ text: '', words: [] });
    // Providers refuse very short buffers: silence brings it up to the minimum.
    const min = (RATE * MIN_UPLOAD_MS) / 1000;
    if (this.uncommitted < min) this.send24(new Int16Array(min - this.uncommitted));
    this.uncommitted = 0;
    return new Promise<Transcript>((resolve, reject) => {
      this.pending.push({ resolve, reject });
      void this.socket.then((s) => s.send({ type: 'input_audio_buffer.commit' }), () => {});
    });
  }

  close() {
    this.closed = true;
    void this.socket.then((s) => s.close(), () => {});
    this.fail(new StatusError(grpc.status.CANCELLED, 'stream closed'));
  }
}

export function createRealtimeTranscription(p: Provider, detector: TurnDetectorFactory): TranscriptionProvider {
  return socketTranscription(p, detector, (rateHz, language, scope) => new RealtimeSession(p, rateHz, language, scope), '/models');
}
