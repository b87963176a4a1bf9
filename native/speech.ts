// Turning text into a stream of audio chunks: segmentation, pacing, chunking and the
// per-chunk alignment, shared by Synthesize and SynthesizeStream and by every engine.
import { create } from '@bufbuild/protobuf';
import { AlignmentSchema, AudioChunkSchema, AudioEncoding, SegmentSchema, type AudioChunk } from '../src/gen/inference/v1/inference_pb.ts';
import { applyGainDb, pcmBytes, wavHeader } from './audio.ts';
import { splitSentences } from './sentences.ts';
import type { SpeechEngine, SpeechOptions, Timed } from './engines/types.ts';

export interface Pacing {
  /** Delay before the first audio of a call, in milliseconds. */
  timeToFirstAudioMs: number;
  /** `realtime`: chunks leave no faster than they play; `fast`: as soon as they exist. */
  mode: 'realtime' | 'fast';
}

/**
 * Splits text into segments of at most `maxChars` code points (soft: a word longer than
 * that stays whole), cutting at sentence ends first, then at whitespace. Concatenating
 * the segments gives back the text exactly.
 */
export function segmentText(text: string, maxChars: number): string[] {
  const out: string[] = [];
  for (const s of splitSentences(text)) {
    const cps = Array.from(s);
    if (cps.length <= maxChars) {
      out.push(s);
      continue;
    }
    let cur = '';
    for (const piece of s.match(/\S+\s*|\s+/gu) ?? []) {
      if (cur && Array.from(cur).length + Array.from(piece).length > maxChars) {
        out.push(cur);
        cur = '';
      }
      if (Array.from(piece).length > maxChars) {
        // No whitespace to cut at (e.g. CJK): cut by code points.
        const p = Array.from(piece);
        for (let i = 0; i < p.length; i += maxChars) out.push(p.slice(i, i + maxChars).join(''));
        continue;
      }
      cur += piece;
    }
    if (cur) out.push(cur);
  }
  return out.filter((s) => s.length > 0);
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (ms <= 0) return resolve();
    const t = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
    const onAbort = () => { clearTimeout(t); reject(signal.reason); };
    signal.addEventListener('abort', onAbort, { once: true });
  });

export interface SpeechCallOptions extends SpeechOptions {
  volumeDb: number;
  encoding: AudioEncoding;
  chunkMs: number;
  pacing: Pacing;
}

/** Counts engine work so tests and Health can observe that cancelled work stops. */
export const speechStats = { segmentsSynthesized: 0, activeSyntheses: 0 };

/**
 * A call's chunks as the contract numbers them: sequence numbers and sample offsets over the
 * whole call, and a WAV call's header before its first audio. The native engines' timeline and
 * the provider engines' (providers/timeline.ts) both hand out chunks through one.
 */
export class ChunkNumbering {
  private sequence = 0n;
  /** Samples handed out so far. */
  offsetSamples = 0;
  private wroteHeader = false;
  constructor(private readonly encoding: AudioEncoding) {}

  /** The next chunk: `audio` (`samples` 16-bit samples at `rate`) with its words and characters. */
  next(audio: Uint8Array, samples: number, rate: number, words: Timed[], chars: Timed[], estimated: boolean, final: boolean): AudioChunk {
    const wav = this.encoding === AudioEncoding.WAV;
    if (wav && !this.wroteHeader) {
      this.wroteHeader = true;
      const h = wavHeader(rate);
      const both = new Uint8Array(h.length + audio.length);
      both.set(h);
      both.set(audio, h.length);
      audio = both;
    }
    const seg = (t: Timed) => create(SegmentSchema, { text: t.text, startMs: t.startMs, endMs: t.endMs });
    const c = create(AudioChunkSchema, {
      audio,
      sampleRateHz: rate,
      encoding: wav ? AudioEncoding.WAV : AudioEncoding.PCM_S16LE,
      sequence: this.sequence++,
      offsetSamples: BigInt(this.offsetSamples),
      offsetMs: (this.offsetSamples / rate) * 1000,
      durationMs: (samples / rate) * 1000,
      alignment: create(AlignmentSchema, { segments: words.map(seg), characters: chars.map(seg), estimated: estimated && (words.length > 0 || chars.length > 0) }),
      final,
    });
    this.offsetSamples += samples;
    return c;
  }
}

/**
 * One call's audio timeline: sequence numbers, sample offsets, pacing clock. Segments are
 * synthesized one ahead of the one being sent, so the engine works while chunks pace out.
 */
export class SpeechTimeline {
  private readonly chunks: ChunkNumbering;
  private rateHz = 0;
  private startedAt = 0;
  constructor(
    private readonly engine: SpeechEngine,
    private readonly opts: SpeechCallOptions,
    private readonly signal: AbortSignal,
  ) {
    this.chunks = new ChunkNumbering(opts.encoding);
  }

  /** Synthesizes `segments` and hands out chunks; the last chunk has `final` set when `finalAtEnd`. */
  async run(segments: string[], write: (c: AudioChunk) => Promise<void>, finalAtEnd: boolean): Promise<void> {
    if (!this.startedAt) this.startedAt = performance.now();
    const synth = (text: string) => {
      speechStats.activeSyntheses++;
      return this.engine.synthesize(text, this.opts, this.signal).finally(() => {
        speechStats.activeSyntheses--;
        speechStats.segmentsSynthesized++;
      });
    };
    let next = segments.length > 0 ? synth(segments[0]) : null;
    next?.catch(() => {});
    if (segments.length === 0 && finalAtEnd) {
      await write(this.chunk(new Int16Array(0), [], [], true));
      return;
    }
    // The call is not over until the engine is: a segment synthesized ahead is awaited (the
    // abort killed its engine work) before an error leaves this function.
    try {
      for (let i = 0; i < segments.length; i++) {
        const piece = await next!;
        this.signal.throwIfAborted();
        next = i + 1 < segments.length ? synth(segments[i + 1]) : null;
        next?.catch(() => {});
        this.rateHz ||= piece.sampleRateHz;
        const pcm = applyGainDb(piece.pcm, this.opts.volumeDb);
        const baseMs = (this.chunks.offsetSamples / this.rateHz) * 1000;
        const shift = (t: Timed) => ({ text: t.text, startMs: t.startMs + baseMs, endMs: t.endMs + baseMs });
        const words = piece.words.map(shift);
        const chars = piece.chars.map(shift);
        const per = Math.max(1, Math.round((this.rateHz * this.opts.chunkMs) / 1000));
        const lastSegment = i === segments.length - 1;
        for (let s = 0; s < pcm.length || s === 0; s += per) {
          const slice = pcm.subarray(s, Math.min(pcm.length, s + per));
          const endMs = ((this.chunks.offsetSamples + slice.length) / this.rateHz) * 1000;
          const isLast = s + per >= pcm.length;
          // A word or character belongs to the chunk its start falls in; the segment's last
          // chunk takes whatever is left.
          const take = (list: Timed[]) => {
            let n = 0;
            while (n < list.length && (isLast || list[n].startMs < endMs)) n++;
            return list.splice(0, n);
          };
          const c = this.chunk(slice, take(words), take(chars), finalAtEnd && lastSegment && isLast);
          await this.pace(c.offsetMs);
          await write(c);
          if (slice.length === 0) break;
        }
      }
    } finally {
      await next?.catch(() => {});
    }
  }

  private async pace(offsetMs: number) {
    const { timeToFirstAudioMs, mode } = this.opts.pacing;
    const due = this.startedAt + timeToFirstAudioMs + (mode === 'realtime' ? offsetMs : 0);
    await sleep(due - performance.now(), this.signal);
  }

  private chunk(pcm: Int16Array, words: Timed[], chars: Timed[], final: boolean): AudioChunk {
    const rate = this.rateHz || this.opts.sampleRateHz || this.engine.defaultSampleRateHz;
    return this.chunks.next(pcmBytes(pcm), pcm.length, rate, words, chars, !!this.engine.estimatedAlignment, final);
  }
}
