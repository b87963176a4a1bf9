import { Demodulator, type DemodEvent } from './demodulator.ts';
import { SYNC_SYMBOL_MS } from './tones.ts';
import { type CharAt, type Timed, toTimed, wordsOf } from './types.ts';

export type StreamEvent =
  | { type: 'speech_started'; atMs: number }
  | { type: 'partial'; text: string }
  | { type: 'committed'; text: string; words: Timed[] }
  | { type: 'speech_ended'; atMs: number };

/** Silence after a burst that ends the utterance; a burst starting sooner continues it. */
const UTTERANCE_GAP_MS = 300;
/** How long after its start a preamble is certainly found (18 hops plus margin). */
const DETECTION_LATENCY_MS = SYNC_SYMBOL_MS * 5 + 20;

/**
 * Decodes synthetic speech from PCM pushed in pieces of any size, in real time.
 *
 * Events, per utterance: `speech_started` (at the first burst's preamble), `partial` after
 * each decoded character (the utterance's whole text so far), `committed` when each burst
 * ends (that burst's text and words: the committed texts of an utterance concatenate to its
 * text), and `speech_ended` once 300 ms pass after the last burst with no new one. Times
 * are in ms from the first sample pushed; `speech_ended.atMs` is where the last burst ended.
 */
export class StreamDecoder {
  private readonly demod: Demodulator;
  private readonly gap: number;
  private readonly latency: number;
  private inUtterance = false;
  private utteranceText = '';
  private lastEnd = 0;
  private burstText = '';
  private burstChars: CharAt[] = [];

  constructor(private readonly sampleRateHz: number) {
    if (!Number.isInteger(sampleRateHz) || sampleRateHz < 8000) {
      throw new RangeError('sampleRateHz must be an integer of at least 8000');
    }
    this.demod = new Demodulator(sampleRateHz);
    this.gap = (UTTERANCE_GAP_MS * sampleRateHz) / 1000;
    this.latency = (DETECTION_LATENCY_MS * sampleRateHz) / 1000;
  }

  push(pcm: Int16Array): StreamEvent[] {
    const raw: DemodEvent[] = [];
    this.demod.feed(pcm, raw);
    const events = this.translate(raw);
    this.checkEnded(events);
    return events;
  }

  /** End of input: commits an unfinished burst and ends the utterance. */
  flush(): StreamEvent[] {
    const raw: DemodEvent[] = [];
    this.demod.finish(raw);
    const events = this.translate(raw);
    if (this.inUtterance) this.end(events);
    return events;
  }

  private translate(raw: DemodEvent[]): StreamEvent[] {
    const events: StreamEvent[] = [];
    for (const e of raw) {
      if (e.type === 'burst_start') {
        if (this.inUtterance && e.pos - this.lastEnd >= this.gap) this.end(events);
        if (!this.inUtterance) {
          this.inUtterance = true;
          this.utteranceText = '';
          events.push({ type: 'speech_started', atMs: this.ms(e.pos) });
        }
        this.burstText = '';
        this.burstChars = [];
      } else if (e.type === 'char') {
        this.burstText += e.char.text;
        this.burstChars.push(e.char);
        events.push({ type: 'partial', text: this.utteranceText + this.burstText });
      } else {
        const words = wordsOf(toTimed(this.burstChars, this.sampleRateHz));
        events.push({ type: 'committed', text: this.burstText, words });
        this.utteranceText += this.burstText;
        this.burstText = '';
        this.burstChars = [];
        this.lastEnd = e.pos;
      }
    }
    return events;
  }

  private checkEnded(events: StreamEvent[]): void {
    if (!this.inUtterance || !this.demod.idle) return;
    const now = this.demod.scannedTo;
    if (now < this.lastEnd + this.gap) return;
    // A preamble may have begun inside the gap and not be recognised yet: wait for it
    // unless nothing preamble-like has been heard since the burst ended.
    if (this.demod.lastActivePos > this.lastEnd && now < this.lastEnd + this.gap + this.latency) return;
    this.end(events);
  }

  private end(events: StreamEvent[]): void {
    events.push({ type: 'speech_ended', atMs: this.ms(this.lastEnd) });
    this.inUtterance = false;
    this.utteranceText = '';
  }

  private ms(pos: number): number {
    return (pos / this.sampleRateHz) * 1000;
  }
}
