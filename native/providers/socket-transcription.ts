/**
 * A transcription provider over a realtime socket session (OpenAI-style realtime transcription,
 * ElevenLabs-style realtime speech-to-text): one recording is a session with one commit; a
 * stream is a session driven by the turn-taking of `turns.ts`. The sessions differ only in their
 * wire messages.
 */
import { providerRequest, type CallScope, type Provider } from './http.ts';
import type { Transcript, TranscriptionProvider } from './transcription.ts';
import { turnTaking, type Recognizer } from './turns.ts';
import type { TurnDetectorFactory } from './vad.ts';

/** One provider socket session: audio in, a transcript per commit. */
export interface SocketTranscriptionSession {
  append(pcm: Int16Array): void;
  commit(): Promise<Transcript>;
  close(): void;
  onPartial?: (text: string) => void;
  onFailure?: (err: unknown) => void;
}

export function socketTranscription(
  p: Provider,
  detector: TurnDetectorFactory,
  open: (rateHz: number, language: string, scope: CallScope) => SocketTranscriptionSession,
  /** Path under the base URL that answers a health probe (its model list). */
  probePath: string,
): TranscriptionProvider {
  return {
    provider: p,
    async transcribe(pcm, rateHz, language, scope) {
      const s = open(rateHz, language, scope);
      try {
        s.append(pcm);
        return await s.commit();
      } finally {
        s.close();
      }
    },
    stream(rateHz, language, scope, onEvent, onError) {
      const s = open(rateHz, language, scope);
      const recognizer: Recognizer = {
        begin: (preroll) => s.append(preroll),
        audio: (pcm) => s.append(pcm),
        finish: () => s.commit(),
        close: () => s.close(),
      };
      const t = turnTaking(rateHz, detector, recognizer, onEvent, onError);
      s.onPartial = (text) => recognizer.onPartial?.(text);
      s.onFailure = onError;
      return t;
    },
    async probe(scope) {
      const res = await providerRequest(p, `${p.settings.baseUrl}${probePath}`, { method: 'GET' }, scope);
      res.close();
    },
  };
}
