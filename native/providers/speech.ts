// What a speech provider engine offers, and the speaker that turns text into chunks through it:
// one provider request per segment (a sentence, or what a flush leaves), the next one started
// while the current one streams, audio written in order as it comes.
import * as grpc from '@grpc/grpc-js';
import type { AudioChunk } from '../../src/gen/inference/v1/inference_pb.ts';
import type { DesignedVoice, DesignRequest } from '../engines/types.ts';
import { cutSentences } from '../sentences.ts';
import { segmentText } from '../speech.ts';
import { StatusError } from '../status.ts';
import type { CallScope, Provider } from './http.ts';
import type { ProviderAudio, ProviderTimeline } from './timeline.ts';

export interface ProviderSpeechOptions {
  /** The provider's voice (the request's reference_id, else the configured voice). */
  voice: string;
  /** 0.5 to 2. */
  speed: number;
  /** BCP-47, '' when not given. */
  language: string;
  /** Rate the call wants, 0: the provider's. Engines ask the provider for it when they can. */
  sampleRateHz: number;
}

/** A live synthesis (SynthesizeStream): text in as it comes, audio out in order. */
export interface LiveSpeaker {
  /** A piece of text (pieces concatenate as given). */
  text(piece: string): void;
  /**
   * Speaks everything received; resolves when its audio has been written, the last chunk
   * `final`. `onlyIfPending`: nothing (not even a final chunk) when no text came since the last flush.
   */
  flush(onlyIfPending?: boolean): Promise<void>;
}

/** A speech provider engine. */
export interface SpeechProvider {
  readonly provider: Provider;
  /** The configured voice. */
  readonly voice: string;
  /** Whether `synthesize` reports character timings. */
  readonly timestamps: boolean;
  /** One text's audio as it streams. */
  synthesize(text: string, o: ProviderSpeechOptions, scope: CallScope): AsyncIterable<ProviderAudio>;
  /** A live speaker of its own (a socket), for SynthesizeStream; absent: a SegmentSpeaker. */
  live?(o: ProviderSpeechOptions, timeline: ProviderTimeline, scope: CallScope, write: (c: AudioChunk) => Promise<void>): LiveSpeaker;
  probe(scope: CallScope): Promise<void>;
  /** Voice design on the provider (DesignVoice); absent: the provider's kind cannot design voices. */
  design?(req: DesignRequest, scope: CallScope): Promise<DesignedVoice[]>;
  /** Keeps a designed voice in the provider's library (SaveVoice); answers its lasting voice id. */
  save?(req: { voiceId: string; name: string; description: string }, scope: CallScope): Promise<string>;
  close?(): Promise<void>;
}

/** A queue one producer fills and one consumer reads with `for await`. */
export class Pipe<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private ended = false;
  private error: unknown = null;
  private wake: (() => void) | null = null;

  push(v: T) {
    this.items.push(v);
    this.wake?.();
  }

  end(err?: unknown) {
    this.ended = true;
    if (err !== undefined) this.error = err;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    for (;;) {
      if (this.items.length) {
        yield this.items.shift()!;
        continue;
      }
      if (this.ended) {
        if (this.error !== null) throw this.error;
        return;
      }
      await new Promise<void>((r) => (this.wake = r));
      this.wake = null;
    }
  }
}

interface Segment {
  text: string;
  pipe: Pipe<ProviderAudio>;
  started: boolean;
  /** Its last chunk ends the flush. */
  final: boolean;
}

/**
 * Text to chunks over `synthesize`, one request per segment. With `sentences`, text waits until
 * a sentence ends (or grows past `chunkLength`) so requests carry whole sentences; a flush
 * speaks the rest. At most two requests run at once: the one being written and the next.
 */
export class SegmentSpeaker implements LiveSpeaker {
  private buffer = '';
  private readonly queue: Segment[] = [];
  private writer: Promise<void> = Promise.resolve();
  private writing = false;
  private failure: unknown = null;
  /** Whether the last chunk written was final (nothing written yet counts as final). */
  private lastFinal = true;

  constructor(
    private readonly sp: SpeechProvider,
    private readonly o: ProviderSpeechOptions,
    private readonly timeline: ProviderTimeline,
    private readonly scope: CallScope,
    private readonly write: (c: AudioChunk) => Promise<void>,
    private readonly chunkLength: number,
    private readonly sentences: boolean,
  ) {}

  text(piece: string): void {
    this.buffer += piece;
    if (!this.sentences) return;
    const segs = segmentText(this.buffer, this.chunkLength);
    const complete = cutSentences(this.buffer)[1] === '' ? segs : segs.slice(0, -1);
    if (!complete.length) return;
    const text = complete.join('');
    this.buffer = this.buffer.slice(text.length);
    for (const s of complete) this.enqueue(s);
  }

  async flush(onlyIfPending = false): Promise<void> {
    const pending = this.buffer !== '' || this.queue.length > 0 || !this.lastFinal;
    if (onlyIfPending && !pending) return;
    for (const s of segmentText(this.buffer, this.chunkLength)) this.enqueue(s);
    this.buffer = '';
    const last = this.queue[this.queue.length - 1];
    if (last) last.final = true;
    await this.writer;
    if (this.failure !== null) throw this.failure;
    if (!this.lastFinal) {
      // The audio ended before the flush came: an empty chunk says it is complete.
      for (const c of this.timeline.segment('', this.sp.timestamps).end(true)) await this.write(c);
      this.lastFinal = true;
    }
  }

  private enqueue(text: string) {
    if (!text) return;
    this.queue.push({ text, pipe: new Pipe(), started: false, final: false });
    this.startAhead();
    if (!this.writing) {
      this.writing = true;
      this.writer = this.drain().catch((err) => {
        this.failure ??= err;
        this.queue.length = 0;
      }).finally(() => (this.writing = false));
    }
  }

  /** Starts the requests of the first two queued segments. */
  private startAhead() {
    for (const s of this.queue.slice(0, 2)) {
      if (s.started) continue;
      s.started = true;
      (async () => {
        for await (const piece of this.sp.synthesize(s.text, this.o, this.scope)) s.pipe.push(piece);
      })().then(() => s.pipe.end(), (err) => s.pipe.end(err));
    }
  }

  private async drain() {
    while (this.queue.length) {
      const s = this.queue[0]!;
      this.startAhead();
      const w = this.timeline.segment(s.text, this.sp.timestamps);
      this.lastFinal = false;
      for await (const piece of s.pipe) for (const c of w.push(piece)) await this.write(c);
      this.queue.shift();
      const final = s.final;
      for (const c of w.end(final)) await this.write(c);
      if (final) this.lastFinal = true;
      this.startAhead();
    }
  }
}

/** A provider's refusal of a voice, as the contract's NOT_FOUND. */
export function voiceRefused(err: unknown, askedVoice: boolean): unknown {
  if (askedVoice && err instanceof StatusError && (err.code === grpc.status.INVALID_ARGUMENT || err.code === grpc.status.FAILED_PRECONDITION) && /voice|reference/i.test(err.details)) {
    return new StatusError(grpc.status.NOT_FOUND, 'Reference not found');
  }
  return err;
}
