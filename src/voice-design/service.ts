/**
 * Voice design (`POST /v1/voice-design`, docs/voice-design.md): a description in, candidate
 * voices out, each with preview audio (base64 WAV) and what saving it as a voice model needs:
 * its `id`, given to `POST /model` as `voice_design_id` beside the preview as a sample.
 *
 * Behind it, the backend's `DesignVoice` (docs/inference.md). The candidate id is the backend's
 * voice id and the design model, signed for the team (an HMAC under the master key), so a
 * saved voice names only voices a backend designed for that team. Stateless: nothing is stored
 * until a candidate is saved. Billed once per successful call (`voice_designs` usage).
 */
import { status as grpcStatus } from '@grpc/grpc-js';
import { z } from 'zod';
import { wavHeader } from '../audio/index.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import { invalidField, ServiceError } from '../errors.ts';
import { AudioEncoding } from '../gen/inference/v1/inference_pb.ts';
import type { InferenceClient } from '../inference/index.ts';
import type { Logger } from '../log.ts';

export const VOICE_DESIGN_MODEL = 'voice-design-1';

const nullable = <T extends z.ZodType>(s: T) => s.nullable().optional();

/** The request body: the upstream's fields and ranges; any other key is refused (422). */
export const voiceDesignBody = z.strictObject({
  instruction: z.string().min(1).max(2000).describe('What the voice should sound like (1–2,000 characters)'),
  reference_text: nullable(z.string().max(150)).describe('What the previews say (≤ 150 characters); default: a sentence in the language'),
  language: nullable(z.string().min(1).max(35)).describe('BCP-47 hint, e.g. en, ja'),
  n: z.int().min(1).max(4).default(2).describe('Candidates, 1–4'),
  speed: z.number().gt(0).max(3).default(1).describe('Speaking-rate multiplier, above 0 and at most 3'),
  num_step: z.int().min(1).max(128).default(32).describe('Diffusion steps (generative designers; others ignore it)'),
  guidance_scale: z.number().min(0).default(2).describe('Guidance (generative designers; others ignore it)'),
  instruct_guidance_scale: z.number().min(0).default(0).describe('Instruction guidance (generative designers; others ignore it)'),
  seed: nullable(z.int()).describe('The same request and seed give the same candidates, where the backend can promise it'),
});
export type VoiceDesignBody = z.output<typeof voiceDesignBody>;

export const voiceDesignCandidate = z.object({
  id: z.string().describe('Stable candidate identifier: POST /model takes it as voice_design_id'),
  index: z.int().min(0),
  audio_base64: z.string().describe('The preview: a WAV file (mono, 16-bit), standard base64'),
  sample_rate: z.int().positive().describe('Hz'),
  duration_ms: z.int().min(0),
  text: z.string().nullable().describe('What the preview says'),
  instruct: z.string().nullable().describe('The instruction it was designed from'),
  language: z.string().nullable(),
  summary: z.string().nullable().describe("What the backend made of the instruction: the settings it chose, the words it could not apply"),
});
export const voiceDesignResponse = z.object({ candidates: z.array(voiceDesignCandidate) });
export type VoiceDesignResponse = z.output<typeof voiceDesignResponse>;

/** The `model` header: required, and `voice-design-1` is the only model (422 at `header.model`). */
export function checkModelHeader(value: string | undefined): void {
  if (value === undefined || value === '') throw invalidField(['header', 'model'], 'Field required', 'missing');
  if (value !== VOICE_DESIGN_MODEL) throw invalidField(['header', 'model'], `Input should be '${VOICE_DESIGN_MODEL}'`, 'literal_error', { expected: `'${VOICE_DESIGN_MODEL}'` });
}

/** What a candidate id carries: the backend's voice id and the design model. */
export interface DesignRef {
  voiceId: string;
  model: string;
}

/** Candidate ids: `vd_<base64url payload>.<signature>`, signed for one team. */
export class DesignTokens {
  constructor(private readonly box: SecretBox) {}

  private sign(teamId: string, payload: string): string {
    return this.box.fingerprint(`voice-design|${teamId}|${payload}`).slice(0, 32);
  }

  issue(teamId: string, ref: DesignRef): string {
    const payload = Buffer.from(JSON.stringify([ref.voiceId, ref.model])).toString('base64url');
    return `vd_${payload}.${this.sign(teamId, payload)}`;
  }

  /** The design a candidate id names, or null when it is malformed, altered or another team's. */
  read(teamId: string, token: string): DesignRef | null {
    const m = /^vd_([A-Za-z0-9_-]{1,2048})\.([0-9a-f]{32})$/.exec(token);
    if (!m || this.sign(teamId, m[1]!) !== m[2]) return null;
    try {
      const [voiceId, model] = JSON.parse(Buffer.from(m[1]!, 'base64url').toString('utf8')) as unknown[];
      return typeof voiceId === 'string' && typeof model === 'string' && voiceId ? { voiceId, model } : null;
    } catch {
      return null;
    }
  }
}

/** An UNIMPLEMENTED answer of the backend (mapped to a 400 by the one gRPC mapping). */
function unimplemented(err: unknown): err is ServiceError {
  const cause = err instanceof ServiceError ? (err.cause as { code?: number } | undefined) : undefined;
  return cause?.code === grpcStatus.UNIMPLEMENTED;
}

/** Says clearly that voice design is what the backend lacks (with the backend's reason when it gave one). */
export function designNotSupported(err: ServiceError): ServiceError {
  const said = /^Not supported by the inference backend: (?:voice design: )?(.+)$/.exec(err.message)?.[1];
  return new ServiceError('bad_request', `Voice design is not supported by the inference backend${said ? `: ${said}` : ''}`, { cause: err });
}

export interface VoiceDesignDeps {
  inference: InferenceClient;
  tokens: DesignTokens;
  log: Logger;
  /** 402 when the team is out of credit. */
  credit: { ensure(teamId: string): Promise<void> };
  /** The team's speech concurrency cap (429 over it). */
  concurrency?: { acquire(teamId: string, signal?: AbortSignal): Promise<{ release(): void }> };
  /** Meters one successful call. */
  onDesigned(teamId: string): Promise<void>;
}

export class VoiceDesignService {
  constructor(private readonly deps: VoiceDesignDeps) {}

  async design(teamId: string, body: VoiceDesignBody, o: { signal?: AbortSignal; requestId?: string } = {}): Promise<VoiceDesignResponse> {
    await this.deps.credit.ensure(teamId);
    const slot = await this.deps.concurrency?.acquire(teamId, o.signal);
    let res;
    try {
      res = await this.deps.inference.designVoice({
        model: VOICE_DESIGN_MODEL,
        description: body.instruction,
        text: body.reference_text ?? '',
        language: body.language ?? '',
        count: body.n,
        speed: body.speed,
        numSteps: body.num_step,
        guidanceScale: body.guidance_scale,
        instructionGuidanceScale: body.instruct_guidance_scale,
        ...(body.seed !== undefined && body.seed !== null ? { seed: BigInt(body.seed) } : {}),
        output: { encoding: AudioEncoding.PCM_S16LE },
      }, { signal: o.signal, requestId: o.requestId, teamId });
    } catch (err) {
      if (unimplemented(err)) throw designNotSupported(err);
      throw err;
    } finally {
      slot?.release();
    }
    await this.deps.onDesigned(teamId);
    return {
      candidates: res.voices.map((v, index) => {
        const pcm = v.encoding === AudioEncoding.WAV ? v.audio.subarray(44) : v.audio;
        const wav = Buffer.concat([wavHeader(v.sampleRateHz, pcm.byteLength), pcm]);
        return {
          id: this.deps.tokens.issue(teamId, { voiceId: v.voiceId, model: VOICE_DESIGN_MODEL }),
          index,
          audio_base64: wav.toString('base64'),
          sample_rate: v.sampleRateHz,
          duration_ms: Math.round(v.durationMs),
          text: v.text || null,
          instruct: body.instruction,
          language: v.language || body.language || null,
          summary: v.summary || null,
        };
      }),
    };
  }

  /**
   * The lasting backend voice id of a candidate being saved as a voice model: `SaveVoice` on
   * the backend that designed it; a backend without SaveVoice keeps the designed id.
   * A candidate id that is not this team's, or that the backend no longer knows → 422/400.
   */
  async keep(teamId: string, token: string, name: string, description: string, o: { signal?: AbortSignal; requestId?: string } = {}): Promise<string> {
    const ref = this.deps.tokens.read(teamId, token);
    if (!ref) throw invalidField(['body', 'voice_design_id'], 'Not a voice design candidate id of this team', 'voice_design_id');
    try {
      const kept = await this.deps.inference.saveVoice({ voiceId: ref.voiceId, model: ref.model, name, description }, { signal: o.signal, requestId: o.requestId, teamId });
      return kept.voiceId || ref.voiceId;
    } catch (err) {
      if (unimplemented(err)) return ref.voiceId;
      throw err;
    }
  }
}
