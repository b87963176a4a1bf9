/**
 * Ogg page framing (RFC 3533) for one logical stream. A page: "OggS", version 0, header
 * type flags (1 continued, 2 first page, 4 last page), 64-bit granule position, stream
 * serial, page sequence number, CRC-32 (polynomial 0x04C11DB7, initial 0, not reflected,
 * computed over the whole page with the CRC field zero), segment count and the lacing
 * table (each packet is a run of 255-byte segments ended by one shorter than 255).
 */

export const OGG_FLAG_BOS = 2;
export const OGG_FLAG_EOS = 4;

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let r = i << 24;
    for (let k = 0; k < 8; k++) r = r & 0x80000000 ? (r << 1) ^ 0x04c11db7 : r << 1;
    t[i] = r >>> 0;
  }
  return t;
})();

/** The Ogg CRC-32 of `bytes`. */
export function oggCrc(bytes: Uint8Array): number {
  let crc = 0;
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) ^ CRC_TABLE[((crc >>> 24) ^ bytes[i]) & 0xff]) >>> 0;
  return crc;
}

/** Writes pages of one logical stream; keeps the page sequence number. */
export class OggWriter {
  private sequence = 0;
  constructor(private readonly serial: number) {}

  /**
   * One page holding whole packets (at most 255 lacing values, i.e. under ~64 KB, which
   * callers keep by construction). `granule` is the stream position after the last packet
   * that ends on this page.
   */
  page(packets: readonly Uint8Array[], granule: bigint, flags: number): Uint8Array {
    let segments = 0;
    let bodyBytes = 0;
    for (const p of packets) {
      segments += Math.floor(p.length / 255) + 1;
      bodyBytes += p.length;
    }
    if (segments > 255) throw new RangeError('Ogg page would exceed 255 segments');
    const out = new Uint8Array(27 + segments + bodyBytes);
    const v = new DataView(out.buffer);
    out.set([0x4f, 0x67, 0x67, 0x53], 0); // OggS
    out[4] = 0;
    out[5] = flags;
    v.setBigUint64(6, granule, true);
    v.setUint32(14, this.serial, true);
    v.setUint32(18, this.sequence++, true);
    out[26] = segments;
    let lace = 27;
    let body = 27 + segments;
    for (const p of packets) {
      let left = p.length;
      while (left >= 255) {
        out[lace++] = 255;
        left -= 255;
      }
      out[lace++] = left;
      out.set(p, body);
      body += p.length;
    }
    v.setUint32(22, oggCrc(out), true);
    return out;
  }
}

/** One parsed page (for tests and diagnostics). */
export interface OggPage {
  flags: number;
  granule: bigint;
  serial: number;
  sequence: number;
  crcValid: boolean;
  /** Packets that end on this page (a packet continued from the previous page is joined). */
  packets: Uint8Array[];
}

/** Parses a whole Ogg stream into pages; throws on broken framing. */
export function parseOggPages(bytes: Uint8Array): OggPage[] {
  const pages: OggPage[] = [];
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  let partial: Uint8Array[] = [];
  while (at < bytes.length) {
    if (at + 27 > bytes.length || bytes[at] !== 0x4f || bytes[at + 1] !== 0x67 || bytes[at + 2] !== 0x67 || bytes[at + 3] !== 0x53) {
      throw new Error(`no Ogg page at byte ${at}`);
    }
    const segments = bytes[at + 26];
    const lacing = bytes.subarray(at + 27, at + 27 + segments);
    let bodyLen = 0;
    for (const l of lacing) bodyLen += l;
    const end = at + 27 + segments + bodyLen;
    if (end > bytes.length) throw new Error('truncated Ogg page');
    const page = bytes.slice(at, end);
    const stored = v.getUint32(at + 22, true);
    page.fill(0, 22, 26);
    const packets: Uint8Array[] = [];
    let body = at + 27 + segments;
    let start = body;
    for (const l of lacing) {
      body += l;
      if (l < 255) {
        partial.push(bytes.subarray(start, body));
        packets.push(concatBytes(partial));
        partial = [];
        start = body;
      }
    }
    if (start < body) partial.push(bytes.subarray(start, body));
    pages.push({
      flags: bytes[at + 5],
      granule: v.getBigUint64(at + 6, true),
      serial: v.getUint32(at + 14, true),
      sequence: v.getUint32(at + 18, true),
      crcValid: oggCrc(page) === stored,
      packets,
    });
    at = end;
  }
  return pages;
}

function concatBytes(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0].slice();
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}
