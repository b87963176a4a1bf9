/**
 * Alignment for `POST /v1/tts/stream/with-timestamp` (docs/api/speech.md). The text is cut into
 * text chunks the way the request's `chunk_length` asks (sentences first, then whitespace);
 * the backend's word segments (absolute milliseconds) are assigned to the text chunk they
 * fall in by their position in the text. Each event carries the cumulative snapshot of its
 * chunk's words, times in seconds relative to the chunk's start, and the chunk's absolute
 * start (`chunk_audio_offset_sec`): clients replace, never append.
 */
import { splitSentences } from '../../actors/sentences.ts';
import type { AudioChunk } from '../gen/inference/v1/inference_pb.ts';

/** Splits text into pieces of at most `maxChars` code points; the pieces concatenate back to the text. */
export function splitTextChunks(text: string, maxChars: number): string[] {
  const sentences = splitSentences(text);
  const out: string[] = [];
  let cur = '';
  const len = (s: string) => Array.from(s).length;
  for (const s of sentences) {
    for (const piece of s.length ? (len(s) <= maxChars ? [s] : (s.match(/\S+\s*|\s+/gu) ?? [s])) : []) {
      if (cur && len(cur) + len(piece) > maxChars) {
        out.push(cur);
        cur = '';
      }
      cur += piece;
    }
  }
  if (cur) out.push(cur);
  return out;
}

export interface TimestampEvent {
  audio_base64: string;
  content: string;
  alignment: { segments: { text: string; start: number; end: number }[]; audio_duration: number } | null;
  chunk_seq: number;
  chunk_audio_offset_sec: number;
}

const sec = (ms: number) => Math.round(ms) / 1000;

/** Builds the SSE payloads of one synthesis, one `event(chunk, audio)` per backend chunk. */
export class AlignmentTracker {
  private readonly chunks: string[];
  /** Start offset (characters into the text) of each chunk. */
  private readonly starts: number[] = [];
  private cursor = 0;
  private seq = 0;
  private chunkStartMs = 0;
  private words: { text: string; start: number; end: number }[] = [];
  private audioEndMs = 0;

  constructor(private readonly text: string, chunkLength: number) {
    this.chunks = splitTextChunks(text, chunkLength);
    let at = 0;
    for (const c of this.chunks) {
      this.starts.push(at);
      at += c.length;
    }
  }

  private chunkAt(pos: number): number {
    let i = this.seq;
    while (i + 1 < this.starts.length && this.starts[i + 1]! <= pos) i++;
    return i;
  }

  /** The payload for one backend chunk and its encoded audio. */
  event(chunk: AudioChunk | null, audio: Uint8Array): TimestampEvent {
    if (chunk) {
      this.audioEndMs = Math.max(this.audioEndMs, chunk.offsetMs + chunk.durationMs);
      for (const w of chunk.alignment?.segments ?? []) {
        const found = this.text.indexOf(w.text, this.cursor);
        const pos = found >= 0 ? found : this.cursor;
        if (found >= 0) this.cursor = found + w.text.length;
        const k = this.chunkAt(pos);
        if (k !== this.seq) {
          // A new text chunk starts where the previous one's last word ended.
          const prevEnd = this.words.length ? this.chunkStartMs + this.words[this.words.length - 1]!.end * 1000 : this.chunkStartMs;
          this.seq = k;
          this.chunkStartMs = Math.min(prevEnd, w.startMs);
          this.words = [];
        }
        this.words.push({ text: w.text, start: sec(w.startMs - this.chunkStartMs), end: sec(w.endMs - this.chunkStartMs) });
      }
    }
    return {
      audio_base64: Buffer.from(audio.buffer, audio.byteOffset, audio.byteLength).toString('base64'),
      content: this.chunks[this.seq] ?? '',
      alignment: this.words.length ? { segments: this.words.slice(), audio_duration: sec(this.audioEndMs - this.chunkStartMs) } : null,
      chunk_seq: this.seq,
      chunk_audio_offset_sec: sec(this.chunkStartMs),
    };
  }
}
