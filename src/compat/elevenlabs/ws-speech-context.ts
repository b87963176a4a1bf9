/**
 * One synthesis context of family C's realtime input streaming: the single context of
 * `stream-input`, or one `context_id` of `multi-stream-input` (docs/api/compat.md
 * "Family C sockets").
 *
 * Text is buffered. A generation (one native synthesis of the buffered text) starts when the
 * client flushes or tries to trigger one, when the buffer reaches the next step of the
 * `chunk_length_schedule` (cut after the last whitespace), and at the end. Generations run
 * one after another through the native synthesis service (`TtsService.encoded` in a
 * synthesis actor); one encoder serves the whole context, so the audio frames concatenate
 * into one valid stream, and its tail is sent when the context finishes.
 *
 * Frames: `{audio}` per backend chunk with audio, plus `alignment` and `normalizedAlignment`
 * (identical; camelCase keys, milliseconds) with `sync_alignment=true` and characters to
 * report (with `sync_alignment=true` the first generation's frames are sent once its whole
 * synthesis is done: the first audio of a turn follows its fully synthesized first chunk);
 * after each generation a trailing alignment-only frame when characters remain (trailing
 * punctuation and whitespace). Milliseconds are absolute on the context's
 * timeline: generation two starts where generation one's audio ended.
 *
 * Whitespace-only text is not synthesized on its own: it is carried to the front of the next
 * generation (so the audio and the alignment spell the text exactly), or reported at the
 * end in an alignment-only frame.
 */
import { runSynthesis } from '../../../actors/synthesis.ts';
import type { AudioEncoder } from '../../audio/index.ts';
import { toServiceError } from '../../errors.ts';
import { countChars, MAX_TEXT_CHARS } from '../../speech/request.ts';
import { splitTextChunks } from '../../speech/tts-alignment.ts';
import { join, type Caller, type Prepared, type TtsService } from '../../speech/tts.ts';
import { recordUsage } from '../../speech/usage.ts';
import type { AudioChunk } from '../../gen/inference/v1/inference_pb.ts';
import { CharacterTimeline, wsAlignment, type CharTiming } from './common.ts';
import { b64 } from './tts.ts';

/** The vendor's default `chunk_length_schedule`. */
export const DEFAULT_CHUNK_SCHEDULE: readonly number[] = [120, 160, 250, 290];
/** Largest unsynthesized text per context (SPEC limits: 1 MiB, close 1009). */
export const TEXT_BUFFER_LIMIT_BYTES = 1024 * 1024;

export interface SpeechContextOptions {
  tts: TtsService;
  /** The context's validated native request (text empty): voice, format, prosody, model. */
  prepared: Prepared;
  caller: Caller;
  syncAlignment: boolean;
  schedule: readonly number[];
  /** Set on every frame (multi-stream-input). */
  contextId?: string;
  /** Sends a frame; a promise while the client is behind. */
  send(frame: Record<string, unknown>): Promise<void> | undefined;
  /** Reference audio is refused at the first flush (docs/api/compat.md): the message, when it was sent. */
  refuseAtFlush?: Error;
  /** A generation failed: later ones are dropped; the owner reports and closes. */
  onError(err: unknown): void;
}

/** The WebSocket alignment object: the three vendor keys plus the older `charsDurationsMs` spelling (docs/api/compat.md "Clients"). */
function alignmentOf(chars: CharTiming[]): Record<string, number[] | string[]> | null {
  const a = wsAlignment(chars);
  return a && { ...a, charsDurationsMs: a.charDurationsMs.slice() };
}

export class SpeechContext {
  private buffer = '';
  private carry = '';
  private queued = 0;
  private generations = 0;
  /** Whether the first generation (whose frames wait for its whole synthesis) has begun. */
  private firstHeld = false;
  private offsetMs = 0;
  private chain: Promise<void> = Promise.resolve();
  private readonly encoderState: { encoder?: AudioEncoder } = {};
  private failed = false;
  private finishing: Promise<boolean> | null = null;
  /** Characters sent to synthesis (usage). */
  private synthesized = 0;

  constructor(private readonly o: SpeechContextOptions) {}

  /** Unsynthesized text in UTF-8 bytes (buffered plus queued for synthesis). */
  get pendingBytes(): number {
    return Buffer.byteLength(this.buffer) + this.queued;
  }

  /** Whether appending `text` would take the unsynthesized text over the limit. */
  wouldOverflow(text: string): boolean {
    return this.pendingBytes + Buffer.byteLength(text) > TEXT_BUFFER_LIMIT_BYTES;
  }

  /** Buffers text; starts a generation when the buffer reaches the schedule's next step. */
  append(text: string): void {
    if (this.finishing || this.failed) return;
    this.buffer += text;
    for (;;) {
      const step = this.o.schedule[Math.min(this.generations, this.o.schedule.length - 1)]!;
      if (countChars(this.buffer) < step) return;
      const cut = lastWhitespaceEnd(this.buffer);
      if (cut <= 0) return;
      this.enqueue(this.buffer.slice(0, cut));
      this.buffer = this.buffer.slice(cut);
    }
  }

  /** `flush` / `try_trigger_generation`: synthesize everything buffered now. */
  flush(): void {
    if (this.finishing || this.failed) return;
    const text = this.buffer;
    this.buffer = '';
    this.enqueue(text);
  }

  /**
   * Synthesizes what is left, waits for every generation, sends the encoder's tail and any
   * unspoken whitespace's alignment. Resolves true when the context ended well (the owner
   * then sends `isFinal`), false when it failed or was cancelled.
   */
  finish(): Promise<boolean> {
    if (this.finishing) return this.finishing;
    const text = this.buffer;
    this.buffer = '';
    this.enqueue(text);
    this.finishing = this.chain.then(async () => {
      if (this.failed || this.o.caller.signal.aborted) return false;
      const encoder = (this.encoderState.encoder ??= await this.o.tts.encoderFor(this.o.prepared.req, this.o.prepared.req.sampleRateHz));
      const tail = join(encoder.end());
      if (tail.length) await this.o.send(this.frame({ audio: b64(tail) }));
      if (this.carry && this.o.syncAlignment) {
        const chars = Array.from(this.carry).map((char) => ({ char, startMs: this.offsetMs, endMs: this.offsetMs }));
        await this.o.send(this.alignmentFrame(chars));
      }
      this.carry = '';
      return !this.o.caller.signal.aborted;
    });
    return this.finishing;
  }

  /** Ends the request span and records usage (once, when the owner is done with the context). */
  settle(outcome: 'done' | 'cancelled' | 'failed', error?: { status: number; message: string }): void {
    const p = this.o.prepared;
    if (outcome === 'done') p.span.end();
    else p.span.end(error ?? { status: 499, message: 'client closed' });
    if (this.synthesized > 0) {
      void recordUsage(this.o.tts.deps.sql, { teamId: this.o.caller.teamId, kind: 'tts_characters', amount: this.synthesized, model: p.req.model }, this.o.tts.deps.log, { later: true });
    }
  }

  private enqueue(text: string): void {
    if (text.trim() === '') {
      this.carry += text;
      return;
    }
    const whole = this.carry + text;
    this.carry = '';
    const bytes = Buffer.byteLength(whole);
    this.queued += bytes;
    this.chain = this.chain.then(async () => {
      this.queued -= bytes;
      if (this.failed || this.o.caller.signal.aborted) return;
      try {
        if (this.o.refuseAtFlush) throw this.o.refuseAtFlush;
        this.generations++;
        // The native request has a text limit: long flushes go as several syntheses.
        for (const piece of splitTextChunks(whole, MAX_TEXT_CHARS)) await this.generate(piece);
      } catch (err) {
        if (this.o.caller.signal.aborted) return;
        this.failed = true;
        this.o.onError(err);
      }
    });
  }

  /** One native synthesis of `text`, its frames sent as they come. */
  private async generate(text: string): Promise<void> {
    const { tts, caller, prepared: base } = this.o;
    const characters = countChars(text);
    const p: Prepared = { req: { ...base.req, body: { ...base.req.body, text }, characters }, input: { ...base.input, text }, span: base.span };
    const startMs = this.offsetMs;
    const timeline = new CharacterTimeline(text, startMs);
    let audioEndMs = 0;
    let pending: CharTiming[] = [];
    const sync = this.o.syncAlignment;
    // With alignment on, the first audio of a turn (this context) arrives only after its first
    // text chunk is fully synthesized (docs/api/compat.md "Family C sockets"): the first generation's
    // frames wait here until its synthesis ends, then go out in order.
    const held: Record<string, unknown>[] | null = sync && !this.firstHeld ? [] : null;
    if (held) this.firstHeld = true;
    this.synthesized += characters;
    tts.stats.active++;
    const { result } = runSynthesis<{ chunk: AudioChunk; bytes: Uint8Array }>(
      {
        open: (signal) => tts.encoded(p, caller, signal, this.encoderState),
        deliver: ({ chunk, bytes }) => {
          audioEndMs = Math.max(audioEndMs, chunk.offsetMs + chunk.durationMs);
          if (sync) {
            for (const s of chunk.alignment?.segments ?? []) pending.push(...timeline.push({ text: s.text, startMs: startMs + s.startMs, endMs: startMs + s.endMs }));
          }
          if (bytes.length === 0) return undefined; // the encoder holds it: the characters wait for audio
          const chars = pending;
          pending = [];
          const frame: Record<string, unknown> = { audio: b64(bytes) };
          const a = alignmentOf(chars);
          if (a) Object.assign(frame, { alignment: a, normalizedAlignment: structuredClone(a) });
          if (held) {
            held.push(this.frame(frame));
            return undefined;
          }
          return this.o.send(this.frame(frame));
        },
        finish: async () => {
          if (!sync) return;
          for (const f of held ?? []) await this.o.send(f);
          pending.push(...timeline.finish(startMs + audioEndMs));
          if (pending.length) await this.o.send(this.alignmentFrame(pending));
          pending = [];
        },
      },
      caller.signal,
    );
    const r = await result;
    tts.stats.active--;
    tts.stats[r.outcome]++;
    this.offsetMs = startMs + audioEndMs;
    if (r.outcome === 'failed') {
      const e = toServiceError(r.error);
      if (e.code === 'internal') tts.deps.log.error({ err: r.error }, 'stream-input synthesis failed');
      throw r.error;
    }
  }

  private alignmentFrame(chars: CharTiming[]): Record<string, unknown> {
    const a = alignmentOf(chars)!;
    return this.frame({ alignment: a, normalizedAlignment: structuredClone(a) });
  }

  private frame(f: Record<string, unknown>): Record<string, unknown> {
    if (this.o.contextId !== undefined) f.contextId = this.o.contextId;
    return f;
  }
}

/** Index just past the last whitespace run in `text` (0 when there is none). */
function lastWhitespaceEnd(text: string): number {
  for (let i = text.length - 1; i >= 0; i--) if (/\s/.test(text[i]!)) return i + 1;
  return 0;
}
