/**
 * Configuration, resolved once from the environment (explicit option → env → default).
 * Every variable here is listed in README.md and .env.example.
 */
export interface Config {
  port: number;
  host: string;
  /** Real Postgres; unset means the embedded PGlite store. */
  databaseUrl?: string;
  /** Embedded store folder (PGlite data, secret key, recordings), or `memory`. */
  dataDir: string;
  /** Real Redis; unset means the in-memory shared state. */
  redisUrl?: string;
  /** When set, the value becomes the first team's API key. */
  bootstrapKey?: string;
  /** Starting credit of the first team, in micro-units (1,000,000 = 1.00). */
  bootstrapCreditMicros: bigint;
  /** Master key for secrets at rest (64 hex chars or base64 of 32 bytes). */
  secretKey?: string;
  logLevel: string;
  /** How long a verified API key is trusted without asking the store again. */
  authCacheMs: number;
  /** Bound on finishing in-flight requests at shutdown. */
  drainTimeoutMs: number;
  /** Model id → backend routing, `INFERENCE_BACKENDS`; unset routes everything to the native backend. */
  inferenceBackends?: string;
  /**
   * Address of the native backend (`BACKEND_ADDRESS`). Unset: the backend `npm start` launches
   * listens on a free loopback port it picks (so several Parleys share a host), and a platform
   * that launches none reaches `npm run backend`'s default, 127.0.0.1:50051.
   */
  backendAddress?: string;
  /** Start the native backend as a child process (`PARLEY_NATIVE_BACKEND`, default on unless INFERENCE_BACKENDS is set). */
  startNativeBackend: boolean;
  /** Speech engine of the native backend: `espeak` or `synthetic`. */
  speechEngine: 'espeak' | 'synthetic';
  livekit?: { url: string; apiKey: string; apiSecret: string };
  publicRatePerAgent: number;
  publicRatePerIp: number;
  /** Live sessions one node holds (`PARLEY_MAX_SESSIONS`); past it, creation answers 503. */
  maxSessions: number;
  /**
   * Inference calls in flight per backend address (`PARLEY_INFERENCE_MAX_CALLS`); more wait up
   * to 2 s, then 503 `Inference backend busy`. Unset: `inferenceCallLimit` derives it from
   * `maxSessions`.
   */
  inferenceMaxCalls?: number;
  /** Session price per started minute, in micro-units (`PARLEY_SESSION_PRICE_PER_MINUTE`, in currency units). */
  sessionPricePerMinuteMicros: bigint;
  /** host:port entries outbound requests may reach even though they are private (development, tests). */
  outboundAllow: string[];
  /** Live phone numbers one team may hold (`PARLEY_PHONE_NUMBER_LIMIT`, the N of the 403). */
  phoneNumberLimit: number;
  /** Rental of one phone number for one day, in micro-units (`PARLEY_PHONE_NUMBER_DAILY_PRICE`, in currency units). */
  phoneNumberDailyPriceMicros: bigint;
  /**
   * Phone-call settings over the environment's (`PARLEY_OUTBOUND_*`, `PARLEY_RING_TIMEOUT_MS`,
   * `PARLEY_TRANSFER_PRICE_PER_MINUTE`; `phoneCallSettings` in src/phone-calls/service.ts): tests and embedders.
   */
  phoneCalls?: { outboundEnabled?: boolean; dailyLimit?: number; concurrencyLimit?: number; ringTimeoutMs?: number; transferPricePerMinuteMicros?: bigint };
  otlpEndpoint?: string;
}

/**
 * Inference calls one backend address may have in flight: `PARLEY_INFERENCE_MAX_CALLS`, or twice
 * the node's live sessions (at least 1,000). Every live session holds a transcription stream for
 * its whole length and a turn adds up to two calls (the model, synthesis): twice the sessions
 * gives each its stream and half of them a turn at once. A fixed 1,000 left a node at its default
 * 2,000 sessions unable to start a turn past ~1,000 live sessions on one backend.
 */
export function inferenceCallLimit(config: Pick<Config, 'maxSessions' | 'inferenceMaxCalls'>): number {
  return config.inferenceMaxCalls ?? Math.max(1000, 2 * config.maxSessions);
}

const positiveInt = (name: string, n: number): number => {
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${n}`);
  return n;
};

/** Where `npm run backend` listens by default, and so where a platform without its own backend looks. */
export const DEFAULT_BACKEND_ADDRESS = '127.0.0.1:50051';

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const num = (name: string, def: number): number => {
    const v = env[name];
    if (v === undefined || v === '') return def;
    const n = Number(v);
    if (!Number.isFinite(n)) throw new Error(`${name} must be a number, got ${JSON.stringify(v)}`);
    return n;
  };
  const str = (name: string): string | undefined => (env[name] === undefined || env[name] === '' ? undefined : env[name]);
  const engine = str('PARLEY_SPEECH_ENGINE') ?? 'espeak';
  if (engine !== 'espeak' && engine !== 'synthetic') throw new Error(`PARLEY_SPEECH_ENGINE must be espeak or synthetic, got ${engine}`);
  const lk = str('LIVEKIT_URL') && str('LIVEKIT_API_KEY') && str('LIVEKIT_API_SECRET')
    ? { url: env.LIVEKIT_URL!, apiKey: env.LIVEKIT_API_KEY!, apiSecret: env.LIVEKIT_API_SECRET! }
    : undefined;
  const inferenceBackends = str('INFERENCE_BACKENDS');
  const nativeFlag = str('PARLEY_NATIVE_BACKEND');
  const config: Config = {
    port: num('PORT', 8080),
    host: str('HOST') ?? '0.0.0.0',
    databaseUrl: str('DATABASE_URL'),
    dataDir: str('PARLEY_DATA_DIR') ?? './data',
    redisUrl: str('REDIS_URL'),
    bootstrapKey: str('PARLEY_BOOTSTRAP_KEY'),
    bootstrapCreditMicros: BigInt(Math.round(num('PARLEY_BOOTSTRAP_CREDIT', 100) * 1_000_000)),
    secretKey: str('PARLEY_SECRET_KEY'),
    logLevel: str('LOG_LEVEL') ?? 'info',
    authCacheMs: num('PARLEY_AUTH_CACHE_MS', 2000),
    drainTimeoutMs: num('PARLEY_DRAIN_TIMEOUT_MS', 10_000),
    inferenceBackends,
    backendAddress: str('BACKEND_ADDRESS'),
    startNativeBackend: nativeFlag !== undefined ? nativeFlag !== 'false' && nativeFlag !== '0' : !inferenceBackends,
    speechEngine: engine,
    livekit: lk,
    publicRatePerAgent: num('PARLEY_PUBLIC_RATE_PER_AGENT', 60),
    publicRatePerIp: num('PARLEY_PUBLIC_RATE_PER_IP', 10),
    maxSessions: num('PARLEY_MAX_SESSIONS', 2000),
    inferenceMaxCalls: env.PARLEY_INFERENCE_MAX_CALLS ? positiveInt('PARLEY_INFERENCE_MAX_CALLS', num('PARLEY_INFERENCE_MAX_CALLS', 0)) : undefined,
    sessionPricePerMinuteMicros: BigInt(Math.round(num('PARLEY_SESSION_PRICE_PER_MINUTE', 0.1) * 1_000_000)),
    phoneNumberLimit: num('PARLEY_PHONE_NUMBER_LIMIT', 10),
    phoneNumberDailyPriceMicros: BigInt(Math.round(num('PARLEY_PHONE_NUMBER_DAILY_PRICE', 0.05) * 1_000_000)),
    outboundAllow: (str('PARLEY_OUTBOUND_ALLOW') ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    otlpEndpoint: str('OTEL_EXPORTER_OTLP_ENDPOINT'),
  };
  return { ...config, ...overrides };
}
