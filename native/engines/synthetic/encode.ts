import {
  BASE_SYMBOL_MS,
  CONTROL,
  MAX_SYMBOL_MS,
  MIN_SYMBOL_MS,
  PREAMBLE,
  SYNC_SYMBOL_MS,
  SYNC_SYMBOLS,
  TONES_A,
  TONES_B,
  TONE_AMPLITUDE,
  fadeMs,
} from './tones.ts';
import { type CharAt, type Timed, toTimed, wordsOf } from './types.ts';

export interface Encoded {
  pcm: Int16Array;
  sampleRateHz: number;
  durationMs: number;
  words: Timed[];
  chars: Timed[];
}

const utf8 = new TextEncoder();

/** Data symbol length in whole milliseconds for a speed (the header carries it to the decoder). */
export function symbolMsFor(speed: number): number {
  if (!Number.isFinite(speed) || speed <= 0) throw new RangeError('speed must be a positive number');
  return Math.min(MAX_SYMBOL_MS, Math.max(MIN_SYMBOL_MS, Math.round(BASE_SYMBOL_MS / speed)));
}

/**
 * Encodes text as one self-contained burst: preamble, header, one symbol per UTF-8 byte,
 * terminator. No silence before or after; bursts may be concatenated directly.
 */
export function encodeText(text: string, opts: { sampleRateHz?: number; speed?: number } = {}): Encoded {
  const sampleRateHz = opts.sampleRateHz ?? 24000;
  if (!Number.isInteger(sampleRateHz) || sampleRateHz < 8000 || sampleRateHz > 192000) {
    throw new RangeError('sampleRateHz must be an integer from 8000 to 192000');
  }
  const symbolMs = symbolMsFor(opts.speed ?? 1);
  const sync = (SYNC_SYMBOL_MS * sampleRateHz) / 1000;
  const step = (symbolMs * sampleRateHz) / 1000;
  const bytes = utf8.encode(text);
  const dataStart = Math.round(SYNC_SYMBOLS * sync);
  const dataAt = (k: number) => dataStart + Math.round(k * step);
  const total = dataAt(bytes.length + 1);
  const pcm = new Int16Array(total);

  const header = [symbolMs, 255 - symbolMs];
  for (let i = 0; i < SYNC_SYMBOLS; i++) {
    const [a, b] = i < PREAMBLE.length ? PREAMBLE[i] : [header[i - PREAMBLE.length] >> 4, header[i - PREAMBLE.length] & 15];
    writeSymbol(pcm, Math.round(i * sync), Math.round((i + 1) * sync), a, b, sampleRateHz, fadeMs(SYNC_SYMBOL_MS));
  }
  const fade = fadeMs(symbolMs);
  for (let k = 0; k < bytes.length; k++) {
    writeSymbol(pcm, dataAt(k), dataAt(k + 1), bytes[k] >> 4, bytes[k] & 15, sampleRateHz, fade);
  }
  writeSymbol(pcm, dataAt(bytes.length), total, CONTROL, CONTROL, sampleRateHz, fade);

  const chars: CharAt[] = [];
  let byte = 0;
  for (const ch of text) {
    const n = utf8.encode(ch).length;
    chars.push({ text: ch, start: dataAt(byte), end: dataAt(byte + n) });
    byte += n;
  }
  const timedChars = toTimed(chars, sampleRateHz);
  return {
    pcm,
    sampleRateHz,
    durationMs: (total / sampleRateHz) * 1000,
    words: wordsOf(timedChars),
    chars: timedChars,
  };
}

function writeSymbol(
  pcm: Int16Array,
  start: number,
  end: number,
  a: number,
  b: number,
  sampleRateHz: number,
  fadeMsValue: number,
): void {
  const len = end - start;
  const fadeLen = Math.max(1, Math.round((fadeMsValue * sampleRateHz) / 1000));
  const wa = (2 * Math.PI * TONES_A[a]) / sampleRateHz;
  const wb = (2 * Math.PI * TONES_B[b]) / sampleRateHz;
  const scale = TONE_AMPLITUDE * 32767;
  for (let n = 0; n < len; n++) {
    const edge = Math.min(n, len - 1 - n);
    const env = edge >= fadeLen ? 1 : 0.5 - 0.5 * Math.cos((Math.PI * (edge + 0.5)) / fadeLen);
    pcm[start + n] = Math.round(scale * env * (Math.sin(wa * n) + Math.sin(wb * n)));
  }
}
