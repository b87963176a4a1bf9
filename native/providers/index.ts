// The provider engines of the native backend (docs/providers.md): each capability (chat,
// speech, transcription) picks its engine on its own from the configuration; a capability left
// unset keeps the built-in engine. Health probes each provider with a cheap call (listing its
// models), at most every PROBE_INTERVAL_MS, in the background.
import type { Logger } from 'pino';
import type { ProvidersConfig } from '../config.ts';
import { providerOf, type CallScope, type Provider } from './http.ts';
import { createOpenAiChat, type ChatEngine } from './llm-openai.ts';
import type { SpeechProvider } from './speech.ts';
import type { TranscriptionProvider } from './transcription.ts';
import { createOpenAiSpeech } from './tts-openai.ts';
import { createElevenLabsSpeech } from './tts-elevenlabs.ts';
import { createOpenAiTranscription } from './stt-openai.ts';
import { createRealtimeTranscription } from './stt-realtime.ts';
import { createElevenLabsTranscription } from './stt-elevenlabs.ts';
import { StatusError } from '../status.ts';
import type { TurnDetectorFactory } from './turns.ts';

/** How often a provider is asked whether it answers, at most. */
export const PROBE_INTERVAL_MS = 15_000;
/** How long a probe may take. */
const PROBE_TIMEOUT_MS = 3_000;

export interface ProviderHealth {
  /** `llm`, `stt` or `tts` and the provider (`stt: openai provider at host (model m)`). */
  name: string;
  ok: boolean;
  detail: string;
}

export interface Providers {
  chat?: ChatEngine;
  speech?: SpeechProvider;
  transcription?: TranscriptionProvider;
  /** The last probe of each configured provider (a probe is started when it is stale). */
  health(): ProviderHealth[];
  /** Probes every provider now (start-up waits for it, briefly). */
  probe(): Promise<void>;
  close(): Promise<void>;
}

export function createProviders(cfg: ProvidersConfig, o: { logger: Logger; detector: TurnDetectorFactory }): Providers {
  const t = cfg.firstByteTimeoutMs;
  const chat = cfg.llm ? createOpenAiChat(providerOf(cfg.llm, t, 'bearer')) : undefined;
  let speech: SpeechProvider | undefined;
  if (cfg.tts?.kind === 'openai') speech = createOpenAiSpeech(providerOf(cfg.tts, t, 'bearer'), cfg.tts.voice);
  else if (cfg.tts?.kind === 'elevenlabs') speech = createElevenLabsSpeech(providerOf(cfg.tts, t, 'xi-api-key'), cfg.tts.voice);
  let transcription: TranscriptionProvider | undefined;
  if (cfg.stt?.kind === 'openai') transcription = createOpenAiTranscription(providerOf(cfg.stt, t, 'bearer'), o.detector);
  else if (cfg.stt?.kind === 'openai-realtime') transcription = createRealtimeTranscription(providerOf(cfg.stt, t, 'bearer'), o.detector);
  else if (cfg.stt?.kind === 'elevenlabs') transcription = createElevenLabsTranscription(providerOf(cfg.stt, t, 'xi-api-key'), o.detector);

  const engines: [string, { provider: Provider; probe(scope: CallScope): Promise<void> }][] = [];
  if (chat) engines.push(['llm', chat]);
  if (transcription) engines.push(['stt', transcription]);
  if (speech) engines.push(['tts', speech]);
  const state = new Map<string, { ok: boolean; detail: string; at: number; running: Promise<void> | null }>();
  const closing = new AbortController();

  const probeOne = (cap: string, e: (typeof engines)[number][1]): Promise<void> => {
    const s = state.get(cap) ?? { ok: false, detail: 'not probed yet', at: 0, running: null };
    state.set(cap, s);
    if (s.running) return s.running;
    const signal = AbortSignal.any([closing.signal, AbortSignal.timeout(PROBE_TIMEOUT_MS)]);
    const running: Promise<void> = e.probe({ signal, deadline: Date.now() + PROBE_TIMEOUT_MS }).then(
      () => {
        Object.assign(s, { ok: true, detail: `${e.provider.what}: answering` });
      },
      (err) => {
        const why = err instanceof StatusError ? err.details : signal.aborted ? `${e.provider.what} did not answer within ${PROBE_TIMEOUT_MS} ms` : `${e.provider.what}: ${err instanceof Error ? err.message : String(err)}`;
        if (s.ok) o.logger.warn({ provider: e.provider.what, why }, 'provider stopped answering');
        Object.assign(s, { ok: false, detail: why });
      },
    ).finally(() => {
      s.at = Date.now();
      s.running = null;
    });
    s.running = running;
    return running;
  };

  return {
    chat,
    speech,
    transcription,
    health() {
      return engines.map(([cap, e]) => {
        const s = state.get(cap);
        if (!s || (Date.now() - s.at > PROBE_INTERVAL_MS && !closing.signal.aborted)) void probeOne(cap, e);
        const now = state.get(cap)!;
        return { name: `${cap}: ${e.provider.what}`, ok: now.ok, detail: now.detail };
      });
    },
    async probe() {
      await Promise.all(engines.map(([cap, e]) => probeOne(cap, e)));
    },
    async close() {
      closing.abort(new Error('backend closing'));
      await Promise.all([...state.values()].map((s) => s.running));
      await speech?.close?.();
      await transcription?.close?.();
      for (const [, e] of engines) e.provider.close();
    },
  };
}
