/**
 * Session configuration of the realtime socket (docs/api/compat.md "Realtime"): reading
 * `session.update` / `transcription_session.update` in both the GA positions
 * (`session.audio.output.voice`, `audio.input.format`, …) and the older top-level ones
 * (`voice`, `speed`, `output_audio_format`, …), and the session object events echo (always
 * in the GA positions).
 */
import { checkFormat, type OutputFormat } from '../../audio/index.ts';
import { COMPAT_SPEED, PRESET_VOICES } from './speech.ts';

/** A refusal of a client event: the `error` event's code, message and param. */
export class RealtimeRefusal extends Error {
  constructor(readonly code: string, message: string, readonly param?: string) {
    super(message);
  }
}

export type AudioKind = OutputFormat;
export interface AudioFormat {
  kind: AudioKind;
  rateHz: number;
}

/** A format given without a rate takes that format's default rate (docs/api/compat.md). */
export const DEFAULT_RATE_HZ: Record<AudioKind, number> = { pcm: 24000, wav: 44100, mp3: 44100, opus: 48000 };

/** Format names as strings (older position) or `{type}` MIME types (GA). */
const NAMES: Record<string, AudioKind> = {
  pcm16: 'pcm', pcm: 'pcm', 'audio/pcm': 'pcm',
  wav: 'wav', 'audio/wav': 'wav', 'audio/x-wav': 'wav',
  mp3: 'mp3', 'audio/mpeg': 'mp3', 'audio/mp3': 'mp3',
  opus: 'opus', 'audio/opus': 'opus', 'audio/ogg': 'opus',
};
const REFUSED = new Set(['audio/pcmu', 'audio/pcma', 'g711_ulaw', 'g711_alaw', 'pcmu', 'pcma']);

/** Input audio rates a PCM buffer may declare. */
const INPUT_RATES = [8000, 16000, 22050, 24000, 32000, 44100, 48000];

/** Reads a format in either shape; `output` checks the rate against the encoder's rules. */
export function parseFormat(v: unknown, param: string, output: boolean): AudioFormat {
  let name: unknown = v;
  let rate: unknown;
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    name = (v as { type?: unknown }).type;
    rate = (v as { rate?: unknown }).rate;
  }
  if (typeof name !== 'string') throw new RealtimeRefusal('invalid_value', `${param} must be a format name or {type, rate}`, param);
  const key = name.toLowerCase();
  if (REFUSED.has(key)) throw new RealtimeRefusal('unsupported_audio_format', `${name} (mu-law / A-law) is not supported. Use pcm16, wav, mp3 or opus`, param);
  const kind = NAMES[key];
  if (!kind) throw new RealtimeRefusal('invalid_value', `Unknown audio format ${JSON.stringify(name)}. Use pcm16, wav, mp3 or opus (or {type: "audio/pcm", rate})`, param);
  const rateHz = rate === undefined || rate === null ? DEFAULT_RATE_HZ[kind] : rate;
  if (typeof rateHz !== 'number' || !Number.isInteger(rateHz)) throw new RealtimeRefusal('invalid_value', `${param}.rate must be an integer`, `${param}.rate`);
  if (output) {
    try {
      checkFormat(kind, rateHz);
    } catch (err) {
      throw new RealtimeRefusal('invalid_value', (err as Error).message, `${param}.rate`);
    }
  } else if (kind === 'pcm' && !INPUT_RATES.includes(rateHz)) {
    throw new RealtimeRefusal('invalid_value', `Input PCM rate ${rateHz} is not supported. Supported: ${INPUT_RATES.join(', ')}`, `${param}.rate`);
  }
  return { kind, rateHz };
}

const wire = (f: AudioFormat) => ({ type: f.kind === 'pcm' ? 'audio/pcm' : f.kind === 'mp3' ? 'audio/mpeg' : `audio/${f.kind}`, rate: f.rateHz });

export interface SessionConfig {
  type: 'realtime' | 'transcription';
  /** The model id as the client named it (echoed). */
  model: string;
  instructions: string;
  voice: string;
  speed: number;
  output: AudioFormat;
  input: AudioFormat;
  transcription: { model: string; language: string | null; prompt: string };
}

export function defaultConfig(type: SessionConfig['type'], model: string, transcriptionModel: string): SessionConfig {
  return {
    type,
    model,
    instructions: '',
    voice: '',
    speed: 1,
    output: { kind: 'pcm', rateHz: DEFAULT_RATE_HZ.pcm },
    input: { kind: 'pcm', rateHz: DEFAULT_RATE_HZ.pcm },
    transcription: { model: transcriptionModel, language: null, prompt: '' },
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
const at = (o: unknown, ...path: string[]): unknown => path.reduce<unknown>((v, k) => (isObject(v) ? v[k] : undefined), o);

/** A voice in either shape; preset names do not exist here. */
export function readVoice(v: unknown, param: string): string {
  const id = isObject(v) ? v.id : v;
  if (typeof id !== 'string') throw new RealtimeRefusal('invalid_value', `${param} must be a voice id string or {id}`, param);
  if (id === 'default') return '';
  if (PRESET_VOICES.has(id.toLowerCase())) {
    throw new RealtimeRefusal('invalid_value', `Voice ${JSON.stringify(id)} is a vendor preset name; presets do not exist here. Use a voice id from your library, or "" for the default voice`, param);
  }
  return id;
}

export function readSpeed(v: unknown, param: string): number {
  if (typeof v !== 'number' || !(v >= COMPAT_SPEED.min && v <= COMPAT_SPEED.max)) {
    throw new RealtimeRefusal('invalid_speed', `speed must be a number between ${COMPAT_SPEED.min} and ${COMPAT_SPEED.max}`, param);
  }
  return v;
}

/**
 * The configuration after an update; throws a refusal and leaves `current` untouched when
 * any field is refused (an update applies whole or not at all).
 */
export function applyUpdate(current: SessionConfig, s: unknown, resolveTranscriptionModel: (model: string) => string): SessionConfig {
  if (!isObject(s)) throw new RealtimeRefusal('invalid_value', 'session must be an object', 'session');
  const next: SessionConfig = { ...current, transcription: { ...current.transcription } };
  if (s.type === 'transcription' || s.type === 'realtime') next.type = s.type;
  else if (s.type !== undefined) throw new RealtimeRefusal('invalid_value', 'session.type must be "realtime" or "transcription"', 'session.type');

  for (const [value, param] of [[at(s, 'turn_detection'), 'session.turn_detection'], [at(s, 'audio', 'input', 'turn_detection'), 'session.audio.input.turn_detection']] as const) {
    if (value !== undefined && value !== null) {
      throw new RealtimeRefusal('unsupported_turn_detection', 'Turn detection is not supported: set turn_detection to null and commit the input audio buffer yourself', param);
    }
  }
  const modalities = s.output_modalities ?? s.modalities;
  if (modalities !== undefined) {
    if (!Array.isArray(modalities) || !modalities.includes('audio') || modalities.some((m) => m !== 'audio' && m !== 'text')) {
      throw new RealtimeRefusal('unsupported_output_modalities', 'Only audio output is offered: output_modalities must include "audio"', s.output_modalities !== undefined ? 'session.output_modalities' : 'session.modalities');
    }
  }
  if (typeof s.instructions === 'string') next.instructions = s.instructions;

  const voice = at(s, 'audio', 'output', 'voice') ?? s.voice;
  if (voice !== undefined) next.voice = readVoice(voice, at(s, 'audio', 'output', 'voice') !== undefined ? 'session.audio.output.voice' : 'session.voice');
  const speed = at(s, 'audio', 'output', 'speed') ?? s.speed;
  if (speed !== undefined) next.speed = readSpeed(speed, at(s, 'audio', 'output', 'speed') !== undefined ? 'session.audio.output.speed' : 'session.speed');
  const out = at(s, 'audio', 'output', 'format') ?? s.output_audio_format;
  if (out !== undefined) next.output = parseFormat(out, at(s, 'audio', 'output', 'format') !== undefined ? 'session.audio.output.format' : 'session.output_audio_format', true);
  const inp = at(s, 'audio', 'input', 'format') ?? s.input_audio_format;
  if (inp !== undefined) next.input = parseFormat(inp, at(s, 'audio', 'input', 'format') !== undefined ? 'session.audio.input.format' : 'session.input_audio_format', false);

  const tr = at(s, 'audio', 'input', 'transcription') ?? s.input_audio_transcription;
  if (isObject(tr)) {
    if (typeof tr.model === 'string' && tr.model !== '') next.transcription.model = resolveTranscriptionModel(tr.model);
    if (typeof tr.language === 'string') next.transcription.language = tr.language === '' ? null : tr.language;
    if (typeof tr.prompt === 'string') next.transcription.prompt = tr.prompt;
  }
  return next;
}

/** The session object events carry (GA positions; `turn_detection` always null). */
export function sessionObject(id: string, c: SessionConfig, expiresAtS: number): Record<string, unknown> {
  // Every commit is transcribed, so the transcription block is always shown.
  const input = { format: wire(c.input), transcription: { ...c.transcription }, noise_reduction: null, turn_detection: null };
  if (c.type === 'transcription') {
    return { type: 'transcription', object: 'realtime.transcription_session', id, expires_at: expiresAtS, audio: { input }, include: null };
  }
  return {
    type: 'realtime',
    object: 'realtime.session',
    id,
    model: c.model,
    output_modalities: ['audio'],
    instructions: c.instructions,
    tools: [],
    tool_choice: 'auto',
    max_output_tokens: 'inf',
    tracing: null,
    truncation: 'disabled',
    prompt: null,
    expires_at: expiresAtS,
    include: null,
    audio: { input, output: { format: wire(c.output), voice: c.voice, speed: c.speed } },
  };
}
