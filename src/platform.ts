import { randomBytes } from 'node:crypto';
import { AgentService } from './agents/service.ts';
import { mountAgentRoutes } from './agents/routes.ts';
import { KnowledgeService } from './knowledge/service.ts';
import { mountKnowledgeRoutes } from './knowledge/routes.ts';
import { ToolService } from './tools/service.ts';
import { mountToolRoutes } from './tools/routes.ts';
import { configHash, createDefaultDraft, patchDraft, type ReferenceResolver, type StoredDraft } from './agent-config/index.ts';
import { DraftService } from './drafts/service.ts';
import { mountDraftRoutes } from './drafts/routes.ts';
import { SessionService } from './sessions/service.ts';
import { mountSessionRoutes } from './sessions/routes.ts';
import { runtimes, SessionRuntime } from './sessions/runtime.ts';
import { realClock } from '../actors/clock.ts';
import { CONNECT_PATH, mountWebsocketTransport } from './transport/websocket.ts';
import { nodeIdentity } from './transport/node-url.ts';
import { SessionRegistry } from './state/session-registry.ts';
import { LivekitAgents, livekitSessionMinter } from './transport/livekit-agent.ts';
import { livekitRoomEnsurer } from './transport/livekit.ts';
import { KeyVerifier } from './auth/keys.ts';
import { bootstrap } from './auth/bootstrap.ts';
import { DEFAULT_BACKEND_ADDRESS, inferenceCallLimit, loadConfig, type Config } from './config.ts';
import { createSecretBox, loadMasterKey, type SecretBox } from './crypto/secrets.ts';
import { HttpApp, uwsBinding } from './http/app.ts';
import { Health, mountOpsRoutes } from './http/ops-routes.ts';
import { mountWeb } from './web/routes.ts';
import { UsageService } from './usage/service.ts';
import { mountUsageRoutes } from './usage/routes.ts';
import { claimDataDir } from './admin/control-file.ts';
import { mountAdminRoutes } from './admin/routes.ts';
import { storeAdmin } from './admin/service.ts';
import { createLogger, type Logger } from './log.ts';
import { createSharedState, type SharedState } from './state/index.ts';
import { openDatabase, type Database, type Sql } from './store/db.ts';
import { currentKnowledgeRevisions, knowledgeSourceIdsOf } from './knowledge/store.ts';
import { keyIsLive } from './auth/store-keys.ts';
import { migrate } from './store/migrate.ts';
import { createInferenceClient, spawnNativeBackend, type InferenceClient, type NativeProcess } from './inference/index.ts';
import { frozenToolsForPublish, toolIdsOf } from './tools/store.ts';
import { Metrics } from './telemetry/metrics.ts';
import { startTracing } from './telemetry/tracing.ts';
import { mountLiveRoute } from './speech/live.ts';
import { TtsService } from './speech/tts.ts';
import { mountTtsRoutes } from './speech/tts-routes.ts';
import { AsrService } from './speech/asr.ts';
import { CreditGate, recordUsage } from './speech/usage.ts';
import { parseSpeechConcurrency, SpeechConcurrency } from './speech/concurrency.ts';
import { mountAsrRoutes } from './speech/asr-routes.ts';
import { resolveVoice, VoiceService } from './voices/service.ts';
import { mountVoiceRoutes } from './voices/routes.ts';
import { mountWalletRoutes } from './wallet/routes.ts';
import { WalletService } from './wallet/service.ts';
import { parseBackoff, WebhookDeliveryService, WebhookWorker } from './webhooks/index.ts';
import { mountWebhookRoutes } from './webhooks/routes.ts';
import { ToolTestService } from './tools/test-service.ts';
import { mountToolTestRoutes } from './tools/test-routes.ts';
import { mountElevenLabsRoutes } from './compat/elevenlabs/routes.ts';

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
  config?: Partial<Config>;
  env?: NodeJS.ProcessEnv;
  log?: Logger;
  /** Postgres schema to isolate in (tests on a shared server). */
  dbSchema?: string;
  /** Shared-state key prefix (tests on a shared Redis). */
  statePrefix?: string;
  /** Where the browser-facing build is (default: the package's dist/, see scripts/build.mjs). */
  webDir?: string;
}

/**
 * Starts the whole platform: the HTTP server first (so /health answers at once and /ready
 * says 503 until the store is migrated), then the durable store, the shared state, the
 * secret box, the bootstrap team, and the API routes.
 */
export async function startPlatform(opts: StartOptions = {}): Promise<Platform> {
  // Where start-up time goes, logged with "parley ready" (bench/startup.ts reads it).
  const began = performance.now();
  const startup: Record<string, number> = {};
  const mark = (phase: string) => (startup[phase] = Math.round(performance.now() - began));
  const config = loadConfig(opts.env ?? process.env, opts.config);
  const log = opts.log ?? createLogger({ level: config.logLevel });
  const metrics = new Metrics();
  const health = new Health();
  let verifier: KeyVerifier | undefined;
  const http = new HttpApp({
    log,
    metrics,
    drainTimeoutMs: config.drainTimeoutMs,
    authenticate: (token, messages) => {
      if (!verifier) throw new Error('authentication before the store is ready');
      return verifier.verify(token, messages);
    },
  });
  http.starting = true;
  const binding = uwsBinding();
  if (!binding.native) log.error({ reason: binding.reason }, 'uWebSockets.js native binding missing; running on the slow fallback');
  health.register('http', async () => (binding.native ? { status: 'ok' } : { status: 'degraded', detail: binding.reason }), { requiredForReady: false });
  mountOpsRoutes(http, health, metrics);
  // The console and the SDK's browser bundle need no store: served from the first request.
  mountWeb(http, { distDir: opts.webDir });
  const port = await http.listen(config.host, config.port);
  // The embedded store's folder is this process's alone: the CLI reaches it through this server.
  const localHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  let claim: { token: string; release(): void } | undefined;
  try {
    claim = !config.databaseUrl && config.dataDir !== 'memory' ? claimDataDir(config.dataDir, `http://${localHost.includes(':') ? `[${localHost}]` : localHost}:${port}`) : undefined;
  } catch (err) {
    await http.close();
    throw err;
  }

  const cleanups: (() => Promise<void>)[] = [];
  if (claim) cleanups.push(async () => claim.release());
  const closeAll = async () => {
    await http.close();
    for (const c of cleanups.reverse()) await c().catch((err) => log.warn({ err }, 'close failed'));
  };
  // The native backend starts first: its engines load while the store opens and migrates.
  let nativeLastExit = '';
  const nativeStarting = config.startNativeBackend
    ? launchNativeBackend(config, log, (exit) => { nativeLastExit = exit; })
    : Promise.resolve(undefined);
  nativeStarting.catch(() => {}); // awaited below; a failure surfaces there
  cleanups.push(async () => (await nativeStarting.catch(() => undefined))?.stop());
  try {
    mark('listening');
    const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, schema: opts.dbSchema });
    mark('store_open');
    cleanups.push(() => db.close());
    health.register('database', async () => (await db.ping(), { status: 'ok', detail: db.kind }));
    const applied = await migrate(db.sql);
    mark('migrated');
    if (applied.length) log.info({ applied }, 'migrations applied');

    const state = await createSharedState({ redisUrl: config.redisUrl, prefix: opts.statePrefix, logger: log });
    cleanups.push(() => state.close());
    health.register('shared_state', async () => (await state.ping(), { status: 'ok', detail: state.kind }));

    // Inference: the native backend (started above, while the store opened), then the client.
    const nativeBackend = await nativeStarting;
    mark('backend_ready');
    if (nativeBackend) {
      health.register('native_backend', async () => {
        const st = nativeBackend.status();
        return st.running ? { status: 'ok', detail: `${nativeBackend.address}, restarts ${st.restarts}` } : { status: 'down', detail: `restarting: ${nativeLastExit}` };
      }, { requiredForReady: false });
    }
    const inference = createInferenceClient({ nativeAddress: nativeBackend?.address ?? config.backendAddress ?? DEFAULT_BACKEND_ADDRESS, backends: config.inferenceBackends ?? '', backend: { maxConcurrentCalls: inferenceCallLimit(config) } });
    cleanups.push(() => inference.close());
    health.register('inference', async () => {
      const all = await inference.health({ timeoutMs: 1500 });
      const down = all.filter((b) => !b.ok);
      if (down.length === 0) return { status: 'ok', detail: all.map((b) => b.address).join(', ') };
      return { status: down.length === all.length ? 'down' : 'degraded', detail: down.map((b) => `${b.address}: ${b.error ?? 'unhealthy'}`).join('; ') };
    }, { requiredForReady: false });

    const box = createSecretBox(loadMasterKey({ envKey: config.secretKey, dataDir: config.dataDir }));
    verifier = new KeyVerifier(db.sql, config.authCacheMs);

    if (claim) mountAdminRoutes(http, storeAdmin(db.sql), { token: claim.token, host: localHost });
    const boot = await bootstrap(db.sql, { key: config.bootstrapKey, creditMicros: config.bootstrapCreditMicros, shared: db.kind === 'postgres' });

    // Which tool and knowledge-source ids exist for a team (config rule 4), and what publish pins.
    const references = (teamId: string, sql: Sql): ReferenceResolver => ({ toolIds: (ids) => toolIdsOf(sql, teamId, ids), knowledgeSourceIds: (ids) => knowledgeSourceIdsOf(sql, teamId, ids) });
    // Publish freezes the attached tools as they are now and the knowledge revisions in use.
    const pin = async (teamId: string, draft: StoredDraft, sql: Sql): Promise<unknown> => ({
      tools: await frozenToolsForPublish(sql, teamId, draft.tools.tool_ids),
      knowledge: await currentKnowledgeRevisions(sql, teamId, draft.knowledge_base.knowledge_source_ids),
    });
    const agents = new AgentService(db.sql, {
      initial: async (_teamId, patch) => {
        const base = createDefaultDraft();
        if (patch === undefined) return { config: base, hash: configHash(base) };
        const r = await patchDraft(base, patch, { box, resolve: references(_teamId, db.sql) }, { at: ['config'] });
        return { config: r.draft, hash: r.hash };
      },
    });
    mountAgentRoutes(http, agents);
    mountToolRoutes(http, new ToolService(db.sql, box));
    mountKnowledgeRoutes(http, new KnowledgeService(db.sql));
    mountDraftRoutes(http, new DraftService(db.sql, box, references, pin));

    // Speech synthesis: /v1/tts, /v1/tts/stream/with-timestamp, wss /v1/tts/live, with tracing.
    const tracing = startTracing({ env: opts.env ?? process.env });
    cleanups.push(() => tracing.shutdown());
    // Per-team speech concurrency cap (spend tier, or PARLEY_SPEECH_CONCURRENCY), shared by
    // synthesis and transcription, native and compat (src/speech/concurrency.ts).
    const speechConcurrency = new SpeechConcurrency({ state, sql: db.sql, log, override: parseSpeechConcurrency((opts.env ?? process.env).PARLEY_SPEECH_CONCURRENCY) });
    cleanups.push(async () => speechConcurrency.close());
    const tts = new TtsService({
      inference, sql: db.sql, log, tracing,
      resolveVoice: (teamId, id) => resolveVoice(db.sql, teamId, id),
      authenticate: (token, messages) => verifier!.verify(token, messages),
      concurrency: speechConcurrency,
    });
    mountTtsRoutes(http, tts);
    mountLiveRoute(http, tts);

    // Speech: transcription (credit check, usage in seconds) and voice models (issue 5).
    const asr = new AsrService(inference, {
      log,
      credit: new CreditGate(db.sql),
      concurrency: speechConcurrency,
      tracing,
      onTranscribed: async (u) => void (await recordUsage(db.sql, { teamId: u.teamId, kind: 'asr_seconds', amount: u.seconds, model: u.model }, log)),
    });
    mountAsrRoutes(http, asr);
    // Voice design (issue 22): candidates from a description (the backend's DesignVoice); a
    // candidate saved through POST /model speaks with the backend's voice for the design.
    const { DesignTokens, VoiceDesignService } = await import('./voice-design/service.ts');
    const { mountVoiceDesignRoutes } = await import('./voice-design/routes.ts');
    const voiceDesign = new VoiceDesignService({
      inference, log, tokens: new DesignTokens(box), credit: new CreditGate(db.sql), concurrency: speechConcurrency,
      onDesigned: async (teamId) => void (await recordUsage(db.sql, { teamId, kind: 'voice_designs', amount: 1, model: 'voice-design-1' }, log)),
    });
    mountVoiceDesignRoutes(http, voiceDesign);
    mountVoiceRoutes(http, new VoiceService(db.sql, inference, log, (teamId, id, name, description, o) => voiceDesign.keep(teamId, id, name, description, o)));
    // The wallet the official speech clients' `user` calls read (issue 22).
    mountWalletRoutes(http, new WalletService(db.sql));
    // The team, its usage by day and kind, and its credit ledger (the console's Usage page).
    mountUsageRoutes(http, new UsageService(db.sql));

    // Session runtime (issue 7): the supervisor of every session actor on this node, and the
    // websocket transport at /v1/agent/sessions/connect. Its cleanup runs before the store closes.
    // The session registry says which node holds a live session (PARLEY_NODE_ID, PARLEY_NODE_URL):
    // a resume reaching another node is sent here (close 4307 with the URL).
    const node = nodeIdentity(opts.env ?? process.env, config.host, port);
    const sessionRegistry = new SessionRegistry(state, { nodeId: node.id, url: `${node.url}${CONNECT_PATH}`, onError: (err) => log.warn({ err }, 'session registry refresh failed') });
    // Recordings (issue 8): per-speaker tracks of sessions with record_audio, in PARLEY_RECORDINGS_DIR
    // or S3-compatible storage (PARLEY_RECORDINGS_S3_*).
    const { RecordingService, recordingsDir, s3ConfigFromEnv } = await import('./recordings/index.ts');
    const recordingsAt = recordingsDir(opts.env ?? process.env, config.dataDir);
    const recordings = new RecordingService({ sql: db.sql, box, log, dir: recordingsAt.dir, s3: s3ConfigFromEnv(opts.env ?? process.env) });
    if (recordingsAt.ephemeral) cleanups.push(() => import('node:fs/promises').then((fs) => fs.rm(recordingsAt.dir, { recursive: true, force: true })));
    const runtime = new SessionRuntime({ recordings, sql: db.sql, state, inference, log, clock: realClock, maxSessions: config.maxSessions, registry: metrics.registry, resolveVoice: (teamId, id) => resolveVoice(db.sql, teamId, id), box, outboundAllow: config.outboundAllow, nodeId: node.id, sessionRegistry });
    await runtime.start();
    // With LiveKit configured, the agent joins each session's room (@livekit/rtc-node); it leaves
    // its rooms after the runtime has drained the sessions (cleanups run in reverse).
    const livekitAgents = config.livekit ? new LivekitAgents({ config: config.livekit, runtime, log }) : undefined;
    if (livekitAgents) cleanups.push(() => livekitAgents.close());
    cleanups.push(() => runtime.close(config.drainTimeoutMs));
    mountWebsocketTransport(http, runtime, log);
    runtimes.set(http, runtime);

    // Sessions (issue 7): creation, end, list, read. `hasCapacity` becomes the supervisor's once
    // the session runtime exists; until then every node accepts (PARLEY_MAX_SESSIONS unused).
    const sessions = new SessionService({
      sql: db.sql,
      state,
      box,
      pricePerMinuteMicros: config.sessionPricePerMinuteMicros,
      publicRatePerAgent: config.publicRatePerAgent,
      publicRatePerIp: config.publicRatePerIp,
      hasCapacity: () => runtime.hasCapacity(),
      mintTransportToken: config.livekit && livekitAgents ? livekitSessionMinter(config.livekit, livekitAgents) : undefined,
      livekitUrl: config.livekit?.url,
      // LiveKit: the room is created before anything is charged; no answer → 502 (LIVEKIT_ROOM_TIMEOUT_MS).
      ensureRoom: config.livekit ? livekitRoomEnsurer(config.livekit, { timeoutMs: Number((opts.env ?? process.env).LIVEKIT_ROOM_TIMEOUT_MS) || undefined }) : undefined,
    });
    mountSessionRoutes(http, sessions);
    // The embeddable widget's display config, behind the keyless gate (issue 22, docs/widget.md).
    const { WidgetConfigService } = await import('./widget-config/service.ts');
    const { mountWidgetConfigRoutes } = await import('./widget-config/routes.ts');
    mountWidgetConfigRoutes(http, new WidgetConfigService(db.sql));
    // Builder preview calls (GAPS.md §10): sessions of the draft frozen at creation.
    const { PreviewService } = await import('./preview/service.ts');
    const { mountPreviewRoutes } = await import('./preview/routes.ts');
    mountPreviewRoutes(http, new PreviewService({ sql: db.sql, sessions, pin }));
    const { mountRecordingRoutes } = await import('./recordings/routes.ts');
    mountRecordingRoutes(http, recordings);
    // Agent tests (issue 8): text-only runs of an agent against a scripted user, judged by criteria.
    const { AgentTestService } = await import('./agent-tests/service.ts');
    const { mountAgentTestRoutes } = await import('./agent-tests/routes.ts');
    const agentTests = new AgentTestService({ sql: db.sql, inference, box, log, allow: config.outboundAllow });
    mountAgentTestRoutes(http, agentTests);

    // Post-call webhooks and the tool test (issue 8). The worker delivers what ending a session
    // queued in Postgres; closing hands attempts in flight back to the queue before the store closes.
    const webhookWorker = new WebhookWorker({
      sql: db.sql, box, log, allow: config.outboundAllow, backoffMs: parseBackoff((opts.env ?? process.env).PARLEY_WEBHOOK_BACKOFF_MS),
    });
    webhookWorker.start();
    cleanups.push(() => webhookWorker.close());
    // Post-call analysis (issue 8): a durable job on the session row; settling queues call.analyzed.
    const { AnalysisWorker } = await import('./analysis/index.ts');
    const analysisWorker = new AnalysisWorker({ sql: db.sql, inference, log, backoffMs: parseBackoff((opts.env ?? process.env).PARLEY_ANALYSIS_BACKOFF_MS, 'PARLEY_ANALYSIS_BACKOFF_MS') });
    analysisWorker.start();
    cleanups.push(() => analysisWorker.close());
    mountWebhookRoutes(http, new WebhookDeliveryService(db.sql, { maxAttempts: webhookWorker.maxAttempts }));
    const testTools = new ToolService(db.sql, box);
    mountToolTestRoutes(http, new ToolTestService({ resolveTool: (teamId, id) => testTools.resolveToolForRuntime(teamId, id), allow: config.outboundAllow }));

    // Compatibility layer, families A, B and Groq-style (issue 6): /compat/v1, /compat/api/v1,
    // /compat/openai/v1, translated into the speech services above.
    const { mountOpenAiCompat } = await import('./compat/openai/index.ts');
    // Every compat realtime socket (families A, B, Groq and C) lives at most 3600 s (GAPS §12.3).
    const compatLifetimeMs = 3600 * 1000;
    mountOpenAiCompat(http, { tts, asr, authenticate: (token, messages) => verifier!.verify(token, messages), realtimeLifetimeMs: compatLifetimeMs });
    // Errors the HTTP layer answers under /compat (404, 405, 413) come in each family's envelope.
    (await import('./compat/errors.ts')).registerCompatEnvelopes(http);

    // Phone numbers (issue 9, "Numbers" and "Carriers"): the embedded sandbox carrier, the
    // routes, and the durable daily rental job on every node (SKIP LOCKED shares the work).
    const { PhoneNumberService } = await import('./phone-numbers/service.ts');
    const { mountPhoneNumberRoutes } = await import('./phone-numbers/routes.ts');
    const { PhoneRentalJob } = await import('./phone-numbers/rental-job.ts');
    const { Carriers, SandboxCarrier, telephonyOf } = await import('./telephony/index.ts');
    const sandboxCarrier = new SandboxCarrier();
    telephonyOf.set(http, { sandbox: sandboxCarrier });
    // Calls (issue 9, "Calls"): the sandbox phones at wss /v1/telephony/sandbox/calls, the
    // livekit-sip carrier (provider `managed`) when LiveKit SIP is configured, inbound calls
    // answered by the session runtime, and POST /v1/agent/phone-calls.
    const env = opts.env ?? process.env;
    const { livekitSipFromEnv, LivekitSipCarrier } = await import('./telephony/livekit-sip.ts');
    const sip = config.livekit ? livekitSipFromEnv(env, config.livekit) : null;
    const livekitSip = sip ? new LivekitSipCarrier(sip, log) : undefined;
    const carriers = new Carriers(livekitSip ? [sandboxCarrier, livekitSip] : [sandboxCarrier]);
    telephonyOf.set(http, { sandbox: sandboxCarrier, livekitSip, livekitAgents });
    const phoneNumbers = new PhoneNumberService({ sql: db.sql, carriers, dailyPriceMicros: config.phoneNumberDailyPriceMicros, limit: config.phoneNumberLimit, log });
    mountPhoneNumberRoutes(http, phoneNumbers);
    const { PhoneCallService, phoneCallSettings } = await import('./phone-calls/service.ts');
    const { mountPhoneCallRoutes } = await import('./phone-calls/routes.ts');
    const phoneCalls = new PhoneCallService({
      sql: db.sql, state, box, sessions, runtime, carriers, inference, log, outboundAllow: config.outboundAllow,
      resolveVoice: (teamId, id) => resolveVoice(db.sql, teamId, id), settings: { ...phoneCallSettings(env), ...config.phoneCalls },
      livekit: livekitAgents,
    });
    await phoneCalls.start();
    cleanups.push(async () => {
      // The carrier first: its handed-off calls end, and their transfer minutes are recorded.
      sandboxCarrier.calls.close();
      await phoneCalls.close();
    });
    mountPhoneCallRoutes(http, phoneCalls);
    // LiveKit's webhooks: SIP participants joining a number's rooms are inbound calls.
    if (livekitSip && config.livekit) {
      const { mountLivekitWebhook } = await import('./telephony/livekit-webhook.ts');
      mountLivekitWebhook(http, { apiKey: config.livekit.apiKey, apiSecret: config.livekit.apiSecret, carrier: livekitSip, log });
    }
    if ((env.PARLEY_SANDBOX_CALLS ?? 'on').toLowerCase() !== 'off') {
      const { mountSandboxCalls } = await import('./telephony/sandbox-socket.ts');
      mountSandboxCalls(http, sandboxCarrier.calls, { log, authenticate: (token) => verifier!.verify(token, { invalid: 'Invalid token', expired: 'Token expired' }) });
    }
    const phoneRental = new PhoneRentalJob({ sql: db.sql, log });
    phoneRental.start();
    cleanups.push(() => phoneRental.stop());

    // Compat family C REST (issue 6): /compat/elevenlabs text to speech, speech to text, voices, models, user.
    mountElevenLabsRoutes(http, { tts, asr, sql: db.sql, log, state, timers: { lifetimeMs: compatLifetimeMs }, authenticate: (token, messages) => verifier!.verify(token, messages), keyIsLive: (teamId, id) => keyIsLive(db.sql, teamId, id) });

    http.starting = false;
    health.ready = true;
    mark('ready');
    log.info({ port, store: db.kind, state: state.kind, startup_ms: startup }, 'parley ready');
    return {
      config, log, http, db, state, box, inference, nativeBackend, health, metrics, port,
      url: `http://127.0.0.1:${port}`,
      bootstrapKey: boot.key,
      teamId: boot.teamId,
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/**
 * Starts the native backend as a supervised child on `BACKEND_ADDRESS`, or on a free loopback
 * port when that is unset. An explicit address that is taken fails naming it and the variable.
 */
async function launchNativeBackend(config: Config, log: Logger, onExit: (what: string) => void): Promise<NativeProcess> {
  try {
    return await spawnNativeBackend({
      address: config.backendAddress ?? '127.0.0.1:0',
      engine: config.speechEngine,
      onEvent: (e) => {
        if (e.type === 'running') log.info({ address: e.address, pid: e.pid, engine: config.speechEngine }, 'native backend ready');
        else if (e.type === 'exited' && e.stopped) log.info({ code: e.code, signal: e.signal }, 'native backend stopped');
        else if (e.type === 'exited') log.error({ code: e.code, signal: e.signal }, 'native backend exited');
        if (e.type === 'exited') onExit(`exited (${e.code ?? e.signal})`);
      },
    });
  } catch (err) {
    if (config.backendAddress && /EADDRINUSE/.test(String((err as Error).message))) {
      throw new Error(`BACKEND_ADDRESS ${config.backendAddress} is already in use (another Parley or native backend listens there): set BACKEND_ADDRESS to a free address, or leave it unset and Parley picks a free port`, { cause: err });
    }
    throw err;
  }
}

/** A random schema name for isolating a test run on a shared Postgres. */
export function randomSchema(): string {
  return `t_${randomBytes(6).toString('hex')}`;
}
