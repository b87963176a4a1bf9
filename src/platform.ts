import { randomBytes } from 'node:crypto';
import { adminModule } from './admin/module.ts';
import { agentTestsModule } from './agent-tests/module.ts';
import { agentsModule } from './agents/module.ts';
import { analysisModule } from './analysis/module.ts';
import { authModule } from './auth/module.ts';
import { claimDataDir } from './admin/control-file.ts';
import { compatModule } from './compat/module.ts';
import { loadConfig, type Config, type ConfigOverrides } from './config.ts';
import type { SecretBox } from './crypto/secrets.ts';
import { draftsModule } from './drafts/module.ts';
import { HttpApp, uwsBinding } from './http/app.ts';
import { Health, mountOpsRoutes } from './http/ops-routes.ts';
import type { InferenceClient, NativeProcess } from './inference/index.ts';
import { inferenceModules } from './inference/module.ts';
import { knowledgeModule } from './knowledge/module.ts';
import { createLogger, type Logger } from './log.ts';
import { startModules, type Module, type Telephony, type WorkerRole, type Wiring, type Workers } from './modules.ts';
import { workerMetrics } from './threads/metrics.ts';
import { phoneCallsModule } from './phone-calls/module.ts';
import { phoneNumbersModule } from './phone-numbers/module.ts';
import { previewModule } from './preview/module.ts';
import { recordingsModule } from './recordings/module.ts';
import type { SessionRuntime } from './sessions/runtime.ts';
import { sessionsModule } from './sessions/module.ts';
import { speechModule } from './speech/module.ts';
import type { SharedState } from './state/index.ts';
import { stateModule } from './state/module.ts';
import type { Database } from './store/db.ts';
import { storeModule } from './store/module.ts';
import { applyHeapGrowth } from './telemetry/heap.ts';
import { Metrics } from './telemetry/metrics.ts';
import { toolsModule } from './tools/module.ts';
import { usageModule } from './usage/module.ts';
import { voiceDesignModule } from './voice-design/module.ts';
import { voicesModule } from './voices/module.ts';
import { walletModule } from './wallet/module.ts';
import { mountWeb } from './web/routes.ts';
import { webhooksModule } from './webhooks/module.ts';
import { widgetConfigModule } from './widget-config/module.ts';

export interface Platform {
  config: Config;
  log: Logger;
  http: HttpApp;
  db: Database;
  state: SharedState;
  box: SecretBox;
  /** Every model call goes through this client to an inference backend over gRPC. */
  inference: InferenceClient;
  /** The native backend child process, when this platform started one. */
  nativeBackend?: NativeProcess;
  /** The session runtime: the supervisor of every live session on this node. */
  runtime: SessionRuntime;
  /** The carriers: the sandbox's failure switches, LiveKit SIP and the LiveKit agents when configured. */
  telephony: Telephony;
  /** The background workers (webhook deliveries, post-call analysis, phone-number rental). */
  workers: Workers;
  health: Health;
  metrics: Metrics;
  /** `http://127.0.0.1:<port>` */
  url: string;
  port: number;
  /** The bootstrap key when this start created or registered one. */
  bootstrapKey?: string;
  teamId: string;
  close(): Promise<void>;
}

export interface StartOptions {
  config?: ConfigOverrides;
  /** The variables to configure from (default: the process's; src/config.ts reads them). */
  env?: NodeJS.ProcessEnv;
  log?: Logger;
  /** Postgres schema to isolate in (tests on a shared server). */
  dbSchema?: string;
  /** Shared-state key prefix (tests on a shared Redis). */
  statePrefix?: string;
  /** Where the browser-facing build is (default: the package's dist/, see scripts/build.mjs). */
  webDir?: string;
  /** This platform is one worker of a node of several (`src/threads/worker.ts` sets it). */
  worker?: WorkerRole;
}

/**
 * The platform's modules, in start order (each needs only what the ones before it offer);
 * shutdown closes them in reverse. Layers first, then the features.
 */
export function platformModules(opts: Pick<StartOptions, 'dbSchema' | 'statePrefix'> = {}): Module[] {
  const inference = inferenceModules();
  return [
    inference.launch,
    storeModule(opts.dbSchema),
    stateModule(opts.statePrefix),
    inference.connect,
    authModule,
    adminModule,
    agentsModule,
    toolsModule,
    knowledgeModule,
    draftsModule,
    speechModule,
    voiceDesignModule,
    voicesModule,
    walletModule,
    usageModule,
    recordingsModule,
    sessionsModule,
    widgetConfigModule,
    previewModule,
    agentTestsModule,
    webhooksModule,
    analysisModule,
    phoneNumbersModule,
    phoneCallsModule,
    compatModule,
  ];
}

/**
 * Starts the whole platform: the HTTP server first (so /health answers at once and /ready
 * says 503 until the store is migrated; the console and the SDK's browser bundle need no
 * store), then the modules of `platformModules` in order.
 */
export async function startPlatform(opts: StartOptions = {}): Promise<Platform> {
  // Where start-up time goes, logged with "parley ready" (bench/startup.ts reads it).
  const began = performance.now();
  const startup: Record<string, number> = {};
  const mark = (phase: string) => void (startup[phase] = Math.round(performance.now() - began));
  const config = loadConfig(opts.env, opts.config);
  const log = opts.log ?? createLogger({ level: config.logLevel, pii: config.logPii });
  applyHeapGrowth(config.heapGrowthPercent, config.gcMarkingStartPercent);
  const worker = opts.worker;
  // The process's own metrics (CPU, memory) are counted once per node: by its worker 0.
  const metrics = new Metrics({ processMetrics: !worker || worker.index === 0 });
  const health = new Health();
  const wiring: Partial<Wiring> = { config, log, health, metrics, startup: mark, worker };
  const http = new HttpApp({
    log,
    metrics,
    drainTimeoutMs: config.drainTimeoutMs,
    bodyTimeoutMs: config.bodyTimeoutMs,
    wsStartTimeoutMs: config.wsStartTimeoutMs,
    wsStallTimeoutMs: config.wsStallTimeoutMs,
    authenticate: (token, messages) => {
      if (!wiring.authenticate) throw new Error('authentication before the store is ready');
      return wiring.authenticate(token, messages);
    },
  });
  http.starting = true;
  const binding = uwsBinding();
  if (!binding.native) log.error({ reason: binding.reason }, 'uWebSockets.js native binding missing; running on the slow fallback');
  health.register('http', async () => (binding.native ? { status: 'ok' } : { status: 'degraded', detail: binding.reason }), { requiredForReady: false });
  health.register('workers', async () => ({
    status: 'ok',
    detail: worker ? `${worker.count} workers (${config.workersReason}); this answer is from worker ${worker.index}` : `1 worker (${config.workersReason})`,
  }), { requiredForReady: false });
  if (worker) workerMetrics(metrics, worker);
  mountOpsRoutes(http, health, metrics);
  mountWeb(http, { distDir: opts.webDir });
  // A worker shares the port its node's main thread claimed (D-SCALE-2).
  const port = await http.listen(config.host, config.port, { shared: !!worker });
  // The embedded store's folder is this process's alone: the CLI reaches it through this server.
  const localHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  let claim: { token: string; release(): void } | undefined;
  try {
    claim = !config.databaseUrl && config.dataDir !== 'memory' ? claimDataDir(config.dataDir, `http://${localHost.includes(':') ? `[${localHost}]` : localHost}:${port}`) : undefined;
  } catch (err) {
    await http.close();
    throw err;
  }
  Object.assign(wiring, { http, port, localHost, claim });

  const closers: (() => Promise<void> | void)[] = [];
  if (claim) closers.push(() => claim.release());
  // Shutdown in three steps: stop accepting and finish in-flight requests (sockets of routes
  // without a drain of their own close 1001); the modules close in reverse (the sessions drain:
  // each client gets `session.ended`, then close 1000 `shutdown`); the sockets left close 1001.
  let closing: Promise<void> | undefined;
  const closeAll = () => (closing ??= (async () => {
    await http.stopAccepting();
    for (const c of closers.reverse()) await Promise.resolve().then(c).catch((err) => log.warn({ err }, 'close failed'));
    await http.closeSockets();
  })());
  try {
    mark('listening');
    await startModules(platformModules(opts), wiring, log, (c) => closers.push(c));
    const w = wiring as Wiring;
    http.starting = false;
    health.ready = true;
    mark('ready');
    log.info({ port, store: w.db.kind, state: w.state.kind, startup_ms: startup }, 'parley ready');
    return {
      config, log, http, db: w.db, state: w.state, box: w.box, inference: w.inference, nativeBackend: w.nativeBackend,
      runtime: w.runtime, telephony: w.telephony, workers: { webhooks: w.webhookWorker, analysis: w.analysisWorker, phoneRental: w.phoneRental },
      health, metrics, port,
      url: `http://127.0.0.1:${port}`,
      bootstrapKey: w.bootstrapKey,
      teamId: w.teamId,
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** A random schema name for isolating a test run on a shared Postgres. */
export function randomSchema(): string {
  return `t_${randomBytes(6).toString('hex')}`;
}
