/**
 * The synthetic speech engine's modem: text ↔ tones, exact and codec-robust.
 *
 * Encoding: each UTF-8 byte is one symbol of two simultaneous tones (high nibble from group
 * A, 400–1392 Hz; low nibble from group B, 1480–2472 Hz; 62 Hz steps in both groups),
 * 60 ms at speed 1.0 (round(60/speed) ms, 30–250 ms, so speed is effective from 0.24 to 2),
 * with raised-cosine fades of 5 ms. A burst is a 4-symbol preamble (40 ms symbols
 * alternating two control chords) for synchronisation, a 2-symbol header carrying the data
 * symbol length, the data, and a terminator chord. Peak amplitude 0.5 of full scale.
 */
import { Demodulator, type DemodEvent } from './demodulator.ts';
import { decodeFragment } from './fragment.ts';
import { type CharAt, type Timed, toTimed, wordsOf } from './types.ts';

export type { Timed } from './types.ts';
export { encodeText, type Encoded } from './encode.ts';
export { StreamDecoder, type StreamEvent } from './stream-decoder.ts';

export interface Decoded {
  text: string;
  durationMs: number;
  words: Timed[];
}

/**
 * Decodes all bursts in the audio (their texts concatenated; times from the audio's start).
 * Audio without a preamble, such as one word's region cut from a burst, is decoded from
 * its symbols alone. Returns null when the audio contains no synthetic speech.
 */
export function decodeAudio(pcm: Int16Array | Float32Array, sampleRateHz: number): Decoded | null {
  if (!Number.isInteger(sampleRateHz) || sampleRateHz < 8000) {
    throw new RangeError('sampleRateHz must be an integer of at least 8000');
  }
  const demod = new Demodulator(sampleRateHz);
  const events: DemodEvent[] = [];
  demod.feed(pcm, events);
  demod.finish(events);
  let chars: CharAt[] | null = [];
  for (const e of events) if (e.type === 'char') chars.push(e.char);
  if (!events.some((e) => e.type === 'burst_start')) {
    chars = decodeFragment(pcm instanceof Float32Array ? pcm : toFloat(pcm), sampleRateHz);
    if (!chars) return null;
  }
  const timed = toTimed(chars, sampleRateHz);
  return {
    text: chars.map((c) => c.text).join(''),
    durationMs: (pcm.length / sampleRateHz) * 1000,
    words: wordsOf(timed),
  };
}

function toFloat(pcm: Int16Array): Float32Array {
  const x = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) x[i] = pcm[i] / 32768;
  return x;
}
