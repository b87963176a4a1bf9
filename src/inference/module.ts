import client from 'prom-client';
import { DEFAULT_BACKEND_ADDRESS, inferenceCallLimit, type Config } from '../config.ts';
import type { Logger } from '../log.ts';
import { defineModule, type Module } from '../modules.ts';
import { createInferenceClient, spawnNativeBackend, type InferenceClient, type NativeProcess } from './index.ts';

/**
 * Inference, in two steps: `launch` starts the native backend child first (its engines load
 * while the store opens and migrates), `connect` waits for it and builds the gRPC client every
 * model call goes through. Closing stops the client, then (last of all) the child.
 */
export function inferenceModules(): { launch: Module; connect: Module } {
  let starting: Promise<NativeProcess | undefined> = Promise.resolve(undefined);
  let lastExit = '';
  const launch = defineModule({
    name: 'native-backend',
    needs: ['config', 'log', 'health'],
    start({ config, log, health }, onClose) {
      const exited = (exit: string) => {
        lastExit = exit;
        health.changed();
      };
      starting = config.startNativeBackend ? launchNativeBackend(config, log, exited) : Promise.resolve(undefined);
      starting.catch(() => {}); // awaited by `connect`; a failure surfaces there
      onClose(async () => (await starting.catch(() => undefined))?.stop());
    },
  });
  const connect = defineModule({
    name: 'inference',
    needs: ['config', 'health', 'startup', 'metrics'],
    async start({ config, health, startup, metrics }, onClose) {
      const nativeBackend = await starting;
      startup('backend_ready');
      if (nativeBackend) {
        health.register('native_backend', async () => {
          const st = nativeBackend.status();
          return st.running ? { status: 'ok', detail: `${nativeBackend.address}, restarts ${st.restarts}` } : { status: 'down', detail: `restarting: ${lastExit}` };
        }, { requiredForReady: false });
      }
      const inference = createInferenceClient({ nativeAddress: nativeBackend?.address ?? config.backendAddress ?? DEFAULT_BACKEND_ADDRESS, backends: config.inferenceBackends ?? '', backend: { maxConcurrentCalls: inferenceCallLimit(config) } });
      onClose(() => inference.close());
      sendBacklogMetrics(metrics.registry, inference);
      health.register('inference', async () => {
        const all = await inference.health({ timeoutMs: 1500 });
        const down = all.filter((b) => !b.ok);
        if (down.length === 0) return { status: 'ok', detail: all.map((b) => b.address).join(', ') };
        return { status: down.length === all.length ? 'down' : 'degraded', detail: down.map((b) => `${b.address}: ${b.error ?? 'unhealthy'}`).join('; ') };
      }, { requiredForReady: false });
      return { inference, nativeBackend };
    },
  });
  return { launch, connect };
}

/**
 * The send backlog (docs/inference.md, "Send backlog"): read at scrape time; a node
 * of several workers sums the bytes and takes the longest wait.
 */
function sendBacklogMetrics(registry: client.Registry, inference: InferenceClient): void {
  new client.Gauge({
    name: 'parley_inference_send_backlog_bytes',
    help: 'Caller audio written to the inference backends for recognition (the shared call, or a call per stream on a backend without it) and not yet sent (flow control or a busy connection holds it).',
    labelNames: ['call'],
    registers: [registry],
    aggregator: 'sum',
    collect() {
      this.set({ call: 'recognition' }, inference.sendBacklog().recognition.bytes);
    },
  });
  new client.Gauge({
    name: 'parley_inference_send_backlog_seconds',
    help: 'How long the oldest input written on each shared call and not yet sent has waited (0: nothing waits). Past PARLEY_MAX_INFERENCE_BACKLOG_MS, session creation answers 503.',
    labelNames: ['call'],
    registers: [registry],
    aggregator: 'max',
    collect() {
      const b = inference.sendBacklog();
      this.set({ call: 'recognition' }, b.recognition.ageMs / 1000);
      this.set({ call: 'synthesis' }, b.synthesis.ageMs / 1000);
    },
  });
}

/**
 * Starts the native backend as a supervised child on `BACKEND_ADDRESS`, or on a free loopback
 * port when that is unset. An explicit address that is taken fails naming it and the variable.
 */
export async function launchNativeBackend(config: Config, log: Logger, onExit: (what: string) => void): Promise<NativeProcess> {
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
