import decode from 'audio-decode';
import { ServiceError } from '../errors.ts';
import { float32ToInt16 } from './pcm.ts';
import { parseWav } from './wav.ts';

/** Container/codec families recognised from their leading bytes. */
export type SniffedFormat = 'wav' | 'mp3' | 'ogg-opus' | 'ogg-vorbis' | 'ogg-flac' | 'ogg' | 'flac' | 'aac' | 'm4a' | 'webm' | 'aiff' | 'caf';

const ascii = (b: Uint8Array, at: number, s: string) => {
  if (b.length < at + s.length) return false;
  for (let k = 0; k < s.length; k++) if (b[at + k] !== s.charCodeAt(k)) return false;
  return true;
};

/** An MPEG audio frame header (sync, layer III, a legal bitrate and rate index) at `at`. */
function mpegFrameAt(b: Uint8Array, at: number): boolean {
  if (b.length < at + 4 || b[at] !== 0xff || (b[at + 1] & 0xe0) !== 0xe0) return false;
  const version = (b[at + 1] >> 3) & 3; // 1 is reserved
  const layer = (b[at + 1] >> 1) & 3; // 1 = layer III
  const bitrate = b[at + 2] >> 4;
  const rate = (b[at + 2] >> 2) & 3;
  return version !== 1 && layer === 1 && bitrate !== 0 && bitrate !== 15 && rate !== 3;
}

/**
 * Identifies audio from its bytes alone (a declared Content-Type is never trusted).
 * Returns null for anything unrecognised.
 */
export function sniffFormat(bytes: Uint8Array): SniffedFormat | null {
  if (ascii(bytes, 0, 'RIFF') && ascii(bytes, 8, 'WAVE')) return 'wav';
  if (ascii(bytes, 0, 'OggS')) {
    const segments = bytes[26] ?? 0;
    const body = 27 + segments;
    if (ascii(bytes, body, 'OpusHead')) return 'ogg-opus';
    if (ascii(bytes, body, '\x01vorbis')) return 'ogg-vorbis';
    if (ascii(bytes, body, '\x7fFLAC')) return 'ogg-flac';
    return 'ogg';
  }
  if (ascii(bytes, 0, 'fLaC')) return 'flac';
  if (ascii(bytes, 0, 'ID3')) {
    // An ID3v2 tag may precede MP3, AAC or FLAC; look past it.
    const size = ((bytes[6] & 0x7f) << 21) | ((bytes[7] & 0x7f) << 14) | ((bytes[8] & 0x7f) << 7) | (bytes[9] & 0x7f);
    const rest = bytes.subarray(10 + size + (bytes[5] & 0x10 ? 10 : 0));
    const inner = rest.length >= 4 ? sniffFormat(rest) : null;
    return inner ?? 'mp3';
  }
  if (ascii(bytes, 4, 'ftyp')) return 'm4a';
  if (bytes.length >= 4 && bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3) return 'webm';
  if (ascii(bytes, 0, 'FORM') && (ascii(bytes, 8, 'AIFF') || ascii(bytes, 8, 'AIFC'))) return 'aiff';
  if (ascii(bytes, 0, 'caff')) return 'caf';
  if (mpegFrameAt(bytes, 0)) return 'mp3';
  // ADTS AAC: sync 0xFFF, layer 00.
  if (bytes.length >= 7 && bytes[0] === 0xff && (bytes[1] & 0xf6) === 0xf0) return 'aac';
  return null;
}

export interface DecodedAudio {
  /** Mono s16 samples (channels averaged). */
  pcm: Int16Array;
  sampleRateHz: number;
  durationMs: number;
}

const undecodable = (cause?: unknown) =>
  new ServiceError('bad_request', 'Audio could not be decoded: unsupported or corrupt file. Send WAV, MP3, Ogg Opus/Vorbis, FLAC, AAC/M4A or WebM', { cause });

/**
 * Decodes uploaded audio of any common format to mono s16 PCM at its own rate. The format
 * comes from the bytes; unrecognised, corrupt or empty audio → `ServiceError('bad_request')`.
 * Integer-PCM WAV (8/16/24/32-bit) and float WAV are read directly; everything else goes
 * through `audio-decode` (WASM decoders, loaded on first use).
 */
export async function decodeAudio(bytes: Uint8Array): Promise<DecodedAudio> {
  const kind = sniffFormat(bytes);
  if (!kind) throw undecodable();
  if (kind === 'wav') {
    const fast = decodeWavFast(bytes);
    if (fast) return fast;
  }
  let data: { channelData: Float32Array[]; sampleRate: number };
  try {
    data = await decode(bytes);
  } catch (err) {
    throw undecodable(err);
  }
  const channels = data.channelData;
  const length = channels[0]?.length ?? 0;
  if (!length || !(data.sampleRate > 0)) throw undecodable();
  let mono: Float32Array;
  if (channels.length === 1) {
    mono = channels[0];
  } else {
    mono = new Float32Array(length);
    for (const ch of channels) for (let i = 0; i < length; i++) mono[i] += ch[i];
    for (let i = 0; i < length; i++) mono[i] /= channels.length;
  }
  return result(float32ToInt16(mono), data.sampleRate);
}

function result(pcm: Int16Array, sampleRateHz: number): DecodedAudio {
  return { pcm, sampleRateHz, durationMs: (pcm.length * 1000) / sampleRateHz };
}

/** Direct WAV read; null to let audio-decode try a layout this does not handle. */
function decodeWavFast(bytes: Uint8Array): DecodedAudio | null {
  const info = parseWav(bytes);
  if (!info || info.channels < 1 || info.sampleRateHz < 1) return null;
  const { formatTag, channels, bitsPerSample: bits } = info;
  const width = bits / 8;
  const isInt = formatTag === 1 && (bits === 8 || bits === 16 || bits === 24 || bits === 32);
  const isFloat = formatTag === 3 && bits === 32;
  if (!isInt && !isFloat) return null;
  const frameBytes = width * channels;
  const n = Math.floor(info.dataBytes / frameBytes);
  if (n === 0) throw undecodable();
  const v = new DataView(bytes.buffer, bytes.byteOffset + info.dataOffset, n * frameBytes);
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) {
      const at = (i * channels + c) * width;
      let s: number; // scaled to the s16 range
      if (isFloat) s = v.getFloat32(at, true) * 32768;
      else if (bits === 16) s = v.getInt16(at, true);
      else if (bits === 8) s = (v.getUint8(at) - 128) * 256;
      else if (bits === 24) s = ((v.getUint8(at) | (v.getUint8(at + 1) << 8) | (v.getInt8(at + 2) << 16)) / 256);
      else s = v.getInt32(at, true) / 65536;
      sum += s;
    }
    const m = Math.round(sum / channels);
    out[i] = m > 32767 ? 32767 : m < -32768 ? -32768 : m;
  }
  return result(out, info.sampleRateHz);
}
