/**
 * WAV (RIFF/WAVE, PCM) header writing and reading. Streamed WAV carries placeholder sizes
 * because the length is unknown when the header is sent (docs/api/speech.md): RIFF size
 * 4294967076 and data size 4294967040, the values other services use for the same purpose.
 */

export const WAV_HEADER_BYTES = 44;
export const STREAMING_RIFF_SIZE = 4294967076;
export const STREAMING_DATA_SIZE = 4294967040;

/**
 * A 44-byte header for mono 16-bit PCM. Without `dataBytes` the sizes are the streaming
 * placeholders; with it they are exact (RIFF size = 36 + data).
 */
export function wavHeader(sampleRateHz: number, dataBytes?: number): Uint8Array {
  const out = new Uint8Array(WAV_HEADER_BYTES);
  const v = new DataView(out.buffer);
  const ascii = (at: number, s: string) => {
    for (let k = 0; k < s.length; k++) out[at + k] = s.charCodeAt(k);
  };
  ascii(0, 'RIFF');
  v.setUint32(4, dataBytes === undefined ? STREAMING_RIFF_SIZE : 36 + dataBytes, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  v.setUint32(16, 16, true); // fmt chunk size
  v.setUint16(20, 1, true); // PCM
  v.setUint16(22, 1, true); // mono
  v.setUint32(24, sampleRateHz, true);
  v.setUint32(28, sampleRateHz * 2, true); // byte rate
  v.setUint16(32, 2, true); // block align
  v.setUint16(34, 16, true); // bits per sample
  ascii(36, 'data');
  v.setUint32(40, dataBytes === undefined ? STREAMING_DATA_SIZE : dataBytes, true);
  return out;
}

/** What `parseWav` found: an integer-PCM or float WAV's layout. */
export interface WavInfo {
  /** 1 = integer PCM, 3 = IEEE float (after resolving WAVE_FORMAT_EXTENSIBLE). */
  formatTag: number;
  channels: number;
  sampleRateHz: number;
  bitsPerSample: number;
  /** Offset of the sample data and its length, clamped to the bytes present (streamed files). */
  dataOffset: number;
  dataBytes: number;
}

/** Parses RIFF/WAVE chunks; null when the bytes are not a WAV this reader understands. */
export function parseWav(bytes: Uint8Array): WavInfo | null {
  if (bytes.length < 12) return null;
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const tag = (at: number) => String.fromCharCode(bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]);
  if (tag(0) !== 'RIFF' || tag(8) !== 'WAVE') return null;
  let at = 12;
  let fmt: Omit<WavInfo, 'dataOffset' | 'dataBytes'> | null = null;
  while (at + 8 <= bytes.length) {
    const id = tag(at);
    const size = v.getUint32(at + 4, true);
    const body = at + 8;
    if (id === 'fmt ' && body + 16 <= bytes.length) {
      let formatTag = v.getUint16(body, true);
      if (formatTag === 0xfffe && size >= 40 && body + 26 <= bytes.length) formatTag = v.getUint16(body + 24, true);
      fmt = {
        formatTag,
        channels: v.getUint16(body + 2, true),
        sampleRateHz: v.getUint32(body + 4, true),
        bitsPerSample: v.getUint16(body + 14, true),
      };
    } else if (id === 'data') {
      if (!fmt) return null;
      // Streaming writers put 0 or 0xFFFFFFFF (or a placeholder) here: read what is present.
      const present = bytes.length - body;
      return { ...fmt, dataOffset: body, dataBytes: size === 0 || size === 0xffffffff ? present : Math.min(size, present) };
    }
    at = body + size + (size & 1);
  }
  return null;
}
