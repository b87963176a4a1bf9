// The native backend's settings, read from the environment in this one place (docs/inference.md
// "The native backend", docs/providers.md). `startBackend` takes them as defaults; its options
// override them.
import { isMainThread } from 'node:worker_threads';
import type { Pacing } from './speech.ts';

export type LlmProviderKind = 'openai';
export type SttProviderKind = 'openai' | 'openai-realtime' | 'elevenlabs';
export type TtsProviderKind = 'openai' | 'elevenlabs';

/** One capability's provider: where it is, its key and its model, as the operator wrote them. */
export interface ProviderSettings<K extends string = string> {
  kind: K;
  /** The provider's HTTP base, without a trailing slash (`https://api.openai.com/v1`). */
  baseUrl: string;
  /** Sent as `Authorization: Bearer` (OpenAI-style) or `xi-api-key` (ElevenLabs-style); '' sends none. */
  apiKey: string;
  /** The provider's own model id. */
  model: string;
}

export interface TtsProviderSettings extends ProviderSettings<TtsProviderKind> {
  /** The provider's voice used when a request names none. */
  voice: string;
}

export interface ProvidersConfig {
  llm?: ProviderSettings<LlmProviderKind>;
  stt?: ProviderSettings<SttProviderKind>;
  tts?: TtsProviderSettings;
  /**
   * Longest wait for a provider's first byte when the call has no deadline of its own
   * (`PARLEY_PROVIDER_TIMEOUT_MS`, default 60 s: a local thinking model can take 20 s).
   */
  firstByteTimeoutMs: number;
}

export interface NativeConfig {
  /** `BACKEND_ADDRESS`, default 127.0.0.1:50051. */
  address: string;
  /** `PARLEY_SPEECH_ENGINE`: engine behind the speech model ids when no speech provider is set. */
  speechEngine: 'espeak' | 'synthetic';
  /** `PARLEY_SYNTHETIC_TTFA_MS`. */
  timeToFirstAudioMs: number;
  /** `PARLEY_SYNTHETIC_PACING`. */
  pacing: Pacing['mode'];
  /** `PARLEY_CHUNK_MS`. */
  chunkMs: number;
  /** `PARLEY_MAX_CALLS`. */
  maxConcurrentCalls: number;
  /** `PARLEY_BACKEND_TIMINGS`: a file for the turn timings, or undefined. */
  timingsFile: string | undefined;
  /** `LOG_LEVEL` of the program (in-process backends log nothing unless given a logger). */
  logLevel: string;
  providers: ProvidersConfig;
  /**
   * Launched by the platform (PARLEY_BACKEND_PARENT_PIPE=1, set by src/inference/native-process.ts; native/server.ts `stopWhenAsked`):
   * stdin is a pipe from the platform that is never written, and its end means the platform is
   * gone, however it went (a SIGKILL too): the backend then stops instead of living on alone.
   */
  parentPipe: boolean;
}

/** Default base URL and model of each provider kind. */
const DEFAULTS = {
  llm: { openai: { baseUrl: 'https://api.openai.com/v1', model: 'gpt-4o-mini' } },
  stt: {
    openai: { baseUrl: 'https://api.openai.com/v1', model: 'whisper-1' },
    'openai-realtime': { baseUrl: 'https://api.openai.com/v1', model: 'gpt-4o-transcribe' },
    elevenlabs: { baseUrl: 'https://api.elevenlabs.io', model: 'scribe_v2_realtime' },
  },
  tts: {
    openai: { baseUrl: 'https://api.openai.com/v1', model: 'tts-1', voice: 'alloy' },
    elevenlabs: { baseUrl: 'https://api.elevenlabs.io', model: 'eleven_flash_v2_5', voice: '' },
  },
} as const;

type Env = Record<string, string | undefined>;

function str(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

function num(env: Env, name: string, fallback: number, min = 0): number {
  const v = str(env, name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n) || n < min) throw new Error(`${name} must be a number of at least ${min}, not ${JSON.stringify(v)}`);
  return n;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[]): T | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(v)) throw new Error(`${name} must be ${allowed.join(', ')} or unset, not ${JSON.stringify(v)}`);
  return v as T;
}

/** A base URL as written, checked, without its trailing slash. */
function baseUrl(env: Env, name: string, fallback: string): string {
  const v = str(env, name) ?? fallback;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new Error(`${name} must be an http(s) URL, not ${JSON.stringify(v)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`${name} must be an http(s) URL, not ${JSON.stringify(v)}`);
  if (u.search || u.hash) throw new Error(`${name} must not carry a query or fragment`);
  return v.replace(/\/+$/, '');
}

function provider<K extends string>(env: Env, cap: 'LLM' | 'STT' | 'TTS', kind: K, defaults: { baseUrl: string; model: string }): ProviderSettings<K> {
  return {
    kind,
    baseUrl: baseUrl(env, `PARLEY_${cap}_BASE_URL`, defaults.baseUrl),
    apiKey: str(env, `PARLEY_${cap}_API_KEY`) ?? '',
    model: str(env, `PARLEY_${cap}_MODEL`) ?? defaults.model,
  };
}

/** The providers of `env` (each capability unset keeps its built-in engine). Throws on a bad value. */
export function readProviders(env: Env = process.env): ProvidersConfig {
  const out: ProvidersConfig = { firstByteTimeoutMs: num(env, 'PARLEY_PROVIDER_TIMEOUT_MS', 60_000, 1) };
  const llm = oneOf(env, 'PARLEY_LLM_PROVIDER', ['openai'] as const);
  if (llm) out.llm = provider(env, 'LLM', llm, DEFAULTS.llm[llm]);
  const stt = oneOf(env, 'PARLEY_STT_PROVIDER', ['openai', 'openai-realtime', 'elevenlabs'] as const);
  if (stt) out.stt = provider(env, 'STT', stt, DEFAULTS.stt[stt]);
  const tts = oneOf(env, 'PARLEY_TTS_PROVIDER', ['openai', 'elevenlabs'] as const);
  if (tts) {
    const voice = str(env, 'PARLEY_TTS_VOICE') ?? DEFAULTS.tts[tts].voice;
    if (!voice) throw new Error('PARLEY_TTS_VOICE must name one of the provider\'s voices (an ElevenLabs voice id) when PARLEY_TTS_PROVIDER is elevenlabs');
    out.tts = { ...provider(env, 'TTS', tts, DEFAULTS.tts[tts]), voice };
  }
  return out;
}

/** Every setting of the native backend from `env`. Throws on a malformed value (at start-up). */
export function readNativeConfig(env: Env = process.env): NativeConfig {
  return {
    address: str(env, 'BACKEND_ADDRESS') ?? '127.0.0.1:50051',
    speechEngine: oneOf(env, 'PARLEY_SPEECH_ENGINE', ['espeak', 'synthetic'] as const) ?? 'espeak',
    timeToFirstAudioMs: num(env, 'PARLEY_SYNTHETIC_TTFA_MS', 0),
    pacing: str(env, 'PARLEY_SYNTHETIC_PACING') === 'realtime' ? 'realtime' : 'fast',
    chunkMs: num(env, 'PARLEY_CHUNK_MS', 100, 1),
    maxConcurrentCalls: num(env, 'PARLEY_MAX_CALLS', 4096, 1),
    timingsFile: str(env, 'PARLEY_BACKEND_TIMINGS'),
    logLevel: str(env, 'LOG_LEVEL') ?? 'info',
    providers: readProviders(env),
    parentPipe: str(env, 'PARLEY_BACKEND_PARENT_PIPE') === '1',
  };
}

/** What a provider is, for logs, Health and error messages: never its key. */
export function describeProvider(p: ProviderSettings): string {
  let host = p.baseUrl;
  try {
    host = new URL(p.baseUrl).host;
  } catch {
    // baseUrl was checked at start-up; keep it as written otherwise
  }
  return `${p.kind} provider at ${host} (model ${p.model})`;
}

/**
 * onnxruntime 1.30 and later send usage telemetry to Microsoft from Linux and macOS too, and keep a
 * device id and an event cache under `~/.cache/Microsoft/DeveloperTools/.onnxruntime` and a
 * `mat-debug-<pid>.log` in /tmp, unless `ORT_DISABLE_TELEMETRY=1` is in the process's environment
 * when the library starts. A self-hosted platform sends nothing anywhere unasked: the variable is
 * set unless the operator set it (docs/providers.md, "The speech detector"). The native library
 * reads the process's real environment, which only the main thread's `process.env` writes (a
 * worker's is a copy), so the detector calls this before its worker loads the library
 * (native/providers/vad.ts).
 */
export function optOutOfOrtTelemetry(): void {
  // Unset or empty (an .env copied from .env.example): off.
  if (isMainThread && !process.env.ORT_DISABLE_TELEMETRY) process.env.ORT_DISABLE_TELEMETRY = '1';
}
