// The `openai` speech engine: `POST {base}/audio/speech` with `response_format: "pcm"`, read as it
// streams (OpenAI, Kokoro-FastAPI, speaches, openedai-speech, LocalAI, another Parley). Two
// answers are understood, whatever was asked: raw PCM (the rate from the Content-Type's `rate=`
// parameter when the server states one, else OpenAI's 24 kHz), and server-sent events
// (`stream_format: "sse"`: `speech.audio.delta` events carrying base64 PCM). No timestamps:
// alignment is estimated.
import * as grpc from '@grpc/grpc-js';
import { bytesToPcm } from '../audio.ts';
import { StatusError } from '../status.ts';
import { providerRequest, type CallScope, type Provider } from './http.ts';
import { voiceRefused, type ProviderSpeechOptions, type SpeechProvider } from './speech.ts';
import { readSse } from './sse.ts';
import type { ProviderAudio } from './timeline.ts';

/** OpenAI's `pcm`: 24 kHz, 16-bit, mono. */
export const OPENAI_PCM_RATE_HZ = 24_000;

/** The sample rate a Content-Type states (`audio/pcm;rate=44100`), or undefined. */
export function rateOf(contentType: string | null): number | undefined {
  const m = /(?:^|;)\s*(?:rate|samplerate|sample_rate)=(\d+)/i.exec(contentType ?? '');
  const r = m ? Number(m[1]) : NaN;
  return r >= 8000 && r <= 192_000 ? r : undefined;
}

if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error('the native backend reads PCM as little-endian host samples');

/** Little-endian 16-bit samples from byte pieces of any length (an odd byte waits for the next piece). */
export class PcmReader {
  private carry: number | null = null;
  read(bytes: Uint8Array): Int16Array {
    let b = bytes;
    if (this.carry !== null) {
      const joined = new Uint8Array(b.length + 1);
      joined[0] = this.carry;
      joined.set(b, 1);
      b = joined;
      this.carry = null;
    }
    if (b.length % 2) {
      this.carry = b[b.length - 1]!;
      b = b.subarray(0, b.length - 1);
    }
    // Read as the host's 16-bit samples (little-endian on every platform Node runs on here,
    // checked at load): a view of the piece where it arrived when it sits at an even offset
    // (a response body's pieces are not reused by the socket), else a copy (bytesToPcm).
    return bytesToPcm(b);
  }
}

export function createOpenAiSpeech(p: Provider, voice: string): SpeechProvider {
  const base = p.settings.baseUrl;
  return {
    provider: p,
    voice,
    timestamps: false,
    async *synthesize(text: string, o: ProviderSpeechOptions, scope: CallScope): AsyncGenerator<ProviderAudio> {
      const body: Record<string, unknown> = { model: p.settings.model, input: text, voice: o.voice || voice, response_format: 'pcm' };
      if (o.speed && o.speed !== 1) body.speed = o.speed;
      let res;
      try {
        res = await providerRequest(p, `${base}/audio/speech`, { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }, scope);
      } catch (err) {
        throw voiceRefused(err, !!o.voice && o.voice !== voice);
      }
      const reader = new PcmReader();
      try {
        if (/text\/event-stream/i.test(res.headers.get('content-type') ?? '')) {
          for await (const ev of readSse(res.body)) {
            if (ev.data === '[DONE]') break;
            let e: { type?: string; audio?: string; error?: { message?: string } };
            try {
              e = JSON.parse(ev.data);
            } catch {
              continue;
            }
            if (e.error || e.type === 'error') throw new StatusError(grpc.status.UNAVAILABLE, `${p.what} failed mid-stream: ${String(e.error?.message ?? 'error').slice(0, 200)}`);
            if (e.type === 'speech.audio.done') break;
            if (typeof e.audio === 'string' && e.audio) {
              const pcm = reader.read(Buffer.from(e.audio, 'base64'));
              if (pcm.length) yield { pcm, sampleRateHz: OPENAI_PCM_RATE_HZ };
            }
          }
        } else {
          const rate = rateOf(res.headers.get('content-type')) ?? OPENAI_PCM_RATE_HZ;
          for await (const bytes of res.body) {
            const pcm = reader.read(bytes);
            if (pcm.length) yield { pcm, sampleRateHz: rate };
          }
        }
      } finally {
        res.close();
      }
    },
    async probe(scope) {
      const res = await providerRequest(p, `${base}/models`, { method: 'GET' }, scope);
      res.close();
    },
  };
}
