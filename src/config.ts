/**
 * Configuration, resolved once from the environment (explicit option → env → default).
 * This is the only module of the platform that reads `process.env` (the native backend has
 * native/config.ts; the CLI reads its own flags). Every variable is a field below, and is
 * listed in .env.example. The parsers of a group of variables (phone calls, recordings,
 * back-off lists) live here too; the feature modules re-export the ones their tests use.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { join, resolve } from 'node:path';

export type Env = Readonly<Record<string, string | undefined>>;

export interface Config {
  port: number;
  host: string;
  /** Real Postgres; unset means the embedded PGlite store. */
  databaseUrl?: string;
  /** Embedded store folder (PGlite data, secret key, recordings), or `memory`. */
  dataDir: string;
  /**
   * A Postgres connection with a query outstanding that hears nothing from the server for this
   * long is dropped and its queries fail as for an unreachable store (`503`): the bound on a
   * black-holed network (`PARLEY_DB_SILENCE_TIMEOUT_MS`, default 5 s; 0 turns it off; not
   * applied to migrations, the embedded store or TLS connections). The same switch bounds the
   * wait for a connection: once a connect times out unanswered, the pool's connects fail at once
   * (`503`) until a probe hears the server (`src/store/silence.ts`).
   */
  dbSilenceTimeoutMs: number;
  /** Real Redis; unset means the in-memory shared state. */
  redisUrl?: string;
  /**
   * A Redis command unanswered for this long fails (`503`) and the connection is reopened: the
   * bound on a black-holed network (`PARLEY_REDIS_COMMAND_TIMEOUT_MS`, default 2 s; 0 turns it off).
   */
  redisCommandTimeoutMs: number;
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
  /**
   * A request body not complete this long after its headers → 408 and the connection closed
   * (`PARLEY_BODY_TIMEOUT_MS`, default 120 s; 0 turns it off). docs/reliability.md "Slow clients".
   */
  bodyTimeoutMs: number;
  /**
   * A WebSocket that authenticates or starts in its first message and has not sent it this long
   * after the upgrade is closed 4408 (`PARLEY_WS_START_TIMEOUT_MS`, default 10 s; 0 turns it off).
   */
  wsStartTimeoutMs: number;
  /**
   * A WebSocket whose unsent bytes stay past its high-water mark this long without the client
   * taking any is closed 4008 (`PARLEY_WS_STALL_TIMEOUT_MS`, default 30 s; 0 turns it off).
   */
  wsStallTimeoutMs: number;
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
  /** Live sessions one node holds (`PARLEY_MAX_SESSIONS`, shared by its workers); past it, creation answers 503. */
  maxSessions: number;
  /**
   * Past this wait, in ms, of caller audio (or synthesis input) written to the inference backend
   * and not yet sent, session creation answers 503 until it is sent
   * (`PARLEY_MAX_INFERENCE_BACKLOG_MS`, default 1000; 0: never). docs/inference.md, "Send backlog".
   */
  maxInferenceBacklogMs: number;
  /**
   * Event loops (worker threads) of this node, all serving `PORT` (`PARLEY_WORKERS`; see
   * `workerCount`). 1 is the single loop of the main thread. Several need DATABASE_URL and
   * REDIS_URL: the embedded store and the in-memory shared state live in one thread.
   */
  workers: number;
  /** Where `workers` came from, for /health: `PARLEY_WORKERS`, or the default and its reason. */
  workersReason: string;
  /**
   * A node whose last beat is older than this is lost and its sessions are ended `node_lost`
   * (`PARLEY_NODE_STALE_MS`, default 20 s; nodes beat every quarter of it and sweep every half).
   */
  nodeStaleMs: number;
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
   * Phone-call settings (`PARLEY_OUTBOUND_CALLS`, `PARLEY_OUTBOUND_DAILY_LIMIT`,
   * `PARLEY_OUTBOUND_CONCURRENCY`, `PARLEY_RING_TIMEOUT_MS`, `PARLEY_TRANSFER_PRICE_PER_MINUTE`;
   * `phoneCallSettings`). Overrides (tests, embedders) merge field by field.
   */
  phoneCalls: PhoneCallSettings;
  /** The sandbox phones at wss /v1/telephony/sandbox/calls (`PARLEY_SANDBOX_CALLS`, `on` unless `off`). */
  sandboxCalls: boolean;
  /** `LIVEKIT_SIP_OUTBOUND_TRUNK_ID`: outbound calls and transfers' consult legs over LiveKit SIP. */
  livekitSipOutboundTrunkId: string | null;
  /** How long session creation waits for LiveKit to create the room (`LIVEKIT_ROOM_TIMEOUT_MS`; unset: the transport's default). */
  livekitRoomTimeoutMs?: number;
  /** Per-team speech concurrency for every team (`PARLEY_SPEECH_CONCURRENCY`); unset: the spend tiers. */
  speechConcurrency?: number;
  /**
   * Usage records that may wait for an unreachable store before new billable speech calls are
   * refused `503` (`PARLEY_USAGE_BACKLOG_MAX`, default 50,000; 0: no mark). See
   * `src/speech/usage.ts`.
   */
  usageBacklogMax: number;
  /** This node in the session registry: `PARLEY_NODE_ID`, `PARLEY_NODE_URL` (see `nodeIdentity`). */
  node: { id?: string; url?: string };
  /**
   * Recordings: `PARLEY_RECORDINGS_DIR` (else `<data dir>/recordings`, or a temporary folder
   * with the `memory` store) and S3-compatible storage (`PARLEY_RECORDINGS_S3_*`, `s3ConfigFromEnv`).
   */
  recordings: { dir: string; ephemeral: boolean; s3: S3Config | null };
  /** Delays between post-call webhook attempts (`PARLEY_WEBHOOK_BACKOFF_MS`); unset: the worker's 1000,5000. */
  webhookBackoffMs?: number[];
  /** Delays between post-call analysis attempts (`PARLEY_ANALYSIS_BACKOFF_MS`); unset: the worker's. */
  analysisBackoffMs?: number[];
  /**
   * Tracing: OTLP/HTTP export of spans when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL)
   * or `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended) is set; `OTEL_SERVICE_NAME`
   * (default `parley`).
   */
  tracing: TracingConfig;
  otlpEndpoint?: string;
  /** Log `pii` fields instead of redacting them (`PARLEY_LOG_PII=true`; a developer's own machine only). */
  logPii: boolean;
  /**
   * How far the JavaScript heap's old generation may grow past what survived the last full
   * collection before the next one starts, in percent (`PARLEY_HEAP_GROWTH_PERCENT`, default
   * HEAP_GROWTH_DEFAULT; 0: V8's own heuristic). Process-wide (every worker): applied at start
   * (src/platform.ts). V8's heuristic keeps a server's heap tight: at 300 talking sessions it
   * started a full collection every 0.5–0.9 s for ~8 MB of growth, and that marking was a third
   * of the node's CPU (bench/README.md, twelfth pass).
   */
  heapGrowthPercent: number;
  /**
   * How much of that growth the old generation uses before V8 starts marking it for the next
   * full collection, in percent (`PARLEY_GC_MARKING_START_PERCENT`, default
   * GC_MARKING_START_DEFAULT, 1–99; 0: V8's own rule). V8's rule starts marking as soon as the
   * room left is below its young generation's size (32 MB): with ~70 MB live at 300 talking
   * sessions that is always, so it marked the whole heap every 0.5 s (bench/README.md, eighteenth
   * pass; D-SCALE-8). Process-wide, applied at start with `heapGrowthPercent`.
   */
  gcMarkingStartPercent: number;
}

/** What `startPlatform` and tests may set over the environment (`phoneCalls` merges field by field). */
export type ConfigOverrides = Partial<Omit<Config, 'phoneCalls'>> & { phoneCalls?: Partial<PhoneCallSettings> };

export interface TracingConfig {
  /** Where spans are exported (OTLP/HTTP); unset: not exported. */
  tracesUrl?: string;
  serviceName: string;
}

/** The `OTEL_*` variables tracing reads. */
export function tracingFromEnv(env: Env): TracingConfig {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const tracesUrl = endpoint ? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || `${endpoint.replace(/\/+$/, '')}/v1/traces` : undefined;
  return { tracesUrl, serviceName: env.OTEL_SERVICE_NAME ?? 'parley' };
}

/** The variables a child process of the platform (the native backend) inherits. */
export function inheritedEnvironment(): NodeJS.ProcessEnv {
  return process.env;
}

/**
 * `PARLEY_OUTBOUND_ALLOW` as it is now: the SSRF guard's default allow list for checks that
 * are not given one (`parseAllowList` in src/net/url-check.ts reads the entries).
 */
export function outboundAllowVariable(): string | undefined {
  return process.env.PARLEY_OUTBOUND_ALLOW;
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

/** A whole number, 0 or more (milliseconds, a count or a percent: the setting's name says which). */
const nonNegativeInt = (name: string, n: number): number => {
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number, 0 or more, got ${n}`);
  return n;
};

/** Where `npm run backend` listens by default, and so where a platform without its own backend looks. */
export const DEFAULT_BACKEND_ADDRESS = '127.0.0.1:50051';
/** `PARLEY_HEAP_GROWTH_PERCENT`'s default (bench/README.md, twelfth and twenty-fourth passes; D-SCALE-4). */
export const HEAP_GROWTH_DEFAULT = 50;
/** `PARLEY_GC_MARKING_START_PERCENT`'s default (bench/README.md, eighteenth pass). */
export const GC_MARKING_START_DEFAULT = 80;

/** A whole percent from `min` to `max` (a setting's value, refused at start when outside it). */
const percentInRange = (name: string, n: number, min: number, max: number): number => {
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`${name} must be a whole percent from ${min} to ${max}, got ${n}`);
  return n;
};

export function loadConfig(env: Env = process.env, overrides: ConfigOverrides = {}): Config {
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
  const workers = workerCount(env, { databaseUrl: str('DATABASE_URL'), redisUrl: str('REDIS_URL'), nativeBackend: nativeFlag !== undefined ? nativeFlag !== 'false' && nativeFlag !== '0' : !inferenceBackends });
  const config: Config = {
    workers: workers.count,
    workersReason: workers.reason,
    port: num('PORT', 8080),
    host: str('HOST') ?? '0.0.0.0',
    databaseUrl: str('DATABASE_URL'),
    dataDir: str('PARLEY_DATA_DIR') ?? './data',
    dbSilenceTimeoutMs: nonNegativeInt('PARLEY_DB_SILENCE_TIMEOUT_MS', num('PARLEY_DB_SILENCE_TIMEOUT_MS', 5000)),
    redisUrl: str('REDIS_URL'),
    redisCommandTimeoutMs: nonNegativeInt('PARLEY_REDIS_COMMAND_TIMEOUT_MS', num('PARLEY_REDIS_COMMAND_TIMEOUT_MS', 2000)),
    bootstrapKey: str('PARLEY_BOOTSTRAP_KEY'),
    bootstrapCreditMicros: BigInt(Math.round(num('PARLEY_BOOTSTRAP_CREDIT', 100) * 1_000_000)),
    secretKey: str('PARLEY_SECRET_KEY'),
    logLevel: str('LOG_LEVEL') ?? 'info',
    authCacheMs: num('PARLEY_AUTH_CACHE_MS', 2000),
    drainTimeoutMs: num('PARLEY_DRAIN_TIMEOUT_MS', 10_000),
    bodyTimeoutMs: num('PARLEY_BODY_TIMEOUT_MS', 120_000),
    wsStartTimeoutMs: num('PARLEY_WS_START_TIMEOUT_MS', 10_000),
    wsStallTimeoutMs: num('PARLEY_WS_STALL_TIMEOUT_MS', 30_000),
    inferenceBackends,
    backendAddress: str('BACKEND_ADDRESS'),
    startNativeBackend: nativeFlag !== undefined ? nativeFlag !== 'false' && nativeFlag !== '0' : !inferenceBackends,
    speechEngine: engine,
    livekit: lk,
    publicRatePerAgent: num('PARLEY_PUBLIC_RATE_PER_AGENT', 60),
    publicRatePerIp: num('PARLEY_PUBLIC_RATE_PER_IP', 10),
    maxSessions: num('PARLEY_MAX_SESSIONS', 2000),
    maxInferenceBacklogMs: num('PARLEY_MAX_INFERENCE_BACKLOG_MS', 1000),
    nodeStaleMs: positiveInt('PARLEY_NODE_STALE_MS', num('PARLEY_NODE_STALE_MS', 20_000)),
    inferenceMaxCalls: env.PARLEY_INFERENCE_MAX_CALLS ? positiveInt('PARLEY_INFERENCE_MAX_CALLS', num('PARLEY_INFERENCE_MAX_CALLS', 0)) : undefined,
    sessionPricePerMinuteMicros: BigInt(Math.round(num('PARLEY_SESSION_PRICE_PER_MINUTE', 0.1) * 1_000_000)),
    phoneNumberLimit: num('PARLEY_PHONE_NUMBER_LIMIT', 10),
    phoneNumberDailyPriceMicros: BigInt(Math.round(num('PARLEY_PHONE_NUMBER_DAILY_PRICE', 0.05) * 1_000_000)),
    outboundAllow: (str('PARLEY_OUTBOUND_ALLOW') ?? '').split(',').map((s) => s.trim()).filter(Boolean),
    phoneCalls: phoneCallSettings(env),
    sandboxCalls: (env.PARLEY_SANDBOX_CALLS ?? 'on').toLowerCase() !== 'off',
    livekitSipOutboundTrunkId: sipOutboundTrunkId(env),
    livekitRoomTimeoutMs: Number(env.LIVEKIT_ROOM_TIMEOUT_MS) || undefined,
    speechConcurrency: parseSpeechConcurrency(env.PARLEY_SPEECH_CONCURRENCY),
    usageBacklogMax: nonNegativeInt('PARLEY_USAGE_BACKLOG_MAX', num('PARLEY_USAGE_BACKLOG_MAX', 50_000)),
    node: { id: env.PARLEY_NODE_ID || undefined, url: env.PARLEY_NODE_URL || undefined },
    recordings: { ...recordingsDir(env, overrides.dataDir ?? str('PARLEY_DATA_DIR') ?? './data'), s3: s3ConfigFromEnv(env) },
    webhookBackoffMs: parseBackoff(env.PARLEY_WEBHOOK_BACKOFF_MS),
    analysisBackoffMs: parseBackoff(env.PARLEY_ANALYSIS_BACKOFF_MS, 'PARLEY_ANALYSIS_BACKOFF_MS'),
    tracing: tracingFromEnv(env),
    otlpEndpoint: str('OTEL_EXPORTER_OTLP_ENDPOINT'),
    logPii: env.PARLEY_LOG_PII === 'true',
    heapGrowthPercent: nonNegativeInt('PARLEY_HEAP_GROWTH_PERCENT', num('PARLEY_HEAP_GROWTH_PERCENT', HEAP_GROWTH_DEFAULT)),
    gcMarkingStartPercent: percentInRange('PARLEY_GC_MARKING_START_PERCENT', num('PARLEY_GC_MARKING_START_PERCENT', GC_MARKING_START_DEFAULT), 0, 99),
  };
  return { ...config, ...overrides, phoneCalls: { ...config.phoneCalls, ...overrides.phoneCalls } };
}

// ---------------------------------------------------------------------------------------------
// Parsers of groups of variables

/**
 * `PARLEY_WORKERS`: how many event loops (worker threads) serve this node's port. Unset: one
 * with the embedded store or the in-memory shared state (they live in one thread); else the
 * cores (`os.availableParallelism()`) less what the native backend `npm start` launches needs:
 * a quarter of them, at least one (its gRPC loop; its espeak threads work only while
 * synthesising). An explicit value above 1 without DATABASE_URL and REDIS_URL is a start error.
 */
export function workerCount(env: Env, o: { databaseUrl?: string; redisUrl?: string; nativeBackend: boolean; cores?: number }): { count: number; reason: string } {
  const raw = env.PARLEY_WORKERS?.trim();
  const embedded = !o.databaseUrl || !o.redisUrl;
  if (raw) {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) throw new Error(`PARLEY_WORKERS must be a positive integer, got ${JSON.stringify(raw)}`);
    if (n > 1 && embedded) throw new Error(`PARLEY_WORKERS=${n} needs DATABASE_URL and REDIS_URL: the embedded store and the in-memory shared state live in one thread (leave PARLEY_WORKERS unset or 1)`);
    return { count: n, reason: 'PARLEY_WORKERS' };
  }
  if (embedded) return { count: 1, reason: 'the embedded store or the in-memory shared state (no DATABASE_URL and REDIS_URL) runs one worker: both live in one thread' };
  const cores = o.cores ?? os.availableParallelism();
  const backend = o.nativeBackend ? Math.max(1, Math.round(cores / 4)) : 0;
  const count = Math.max(1, cores - backend);
  return { count, reason: o.nativeBackend ? `${cores} cores, ${backend} left to the native backend` : `${cores} cores` };
}

/** `LIVEKIT_SIP_OUTBOUND_TRUNK_ID`, trimmed; null when unset or blank. */
export function sipOutboundTrunkId(env: Env): string | null {
  return env.LIVEKIT_SIP_OUTBOUND_TRUNK_ID?.trim() || null;
}

/** Call limits per workspace (docs/api/phone.md "Limits"). */
export const OUTBOUND_DAILY_LIMIT = 200;
export const OUTBOUND_CONCURRENCY_LIMIT = 10;
/** How long a transfer's destination rings before the transfer fails (`PARLEY_RING_TIMEOUT_MS` default). */
export const TRANSFER_RING_TIMEOUT_MS = 30_000;
/** `PARLEY_TRANSFER_PRICE_PER_MINUTE` default, in currency units per started minute. */
export const TRANSFER_PRICE_PER_MINUTE = 0.1;

export interface PhoneCallSettings {
  dailyLimit: number;
  concurrencyLimit: number;
  /** `PARLEY_OUTBOUND_CALLS=off` refuses outbound calls (403 `outbound_disabled`). */
  outboundEnabled: boolean;
  ringTimeoutMs: number;
  /** Transfer minutes, per started minute, in micro-units (`PARLEY_TRANSFER_PRICE_PER_MINUTE`, in currency units). */
  transferPricePerMinuteMicros: bigint;
}

/** Settings from the environment (documented in .env.example). */
export function phoneCallSettings(env: Env): PhoneCallSettings {
  const int = (name: string, dflt: number) => {
    const v = env[name];
    if (v === undefined || v === '') return dflt;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer`);
    return n;
  };
  const price = (name: string, dflt: number) => {
    const v = env[name];
    const n = v === undefined || v === '' ? dflt : Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number (currency units)`);
    return BigInt(Math.round(n * 1_000_000));
  };
  return {
    dailyLimit: int('PARLEY_OUTBOUND_DAILY_LIMIT', OUTBOUND_DAILY_LIMIT),
    concurrencyLimit: int('PARLEY_OUTBOUND_CONCURRENCY', OUTBOUND_CONCURRENCY_LIMIT),
    outboundEnabled: (env.PARLEY_OUTBOUND_CALLS ?? 'on').toLowerCase() !== 'off',
    ringTimeoutMs: int('PARLEY_RING_TIMEOUT_MS', TRANSFER_RING_TIMEOUT_MS),
    transferPricePerMinuteMicros: price('PARLEY_TRANSFER_PRICE_PER_MINUTE', TRANSFER_PRICE_PER_MINUTE),
  };
}

/**
 * `PARLEY_WEBHOOK_BACKOFF_MS` (and `PARLEY_ANALYSIS_BACKOFF_MS`): comma-separated delays
 * between attempts (default `1000,5000`, docs/api/webhooks.md). Meant for tests and drills; an invalid value throws
 * at start-up.
 */
export function parseBackoff(env: string | undefined, name = 'PARLEY_WEBHOOK_BACKOFF_MS'): number[] | undefined {
  if (env === undefined || env.trim() === '') return undefined;
  const list = env.split(',').map((s) => Number(s.trim()));
  if (list.some((n) => !Number.isFinite(n) || n < 0)) throw new Error(`${name} must be comma-separated non-negative milliseconds`);
  return list;
}

/** `PARLEY_SPEECH_CONCURRENCY`: unset or empty → undefined (tiers apply); else a positive integer. */
export function parseSpeechConcurrency(raw: string | undefined): number | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`PARLEY_SPEECH_CONCURRENCY must be a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}

/**
 * `PARLEY_RECORDINGS_DIR`, else `<data dir>/recordings`; with the ephemeral store (`memory`)
 * a folder of its own under the system's temporary directory (`ephemeral`: remove it at close).
 */
export function recordingsDir(env: Env, dataDir: string): { dir: string; ephemeral: boolean } {
  const dir = env.PARLEY_RECORDINGS_DIR?.trim();
  if (dir) return { dir: resolve(dir), ephemeral: false };
  // Ephemeral store, ephemeral recordings: a folder of this platform alone, removed when it closes.
  if (dataDir === 'memory') return { dir: join(os.tmpdir(), `parley-recordings-${process.pid}-${randomBytes(4).toString('hex')}`), ephemeral: true };
  return { dir: resolve(dataDir, 'recordings'), ephemeral: false };
}

export interface S3Config {
  /** `https://s3.eu-west-1.amazonaws.com`, `http://127.0.0.1:9000`, … (no path). */
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Temporary credentials' token, sent as `x-amz-security-token`. */
  sessionToken?: string;
  /** Prefix of every object key (e.g. `recordings/`). */
  prefix?: string;
}

/**
 * `PARLEY_RECORDINGS_S3_ENDPOINT`, `_BUCKET`, `_REGION` (default `us-east-1`),
 * `_ACCESS_KEY_ID`, `_SECRET_ACCESS_KEY`, `_SESSION_TOKEN`, `_PREFIX`. Null when no endpoint is
 * set; an endpoint without bucket or keys is a start-up error.
 */
export function s3ConfigFromEnv(env: Env): S3Config | null {
  const endpoint = env.PARLEY_RECORDINGS_S3_ENDPOINT?.trim();
  if (!endpoint) return null;
  const bucket = env.PARLEY_RECORDINGS_S3_BUCKET?.trim();
  const accessKeyId = env.PARLEY_RECORDINGS_S3_ACCESS_KEY_ID?.trim();
  const secretAccessKey = env.PARLEY_RECORDINGS_S3_SECRET_ACCESS_KEY?.trim();
  if (!bucket || !accessKeyId || !secretAccessKey)
    throw new Error('PARLEY_RECORDINGS_S3_ENDPOINT needs PARLEY_RECORDINGS_S3_BUCKET, PARLEY_RECORDINGS_S3_ACCESS_KEY_ID and PARLEY_RECORDINGS_S3_SECRET_ACCESS_KEY');
  const u = new URL(endpoint);
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('PARLEY_RECORDINGS_S3_ENDPOINT must be an http(s) URL');
  return {
    endpoint: u.origin,
    bucket,
    region: env.PARLEY_RECORDINGS_S3_REGION?.trim() || 'us-east-1',
    accessKeyId,
    secretAccessKey,
    sessionToken: env.PARLEY_RECORDINGS_S3_SESSION_TOKEN?.trim() || undefined,
    prefix: env.PARLEY_RECORDINGS_S3_PREFIX?.trim() || undefined,
  };
}

/**
 * This node's identity for the session registry: its id (`PARLEY_NODE_ID`) and the base URL
 * clients elsewhere reach it at (`PARLEY_NODE_URL`, e.g. `wss://node-3.voice.example.com`).
 * A resume that lands on another node is sent to `<node url>/v1/agent/sessions/connect`.
 */
export function nodeIdentity(env: Env, host: string, port: number): { id: string; url: string } {
  return nodeAt({ id: env.PARLEY_NODE_ID, url: env.PARLEY_NODE_URL }, host, port);
}

/** `nodeIdentity` from the configured `node` fields. */
export function nodeAt(node: Config['node'], host: string, port: number): { id: string; url: string } {
  const id = node.id || `${os.hostname()}:${process.pid}:${port}`;
  let url = node.url?.replace(/\/+$/, '').replace(/^http(s?):/, 'ws$1:');
  if (!url) {
    // Default: the listening address; a wildcard address is replaced by the host name.
    const h = host === '0.0.0.0' || host === '::' || host === '' ? os.hostname() : host;
    url = `ws://${h.includes(':') ? `[${h}]` : h}:${port}`;
  }
  return { id, url };
}
