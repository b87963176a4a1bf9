/**
 * Synthesis whose audio the compat layer wraps itself (chat completions, the realtime
 * socket) instead of streaming it raw to an HTTP reply. Same contract as
 * `TtsService.stream`: a synthesis actor pulls from the backend only as fast as `deliver`
 * accepts, usage is recorded once on success, the request span ends with the outcome.
 */
import { runSynthesis } from '../../../actors/synthesis.ts';
import type { AudioEncoder } from '../../audio/index.ts';
import { toServiceError } from '../../errors.ts';
import type { AudioChunk } from '../../gen/inference/v1/inference_pb.ts';
import { recordUsage } from '../../speech/usage.ts';
import { join, type Caller, type Prepared, type TtsService } from '../../speech/tts.ts';

/** The parts of `TtsService` a wrapped synthesis uses. */
export type SynthesisHost = Pick<TtsService, 'encoded' | 'encoderFor' | 'stats' | 'deps'>;

/**
 * Runs one synthesis; `deliver` gets encoded audio in order (never empty) and may return a
 * promise to hold the backend back. Resolves `done` or `cancelled` (the caller's signal);
 * throws the failure.
 */
export async function synthesize(
  tts: SynthesisHost,
  p: Prepared,
  caller: Caller,
  deliver: (bytes: Uint8Array) => Promise<void> | void,
): Promise<'done' | 'cancelled'> {
  const state: { encoder?: AudioEncoder } = {};
  tts.stats.active++;
  const { result } = runSynthesis<{ chunk: AudioChunk; bytes: Uint8Array }>(
    {
      open: (signal) => tts.encoded(p, caller, signal, state),
      deliver: ({ bytes }) => (bytes.length ? (deliver(bytes) ?? undefined) : undefined),
      finish: async () => {
        state.encoder ??= await tts.encoderFor(p.req, p.req.sampleRateHz);
        const tail = join(state.encoder.end());
        if (tail.length) await deliver(tail);
      },
    },
    caller.signal,
  );
  const r = await result;
  tts.stats.active--;
  tts.stats[r.outcome]++;
  if (r.outcome === 'done') {
    p.span.end();
    void recordUsage(tts.deps.sql, { teamId: caller.teamId, kind: 'tts_characters', amount: p.req.characters, model: p.req.model }, tts.deps.log);
    return 'done';
  }
  if (r.outcome === 'cancelled') {
    p.span.end({ status: 499, message: 'client closed the request' });
    return 'cancelled';
  }
  const e = toServiceError(r.error);
  p.span.end({ status: e.status, message: e.message });
  if (e.code === 'internal') tts.deps.log.error({ err: r.error }, 'synthesis failed');
  throw e;
}

/**
 * Cuts a byte stream into base64 pieces that concatenate: every piece but the last covers a
 * multiple of 3 bytes, so joining the strings gives the base64 of the whole audio and each
 * piece also decodes on its own.
 */
export class Base64Pieces {
  private rest: Buffer = Buffer.alloc(0);

  /** The base64 of what can be sent now ('' when under 3 bytes are pending). */
  push(bytes: Uint8Array): string {
    const all = this.rest.length ? Buffer.concat([this.rest, bytes]) : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const cut = all.length - (all.length % 3);
    this.rest = Buffer.from(all.subarray(cut));
    return all.subarray(0, cut).toString('base64');
  }

  /** The base64 of the last bytes (with padding). */
  end(): string {
    const out = this.rest.toString('base64');
    this.rest = Buffer.alloc(0);
    return out;
  }
}
