/**
 * A minimal FLAC writer for tests (no FLAC encoder is installed): 16-bit PCM in VERBATIM
 * subframes, fixed 4096-sample blocks, STREAMINFO without MD5. Valid per the FLAC format
 * specification, just uncompressed.
 */

function crc8(b: Uint8Array): number {
  let c = 0;
  for (const x of b) {
    c ^= x;
    for (let k = 0; k < 8; k++) c = c & 0x80 ? ((c << 1) ^ 0x07) & 0xff : (c << 1) & 0xff;
  }
  return c;
}

function crc16(b: Uint8Array): number {
  let c = 0;
  for (const x of b) {
    c ^= x << 8;
    for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x8005) & 0xffff : (c << 1) & 0xffff;
  }
  return c;
}

function utf8Number(n: number): number[] {
  if (n < 0x80) return [n];
  if (n < 0x800) return [0xc0 | (n >> 6), 0x80 | (n & 0x3f)];
  return [0xe0 | (n >> 12), 0x80 | ((n >> 6) & 0x3f), 0x80 | (n & 0x3f)];
}

/** The frame header's rate code; 0 = "see STREAMINFO" (some decoders need it explicit). */
function rateCode(hz: number): number {
  const codes: Record<number, number> = { 8000: 4, 16000: 5, 22050: 6, 24000: 7, 32000: 8, 44100: 9, 48000: 10 };
  return codes[hz] ?? 0;
}

/** `channels` are equal-length s16 arrays. */
export function writeFlac(channels: Int16Array[], sampleRateHz: number): Uint8Array {
  const block = 4096;
  const total = channels[0].length;
  const parts: Uint8Array[] = [];
  parts.push(new TextEncoder().encode('fLaC'));
  const info = new Uint8Array(4 + 34);
  info[0] = 0x80; // last metadata block, type 0 STREAMINFO
  info[3] = 34;
  const v = new DataView(info.buffer);
  v.setUint16(4, block);
  v.setUint16(6, block);
  const packed = (BigInt(sampleRateHz) << 44n) | (BigInt(channels.length - 1) << 41n) | (15n << 36n) | BigInt(total);
  v.setBigUint64(14, packed);
  parts.push(info);
  for (let start = 0, index = 0; start < total; start += block, index++) {
    const n = Math.min(block, total - start);
    const header = [0xff, 0xf8, 0x70 | rateCode(sampleRateHz), ((channels.length - 1) << 4) | 0x08, ...utf8Number(index), (n - 1) >> 8, (n - 1) & 0xff];
    const h = Uint8Array.from(header);
    const frame = new Uint8Array(h.length + 1 + channels.length * (1 + 2 * n) + 2);
    frame.set(h);
    frame[h.length] = crc8(h);
    const fv = new DataView(frame.buffer);
    let at = h.length + 1;
    for (const ch of channels) {
      frame[at++] = 0x02; // VERBATIM
      for (let i = 0; i < n; i++, at += 2) fv.setInt16(at, ch[start + i]);
    }
    fv.setUint16(at, crc16(frame.subarray(0, at)));
    parts.push(frame);
  }
  let len = 0;
  for (const p of parts) len += p.length;
  const out = new Uint8Array(len);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
