// The native inference backend: a standalone gRPC server implementing
// proto/inference/v1/inference.proto with the espeak, synthetic and scripted engines.
//
//   npm run backend                        # listens on BACKEND_ADDRESS (127.0.0.1:50051)
//   PARLEY_SPEECH_ENGINE=synthetic npm run backend
//
// Settings come from the environment, read in one place (config.ts; docs/inference.md and
// docs/providers.md list them): BACKEND_ADDRESS, PARLEY_SPEECH_ENGINE, PARLEY_SYNTHETIC_*,
// PARLEY_CHUNK_MS, PARLEY_MAX_CALLS, PARLEY_BACKEND_TIMINGS, and the provider engines
// (PARLEY_{LLM,STT,TTS}_PROVIDER, _BASE_URL, _API_KEY, _MODEL, PARLEY_TTS_VOICE).
// When run as a program it prints one line `{"ready":true,"address":"host:port"}` on
// stdout once it listens, and stops on SIGTERM/SIGINT.
import * as grpc from '@grpc/grpc-js';
import { createWriteStream } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Http2Server, ServerHttp2Session } from 'node:http2';
import { pino, type Logger } from 'pino';
import { pathToFileURL } from 'node:url';
import { inferenceServiceDefinition } from '../src/inference/grpc-service.ts';
import { createEspeakEngine } from './engines/espeak.ts';
import { createSyntheticEngine } from './engines/synthetic-engine.ts';
import type { SpeechEngine } from './engines/types.ts';
import { readNativeConfig, type ProvidersConfig } from './config.ts';
import type { Providers } from './providers/index.ts';
import type { SpeechDetector } from './providers/vad.ts';
import { createService, LIMITS, type CallInfo, type CallTiming, type LoopTiming, type StreamRecognizer } from './service.ts';
import type { Pacing } from './speech.ts';

export interface BackendOptions {
  /** host:port to listen on; port 0 picks a free port. Default BACKEND_ADDRESS or 127.0.0.1:50051. */
  address?: string;
  /** Engine behind the speech model ids. Default PARLEY_SPEECH_ENGINE or `espeak`. */
  engine?: 'espeak' | 'synthetic';
  /** Time to first audio in milliseconds (all speech engines). Default PARLEY_SYNTHETIC_TTFA_MS or 0. */
  timeToFirstAudioMs?: number;
  /** `fast` (default) or `realtime` pacing. */
  pacing?: Pacing['mode'];
  /** Audio per chunk in milliseconds. Default 100. */
  chunkMs?: number;
  /** Concurrent calls before RESOURCE_EXHAUSTED. Default 4096. */
  maxConcurrentCalls?: number;
  /** espeak worker threads. Default min(2, cores). */
  espeakWorkers?: number;
  /** synthetic engine worker threads. Default min(4, cores). */
  syntheticWorkers?: number;
  /** Observes every call's metadata (traceparent, x-request-id, x-team-id). */
  onCall?: (info: CallInfo) => void;
  /** Observes the timings of turn parts (see `CallTiming`). Default: PARLEY_BACKEND_TIMINGS, a file they are appended to as JSON lines. */
  onTiming?: (t: CallTiming) => void;
  /**
   * Engine substitutes, for load generators that must cost the machine little (bench/README.md,
   * "a light backend"): wraps the engine behind the speech models, and replaces the realtime
   * recognizer of TranscribeStream.
   */
  wrapSpeech?: (engine: SpeechEngine) => SpeechEngine;
  streamRecognizer?: (sampleRateHz: number) => StreamRecognizer;
  /** Lists TranscribeStreams in Capabilities (default true): see ServiceOptions.multiplexRecognition. */
  multiplexRecognition?: boolean;
  /** Lists SynthesizeStreams in Capabilities (default true): see ServiceOptions.multiplexSynthesis. */
  multiplexSynthesis?: boolean;
  /** Lists GenerateStreams in Capabilities (default true): see ServiceOptions.multiplexGeneration. */
  multiplexGeneration?: boolean;
  /** Provider engines (docs/providers.md). Default: from the environment (PARLEY_LLM_PROVIDER, …). */
  providers?: ProvidersConfig;
  /** Where settings not given here are read from. Default process.env. */
  env?: Record<string, string | undefined>;
  /** Logger (default: silent in-process; the program logs to stderr at LOG_LEVEL, default info). */
  logger?: Logger;
}

export interface Backend {
  /** The address it listens on, with the real port. */
  address: string;
  /** Stops accepting, cancels calls in progress and stops the engines. */
  close(): Promise<void>;
  /** Calls in progress and engine work done so far (segments synthesized). */
  stats(): { activeCalls: number; segmentsSynthesized: number };
}

/**
 * Receive window of each client connection, for all its streams together. HTTP/2 starts every
 * connection at 64 KB and grpc-js's server has no option to change it. The platform streams every
 * caller's audio over a few connections (~32 KB/s per session): at 64 KB per connection it waited
 * for a window update every two seconds of one session's audio, and at 700 sessions recognition
 * fell ~2.7 s behind the audio (bench/README.md). Twice STREAM_WINDOW_BYTES: the one stream that
 * carries every session's audio may fill its window and leave as much to the others on its
 * connection (SynthesizeStreams' credits among them: without them no reply's audio comes back).
 */
export const CONNECTION_WINDOW_BYTES = 32 * 1024 * 1024;
/**
 * Receive window of each stream (HTTP/2's default is 64 KB). One TranscribeStreams call carries
 * every session's caller audio (~32 KB/s each: 32 MB/s at 1,000 sessions), and a stream carries
 * at most a window per round trip (the data reaching the backend, its window update back), so
 * the window must hold more audio than the slowest round trip lasts. 16 MB is ~500 ms of 1,000
 * sessions' audio. 4 MB (~125 ms) was too little on a busy machine: when a round trip took
 * longer, less than the audio's rate went through and recognition fell behind, in one run by
 * 5.4 s for good (bench/README.md, twentieth pass (b)). A stream of one session's audio never
 * has that much in flight, and the connection's window bounds them all together.
 */
export const STREAM_WINDOW_BYTES = 16 * 1024 * 1024;

/** Opens each new connection's receive window to `bytes` (see CONNECTION_WINDOW_BYTES). */
function widenConnectionWindows(server: grpc.Server, bytes: number, log: Logger): void {
  // grpc-js keeps its HTTP/2 servers in a private map; without it (a grpc-js change) connections
  // keep the 64 KB window and the test of this setting fails.
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map)) {
    log.warn('grpc-js has no http2Servers map: connection receive windows stay at 64 KB');
    return;
  }
  for (const h2 of servers.keys() as Iterable<Http2Server>) {
    h2.on('session', (session: ServerHttp2Session) => {
      try {
        session.setLocalWindowSize(bytes);
        session.settings({ initialWindowSize: STREAM_WINDOW_BYTES });
      } catch (err) {
        log.warn({ err }, 'could not widen a connection receive window');
      }
    });
  }
}

/** Starts the native backend in this process. */
export async function startBackend(opts: BackendOptions = {}): Promise<Backend> {
  const cfg = readNativeConfig(opts.env); // native/config.ts reads process.env when not given
  const address = opts.address ?? cfg.address;
  const speechName = opts.engine ?? cfg.speechEngine;
  if (speechName !== 'espeak' && speechName !== 'synthetic') throw new Error(`PARLEY_SPEECH_ENGINE must be espeak or synthetic, not ${speechName}`);
  const log = opts.logger ?? pino({ level: 'silent' });
  const synthetic = createSyntheticEngine({ workers: opts.syntheticWorkers });
  const engines: Record<string, SpeechEngine> = { espeak: createEspeakEngine({ workers: opts.espeakWorkers }), synthetic };
  const providersConfig = opts.providers ?? cfg.providers;
  // The provider engines (and the speech detector, only in front of a transcription provider)
  // are loaded only when configured: a backend without them starts as it always did.
  let providers: Providers | undefined;
  let detector: SpeechDetector | null = null;
  if (providersConfig.llm || providersConfig.stt || providersConfig.tts) {
    const [{ createProviders }, { SpeechDetector }] = await Promise.all([import('./providers/index.ts'), import('./providers/vad.ts')]);
    detector = providersConfig.stt ? new SpeechDetector(log) : null;
    const d = detector;
    providers = createProviders(providersConfig, { logger: log, detector: d ? d.open : () => { throw new Error('no speech detector'); } });
  }
  // The speech engine, the recognizer and the detector load before the server says it is ready;
  // providers are asked once whether they answer (briefly: one that is down is reported, not fatal).
  await Promise.all([engines[speechName].warm?.(), synthetic.warm?.(), detector?.warm(), providers?.probe()]);
  const timingsFile = opts.onTiming ? null : cfg.timingsFile;
  const timings = timingsFile ? createWriteStream(timingsFile, { flags: 'a' }) : null;
  const onTiming = opts.onTiming ?? (timings ? (t: CallTiming) => void timings.write(`${JSON.stringify(t)}\n`) : undefined);
  // With the timings, this process's event-loop delay since it started, once a second (`LoopTiming`):
  // what its own turn parts waited behind, apart from the platform's.
  const loop = timings ? monitorEventLoopDelay({ resolution: 5 }) : null;
  loop?.enable();
  const loopTimer = loop ? setInterval(() => {
    const line: LoopTiming = { rpc: 'loop', at: Date.now(), p50Ms: loop.percentile(50) / 1e6, p99Ms: loop.percentile(99) / 1e6, maxMs: loop.max / 1e6 };
    timings!.write(`${JSON.stringify(line)}\n`);
  }, 1000) : null;
  loopTimer?.unref();
  const { handlers, stats } = createService({
    speech: opts.wrapSpeech ? opts.wrapSpeech(engines[speechName]) : engines[speechName],
    engines,
    recognize: (pcm, rate) => synthetic.recognize(pcm, rate),
    streamRecognizer: opts.streamRecognizer,
    multiplexRecognition: opts.multiplexRecognition,
    multiplexSynthesis: opts.multiplexSynthesis,
    multiplexGeneration: opts.multiplexGeneration,
    pacing: {
      timeToFirstAudioMs: opts.timeToFirstAudioMs ?? cfg.timeToFirstAudioMs,
      mode: opts.pacing ?? cfg.pacing,
    },
    chunkMs: opts.chunkMs ?? cfg.chunkMs,
    maxConcurrentCalls: opts.maxConcurrentCalls ?? cfg.maxConcurrentCalls,
    onCall: opts.onCall,
    onTiming,
    providers,
    detectorHealth: detector ? () => detector!.health() : undefined,
    logger: log,
  });
  const server = new grpc.Server({
    'grpc.max_receive_message_length': LIMITS.maxMessageBytes,
    'grpc.max_send_message_length': LIMITS.maxMessageBytes,
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.http2.min_ping_interval_without_data_ms': 5_000,
    'grpc.max_concurrent_streams': 100_000,
  });
  server.addService(inferenceServiceDefinition, handlers);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  widenConnectionWindows(server, CONNECTION_WINDOW_BYTES, log);
  const host = address.slice(0, address.lastIndexOf(':'));
  let closed: Promise<void> | null = null;
  return {
    address: `${host}:${port}`,
    stats,
    close: () =>
      (closed ??= (async () => {
        await new Promise<void>((resolve) => {
          const t = setTimeout(() => { server.forceShutdown(); resolve(); }, 1000);
          server.tryShutdown(() => { clearTimeout(t); resolve(); });
        });
        await Promise.all([...Object.values(engines).map((e) => e.close()), providers?.close(), detector?.close()]);
        if (loopTimer) clearInterval(loopTimer);
        if (timings) await new Promise<void>((resolve) => timings.end(resolve));
      })()),
  };
}

/**
 * How a backend program stops: on SIGTERM or SIGINT, and, launched by the platform
 * (`parentPipe`), when the platform is gone: its stdin is then a pipe from the platform, which
 * ends when the platform exits, however it exits. Without that a platform killed with SIGKILL
 * left its backend running, holding its memory and port, and a restarted platform launched
 * another beside it. A close that hangs after the platform went is cut at 5 s.
 */
export function stopWhenAsked(backend: Pick<Backend, 'close'>, parentPipe: boolean): void {
  const stop = () => void backend.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  if (!parentPipe) return;
  const gone = () => {
    setTimeout(() => process.exit(0), 5000).unref();
    stop();
  };
  process.stdin.once('end', gone);
  process.stdin.once('error', gone);
  process.stdin.resume();
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  let cfg: ReturnType<typeof readNativeConfig>;
  try {
    cfg = readNativeConfig();
  } catch (err) {
    process.stderr.write(`${JSON.stringify({ ready: false, error: String((err as Error).message) })}\n`);
    process.exit(1);
  }
  const logger = pino({ level: cfg.logLevel }, pino.destination(2));
  startBackend({ logger }).then(
    (backend) => {
      // Providers by what they are and where; never their keys.
      const { llm, stt, tts } = cfg.providers;
      const where = (p?: { kind: string; baseUrl: string; model: string }) => (p ? `${p.kind} ${p.baseUrl} ${p.model}` : 'built in');
      logger.info({ address: backend.address, engine: cfg.speechEngine, llm: where(llm), stt: where(stt), tts: where(tts) }, 'native backend listening');
      process.stdout.write(`${JSON.stringify({ ready: true, address: backend.address })}\n`);
      stopWhenAsked(backend, cfg.parentPipe);
    },
    (err) => {
      // On stdout, the channel a supervising platform reads the ready line from (and on stderr for a person).
      const line = `${JSON.stringify({ ready: false, error: String(err?.message ?? err) })}\n`;
      process.stderr.write(line);
      process.stdout.write(line, () => process.exit(1));
    },
  );
}
