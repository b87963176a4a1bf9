/**
 * The composition root's building blocks. A module is one feature (or one shared layer)
 * started by `startPlatform`: it names what it needs from the modules started before it, and
 * returns what it offers to the modules after it (its services, its handles). The platform
 * starts the modules of `PLATFORM_MODULES` (src/platform.ts) in order and closes them in
 * reverse order. Modules are imported statically; a feature folder's module is its
 * `module.ts`, next to its routes and service.
 */
import type { Authenticate } from './auth/principal.ts';
import type { KeyVerifier } from './auth/keys.ts';
import type { AgentCache } from './agents/cache.ts';
import type { Config } from './config.ts';
import type { SecretBox } from './crypto/secrets.ts';
import type { HttpApp } from './http/app.ts';
import type { Health } from './http/ops-routes.ts';
import type { InferenceClient, NativeProcess } from './inference/index.ts';
import type { Logger } from './log.ts';
import type { PhoneCallService } from './phone-calls/service.ts';
import type { RecordingService } from './recordings/index.ts';
import type { SessionRuntime } from './sessions/runtime.ts';
import type { SessionService } from './sessions/service.ts';
import type { AsrService } from './speech/asr.ts';
import type { SpeechConcurrency } from './speech/concurrency.ts';
import type { TtsService } from './speech/tts.ts';
import type { SharedState } from './state/index.ts';
import type { Database, Sql } from './store/db.ts';
import type { Metrics } from './telemetry/metrics.ts';
import type { Tracing } from './telemetry/tracing.ts';
import type { Carriers, SandboxCarrier } from './telephony/index.ts';
import type { LivekitSipCarrier } from './telephony/livekit-sip.ts';
import type { ToolService } from './tools/service.ts';
import type { LivekitAgents } from './transport/livekit-agent.ts';
import type { VoiceDesignService } from './voice-design/service.ts';
import type { WebhookWorker } from './webhooks/index.ts';
import type { AnalysisWorker } from './analysis/index.ts';
import type { PhoneRentalJob } from './phone-numbers/rental-job.ts';
import type { Siblings } from './threads/siblings.ts';

/** This platform's place in a node of several workers (`PARLEY_WORKERS`, src/threads/). */
export interface WorkerRole {
  index: number;
  count: number;
  siblings: Siblings;
  /** The node's live sessions and admissions, shared by its workers (index 0). */
  capacity: Int32Array;
}

/** The carriers this platform built: the sandbox's failure switches, LiveKit SIP when configured. */
export interface Telephony {
  sandbox: SandboxCarrier;
  livekitSip?: LivekitSipCarrier;
  livekitAgents?: LivekitAgents;
  carriers: Carriers;
}

/** The background workers a platform runs (tests drive and inspect them). */
export interface Workers {
  webhooks: WebhookWorker;
  analysis: AnalysisWorker;
  phoneRental: PhoneRentalJob;
}

/** Everything a module can need or offer, by name. */
export interface Wiring {
  // Given by startPlatform before the first module.
  config: Config;
  log: Logger;
  http: HttpApp;
  health: Health;
  metrics: Metrics;
  port: number;
  /** Where the CLI reaches this server on this host. */
  localHost: string;
  /** Notes a start-up phase's time (logged with "parley ready"; bench/startup.ts reads it). */
  startup: (phase: string) => void;
  /** The embedded store's folder claim (its admin token), when this process holds one. */
  claim: { token: string; release(): void } | undefined;
  /** Set when this platform is one worker of several (`PARLEY_WORKERS`). */
  worker: WorkerRole | undefined;
  // Offered by modules.
  db: Database;
  sql: Sql;
  state: SharedState;
  inference: InferenceClient;
  nativeBackend: NativeProcess | undefined;
  box: SecretBox;
  verifier: KeyVerifier;
  /** Agent rows kept for `GET /v1/agent/agents/{id}`; every write of an agent calls `changed`. */
  agentCache: AgentCache;
  authenticate: Authenticate;
  teamId: string;
  bootstrapKey: string | undefined;
  tracing: Tracing;
  speechConcurrency: SpeechConcurrency;
  tts: TtsService;
  asr: AsrService;
  voiceDesign: VoiceDesignService;
  tools: ToolService;
  recordings: RecordingService;
  runtime: SessionRuntime;
  livekitAgents: LivekitAgents | undefined;
  sessions: SessionService;
  webhookWorker: WebhookWorker;
  analysisWorker: AnalysisWorker;
  phoneRental: PhoneRentalJob;
  telephony: Telephony;
  phoneCalls: PhoneCallService;
}

/** Registers what a module must close at shutdown (run in reverse order of registration). */
export type OnClose = (close: () => Promise<void> | void) => void;

export interface Module {
  name: string;
  needs: readonly (keyof Wiring)[];
  start(deps: Wiring, onClose: OnClose): Promise<Partial<Wiring> | void> | Partial<Wiring> | void;
}

/**
 * Declares a module: `needs` lists the names its `start` reads (it sees only those), and
 * `start` returns what it offers.
 */
export function defineModule<N extends keyof Wiring, O extends Partial<Wiring> | void>(m: {
  name: string;
  needs: readonly N[];
  start(deps: Pick<Wiring, N>, onClose: OnClose): Promise<O> | O;
}): Module {
  return m as unknown as Module;
}

/**
 * Starts `modules` in order; each one's offers join `wiring` (which the caller may read while
 * the start goes on). A module that needs a name no earlier module offered fails the start,
 * naming both. What a module registers with `onClose` is the caller's to run, in reverse.
 */
export async function startModules(modules: readonly Module[], wiring: Partial<Wiring>, log: Logger, onClose: OnClose): Promise<void> {
  for (const m of modules) {
    for (const n of m.needs) if (!(n in wiring)) throw new Error(`module ${m.name} needs ${n}, which no earlier module offers`);
    const offered = await m.start(wiring as Wiring, onClose);
    if (offered) Object.assign(wiring, offered);
    log.debug({ module: m.name }, 'module started');
  }
}
