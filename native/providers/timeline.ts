// Provider speech as the contract's audio chunks: resampled to the rate the request asked for,
// cut into `chunkMs` pieces as it streams, sequence numbers and offsets over the whole call,
// gain applied, alignment per chunk (align.ts). Segments (one provider request each, or one
// stretch of a live socket) follow one another on the call's timeline.
import type { AudioChunk, AudioEncoding } from '../../src/gen/inference/v1/inference_pb.ts';
import { applyGainDb, StreamResampler } from '../audio.ts';
import { ChunkNumbering } from '../speech.ts';
import type { Timed } from '../engines/types.ts';
import { ESTIMATED_CHARS_PER_S, SegmentAligner } from './align.ts';

/** A piece of provider speech; `chars` times are ms from the start of the segment's audio. */
export interface ProviderAudio {
  pcm: Int16Array;
  sampleRateHz: number;
  chars?: Timed[];
}

export interface TimelineOptions {
  /** Output rate; 0: the provider's own. */
  sampleRateHz: number;
  encoding: AudioEncoding;
  chunkMs: number;
  volumeDb: number;
  /** Speaking rate multiplier (scales the estimated character rate). */
  speed: number;
}

/** One call's chunks, across segments. */
export class ProviderTimeline {
  private readonly chunks: ChunkNumbering;
  private rateHz: number;

  constructor(private readonly o: TimelineOptions) {
    this.rateHz = o.sampleRateHz;
    this.chunks = new ChunkNumbering(o.encoding);
  }

  get sampleRateHz(): number {
    return this.rateHz;
  }

  /** Milliseconds of audio handed out so far. */
  get offsetMs(): number {
    return this.rateHz ? (this.chunks.offsetSamples / this.rateHz) * 1000 : 0;
  }

  /** Starts a segment speaking `text`; `timestamps`: the provider sends character timings. */
  segment(text: string, timestamps: boolean): SegmentWriter {
    return new SegmentWriter(this, text, timestamps ? undefined : ESTIMATED_CHARS_PER_S * (this.o.speed || 1));
  }

  /** @internal */
  fixRate(providerRateHz: number): number {
    if (!this.rateHz) this.rateHz = providerRateHz;
    return this.rateHz;
  }

  /** @internal Samples per chunk. */
  get perChunk(): number {
    return Math.max(1, Math.round((this.rateHz * this.o.chunkMs) / 1000));
  }

  /** @internal */
  chunk(pcm: Int16Array, words: Timed[], chars: Timed[], estimated: boolean, final: boolean): AudioChunk {
    // The samples' own bytes (little-endian host, as tts-openai.ts checks): `pcm` is this chunk's.
    const gained = applyGainDb(pcm, this.o.volumeDb);
    const audio = new Uint8Array(gained.buffer, gained.byteOffset, gained.byteLength);
    return this.chunks.next(audio, pcm.length, this.rateHz || 24000, words, chars, estimated, final);
  }
}

/** One segment's audio on the timeline. */
export class SegmentWriter {
  private resampler: StreamResampler | null = null;
  private pending: Int16Array[] = [];
  private pendingSamples = 0;
  private aligner: SegmentAligner | null = null;

  constructor(
    private readonly t: ProviderTimeline,
    private text: string,
    private readonly estimatedRate: number | undefined,
  ) {}

  private alignerAt(): SegmentAligner {
    return (this.aligner ??= new SegmentAligner(this.text, this.t.offsetMs, this.estimatedRate));
  }

  /** More text for this segment (a live socket's text arrives in pieces). */
  appendText(text: string): void {
    if (this.aligner) this.aligner.append(text);
    else this.text += text;
  }

  /** Provider audio in; whole chunks out. */
  push(piece: ProviderAudio): AudioChunk[] {
    const rate = this.t.fixRate(piece.sampleRateHz);
    const aligner = this.alignerAt();
    if (piece.chars?.length) aligner.feed(piece.chars);
    if (piece.sampleRateHz !== rate && !this.resampler) this.resampler = new StreamResampler(piece.sampleRateHz, rate);
    const pcm = this.resampler ? this.resampler.push(piece.pcm) : piece.pcm;
    if (pcm.length) {
      this.pending.push(pcm);
      this.pendingSamples += pcm.length;
    }
    const out: AudioChunk[] = [];
    const per = this.t.perChunk;
    // The call's first audio goes out as it comes, whatever its length (time to first audio).
    if (this.t.offsetMs === 0 && this.pendingSamples > 0 && this.pendingSamples < per) out.push(this.emit(this.pendingSamples, false, false));
    while (this.pendingSamples >= per) out.push(this.emit(per, false, false));
    return out;
  }

  /** The segment's audio is complete: the rest, with `final` on its last chunk when asked. */
  end(final: boolean): AudioChunk[] {
    this.alignerAt();
    if (this.resampler) {
      const tail = this.resampler.flush();
      if (tail.length) {
        this.pending.push(tail);
        this.pendingSamples += tail.length;
      }
    }
    const out: AudioChunk[] = [];
    const per = this.t.perChunk;
    while (this.pendingSamples > per) out.push(this.emit(per, false, false));
    // The last piece of audio, the characters still untimed, or the call's end: a last chunk.
    if (this.pendingSamples > 0 || this.aligner!.remaining > 0 || final) out.push(this.emit(this.pendingSamples, true, final));
    return out;
  }

  private emit(n: number, last: boolean, final: boolean): AudioChunk {
    const head = this.pending[0];
    let pcm: Int16Array;
    let at = 0;
    if (head && head.length >= n) {
      // The chunk lies within one piece: a view of it, no copy.
      pcm = head.subarray(0, n);
      at = n;
      if (head.length === n) this.pending.shift();
      else this.pending[0] = head.subarray(n);
    } else {
      pcm = new Int16Array(n);
    }
    while (at < n) {
      const head = this.pending[0]!;
      const take = Math.min(head.length, n - at);
      pcm.set(head.subarray(0, take), at);
      at += take;
      if (take === head.length) this.pending.shift();
      else this.pending[0] = head.subarray(take);
    }
    this.pendingSamples -= n;
    const rate = this.t.sampleRateHz || 24000;
    const endMs = this.t.offsetMs + (n / rate) * 1000;
    const a = this.alignerAt();
    const { chars, words } = a.take(endMs, last);
    return this.t.chunk(pcm, words, chars, a.estimated, final);
  }
}
