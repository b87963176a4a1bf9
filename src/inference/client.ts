/**
 * The platform's inference client: routes each call by model id to a backend
 * (INFERENCE_BACKENDS over the embedded default), translates the model id to the
 * backend's own model name, and runs periodic health checks.
 */
import type { AudioChunk, CapabilitiesResponse, DesignVoiceResponse, GenerateResponse, SaveVoiceResponse, TranscribeResponse } from '../gen/inference/v1/inference_pb.ts';
import {
  Backend,
  type BackendHealth,
  type BackendOptions,
  type CallOptions,
  type DesignVoiceInput,
  type GenerateInput,
  type SaveVoiceInput,
  type SynthesisSession,
  type SynthesizeInput,
  type TranscribeConfigInput,
  type TranscriptionSession,
  type SendBacklog,
} from './backend.ts';
import { DEFAULT_BACKEND_ADDRESS, loadConfig } from '../config.ts';
import { parseInferenceBackends, resolveModelId, type ModelKind, type Route } from './routing.ts';

export interface InferenceConfig {
  /** Address of the native backend (default routes). Default: the configured BACKEND_ADDRESS, or 127.0.0.1:50051. */
  nativeAddress?: string;
  /** The INFERENCE_BACKENDS value (default: the configured one, src/config.ts). */
  backends?: string;
  /** Routes given directly; they win over `backends`. */
  routes?: Record<string, Route>;
  /** Channel, limit and deadline settings, per backend. */
  backend?: BackendOptions;
  /** Health check period in milliseconds; 0 (default) disables the background checks. */
  healthIntervalMs?: number;
  /** Called when a backend's health changes (e.g. for logs and /health). */
  onHealthChange?: (h: BackendHealth) => void;
}

export interface InferenceClient {
  /** The routing table in use (platform model id → backend address and model name). */
  readonly routes: Readonly<Record<string, Route>>;
  /** Audio chunks for `req.text`; `req.model` is a platform model id (unknown/missing: s2.1-pro). */
  synthesize(req: SynthesizeInput, opts?: CallOptions): AsyncIterable<AudioChunk>;
  /** A live synthesis session; `config.model` is a platform model id. */
  synthesizeStream(config: SynthesizeInput, opts?: CallOptions): Promise<SynthesisSession>;
  /** Transcript of a whole recording (or of streamed pieces); `config.model` defaults to transcribe-1. */
  transcribe(config: TranscribeConfigInput, audio: Uint8Array | AsyncIterable<Uint8Array>, opts?: CallOptions): Promise<TranscribeResponse>;
  /** A realtime transcription session (PCM frames in, events out). */
  transcribeStream(config: TranscribeConfigInput, opts?: CallOptions): Promise<TranscriptionSession>;
  /** Chat generation events; `req.model` is a chat model id (default llm-medium). */
  generate(req: GenerateInput, opts?: CallOptions): AsyncIterable<GenerateResponse>;
  /** Candidate voices for a description; `req.model` is a voice-design model id (default voice-design-1). */
  designVoice(req: DesignVoiceInput, opts?: CallOptions): Promise<DesignVoiceResponse>;
  /** The lasting id of a designed voice, on the backend that designed it (`req.model`: the same id). */
  saveVoice(req: SaveVoiceInput, opts?: CallOptions): Promise<SaveVoiceResponse>;
  /** Capabilities of the backend serving `model` (default s2.1-pro). */
  capabilities(model?: string, opts?: CallOptions): Promise<CapabilitiesResponse>;
  /** Health of every backend (checked now). */
  health(opts?: CallOptions): Promise<BackendHealth[]>;
  /** Last known health from the background checks (empty when disabled). */
  lastHealth(): BackendHealth[];
  /** The connection serving a model id (after resolution). */
  backendFor(kind: ModelKind, model?: string): { backend: Backend; model: string; id: string };
  /**
   * What the shared calls have written that has not left yet, over every backend: recognition's
   * bytes summed, each call's oldest wait the longest of them (docs/inference.md, "Send backlog").
   */
  sendBacklog(): SendBacklog;
  /** Closes every channel and stops health checks. */
  close(): Promise<void>;
}

/** Creates the client. Backends are connected lazily, one channel per address. */
export function createInferenceClient(config: InferenceConfig = {}): InferenceClient {
  const configured = config.nativeAddress === undefined || (config.backends === undefined && config.routes === undefined) ? loadConfig() : undefined;
  const nativeAddress = config.nativeAddress ?? configured?.backendAddress ?? DEFAULT_BACKEND_ADDRESS;
  const routes = config.routes ?? parseInferenceBackends(config.backends ?? configured?.inferenceBackends, nativeAddress);
  const backends = new Map<string, Backend>();
  const known = new Map<string, BackendHealth>();
  const get = (address: string) => {
    let b = backends.get(address);
    if (!b) backends.set(address, (b = new Backend(address, config.backend)));
    return b;
  };
  for (const r of Object.values(routes)) get(r.address);

  const backendFor = (kind: ModelKind, model?: string) => {
    const id = resolveModelId(routes, kind, model);
    const r = routes[id];
    return { backend: get(r.address), model: r.model, id };
  };

  let timer: NodeJS.Timeout | null = null;
  if (config.healthIntervalMs) {
    const tick = async () => {
      for (const b of backends.values()) {
        const h = await b.check();
        const prev = known.get(b.address);
        known.set(b.address, h);
        if (!prev || prev.ok !== h.ok) config.onHealthChange?.(h);
      }
    };
    timer = setInterval(() => void tick(), config.healthIntervalMs);
    timer.unref();
    void tick();
  }

  return {
    routes,
    synthesize(req, opts) {
      const { backend, model } = backendFor('speech', req.model);
      return backend.synthesize({ ...req, model }, opts);
    },
    synthesizeStream(cfg, opts) {
      const { backend, model } = backendFor('speech', cfg.model);
      return backend.synthesizeStream({ ...cfg, model }, opts);
    },
    transcribe(cfg, audio, opts) {
      const { backend, model } = backendFor('transcription', cfg.model);
      return backend.transcribe({ ...cfg, model }, audio, opts);
    },
    transcribeStream(cfg, opts) {
      const { backend, model } = backendFor('transcription', cfg.model);
      return backend.transcribeStream({ ...cfg, model }, opts);
    },
    generate(req, opts) {
      const { backend, model } = backendFor('chat', req.model);
      return backend.generate({ ...req, model }, opts);
    },
    designVoice(req, opts) {
      const { backend, model } = backendFor('design', req.model);
      return backend.designVoice({ ...req, model }, opts);
    },
    saveVoice(req, opts) {
      const { backend, model } = backendFor('design', req.model);
      return backend.saveVoice({ ...req, model }, opts);
    },
    capabilities(model, opts) {
      return backendFor('speech', model).backend.capabilities(opts);
    },
    health: (opts) => Promise.all([...backends.values()].map((b) => b.check(opts))),
    lastHealth: () => [...known.values()],
    sendBacklog() {
      const all: SendBacklog = { recognition: { bytes: 0, ageMs: 0 }, synthesis: { bytes: 0, ageMs: 0 } };
      for (const b of backends.values()) {
        const one = b.sendBacklog();
        for (const k of ['recognition', 'synthesis'] as const) {
          all[k].bytes += one[k].bytes;
          all[k].ageMs = Math.max(all[k].ageMs, one[k].ageMs);
        }
      }
      return all;
    },
    backendFor,
    async close() {
      if (timer) clearInterval(timer);
      for (const b of backends.values()) b.close();
    },
  };
}
