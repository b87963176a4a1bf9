/**
 * Model routing: which backend serves a platform model id, and under which name.
 *
 * INFERENCE_BACKENDS (docs/inference.md) is either JSON:
 *   {"s2.1-pro": "gpu-a:50051", "transcribe-1": {"address": "asr:50051", "model": "whisper-large-v3"}}
 * or a comma-separated list of `model=address[/backend-model]`:
 *   s2.1-pro=gpu-a:50051/fish-s2,transcribe-1=asr:50051
 * Listed ids override the defaults; ids not listed keep routing to the native backend.
 * The key `*` sets the address of every default route at once.
 */
import { ServiceError } from '../errors.ts';

export interface Route {
  /** gRPC target, `host:port` (or `dns:///host:port` for round robin over DNS). */
  address: string;
  /** The model name the backend knows. */
  model: string;
}

export type ModelKind = 'speech' | 'transcription' | 'chat' | 'design';

/** The spec's speech model ids; an unknown or missing model means the first. */
export const SPEECH_MODEL_IDS = ['s2.1-pro', 's2.1-pro-free', 's2-pro', 's1'] as const;
export const TRANSCRIPTION_MODEL_IDS = ['transcribe-1'] as const;
/** Chat model ids: the agent LLM tiers and the scripted model itself. */
export const CHAT_MODEL_IDS = ['llm-instant', 'llm-medium', 'llm-high', 'scripted'] as const;
/** Voice design (`POST /v1/voice-design`, DesignVoice and SaveVoice). */
export const VOICE_DESIGN_MODEL_IDS = ['voice-design-1'] as const;
export const DEFAULT_MODEL: Record<ModelKind, string> = { speech: 's2.1-pro', transcription: 'transcribe-1', chat: 'llm-medium', design: 'voice-design-1' };

/**
 * The embedded default: every id on the native backend under its own name (the native backend
 * serves the agent LLM tiers with its chat provider when one is set, else its scripted model).
 */
export function defaultRoutes(nativeAddress: string): Record<string, Route> {
  const routes: Record<string, Route> = {};
  for (const id of [...SPEECH_MODEL_IDS, ...TRANSCRIPTION_MODEL_IDS, ...CHAT_MODEL_IDS, ...VOICE_DESIGN_MODEL_IDS]) routes[id] = { address: nativeAddress, model: id };
  return routes;
}

function bad(msg: string): never {
  throw new ServiceError('internal', `INFERENCE_BACKENDS: ${msg}`);
}

/** Parses INFERENCE_BACKENDS over the defaults. Throws (at startup) on a malformed value. */
export function parseInferenceBackends(value: string | undefined, nativeAddress: string): Record<string, Route> {
  const routes = defaultRoutes(nativeAddress);
  const v = value?.trim();
  if (!v) return routes;
  const entries: [string, Route][] = [];
  if (v.startsWith('{')) {
    let obj: unknown;
    try {
      obj = JSON.parse(v);
    } catch {
      bad('not valid JSON');
    }
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) bad('must be a JSON object');
    for (const [id, r] of Object.entries(obj as Record<string, unknown>)) {
      if (typeof r === 'string') entries.push([id, { address: r, model: '' }]);
      else if (r && typeof r === 'object' && typeof (r as Route).address === 'string')
        entries.push([id, { address: (r as Route).address, model: typeof (r as Route).model === 'string' ? (r as Route).model : '' }]);
      else bad(`entry ${id} needs an address`);
    }
  } else {
    for (const part of v.split(',').map((s) => s.trim()).filter(Boolean)) {
      const eq = part.indexOf('=');
      if (eq <= 0) bad(`"${part}" is not model=address[/model]`);
      const id = part.slice(0, eq).trim();
      const rest = part.slice(eq + 1).trim();
      const slash = rest.lastIndexOf('/');
      // dns:///host:port has slashes of its own: a backend model follows the last slash only after the port.
      const hasModel = slash > 0 && /:\d+$/.test(rest.slice(0, slash));
      entries.push([id, { address: hasModel ? rest.slice(0, slash) : rest, model: hasModel ? rest.slice(slash + 1) : '' }]);
    }
  }
  for (const [id, r] of entries) {
    if (!r.address) bad(`entry ${id} has an empty address`);
    if (id === '*') {
      for (const k of Object.keys(routes)) routes[k] = { ...routes[k], address: r.address };
      continue;
    }
    routes[id] = { address: r.address, model: r.model || routes[id]?.model || id };
  }
  return routes;
}

/** The platform model id a request means: unknown or missing ids become the kind's default. */
export function resolveModelId(routes: Record<string, Route>, kind: ModelKind, model: string | undefined): string {
  const byKind: Record<ModelKind, readonly string[]> = { speech: SPEECH_MODEL_IDS, transcription: TRANSCRIPTION_MODEL_IDS, chat: CHAT_MODEL_IDS, design: VOICE_DESIGN_MODEL_IDS };
  if (!model) return DEFAULT_MODEL[kind];
  if (byKind[kind].includes(model)) return model;
  // An extra id configured in INFERENCE_BACKENDS, as long as it is not another kind's id.
  const otherKind = (Object.keys(byKind) as ModelKind[]).some((k) => k !== kind && byKind[k].includes(model));
  return routes[model] && !otherKind ? model : DEFAULT_MODEL[kind];
}
