import { Encoder as OpusEncoder } from '@evan/opus';
import { OggWriter, OGG_FLAG_BOS, OGG_FLAG_EOS } from './ogg.ts';
import { OPUS_BITRATE_AUTO } from './formats.ts';

/**
 * Ogg Opus (RFC 7845) from 48 kHz mono PCM: libopus (`@evan/opus`, native binary with a
 * WASM fallback) encodes 20 ms packets; this file frames them. Page 0 holds OpusHead
 * (BOS), page 1 OpusTags, then audio. A page's granule position counts the 48 kHz samples
 * decoded through its last packet, pre-skip included; the last page (EOS) carries
 * pre-skip + input length, so players trim the padding of the final frame exactly.
 *
 * Paging: `push` emits the packets it completed as one page (split at 255 lacing values
 * or MAX_PACKETS_PER_PAGE), so latency is the caller's chunking plus < 20 ms of framing.
 * The packet sequence does not depend on how the input is chunked; page boundaries do.
 */

export const OPUS_RATE_HZ = 48000;
export const OPUS_FRAME_SAMPLES = 960; // 20 ms at 48 kHz
const MAX_PACKETS_PER_PAGE = 50; // one second
const OPUS_GET_LOOKAHEAD = 4027;
const VENDOR = 'parley';

export interface OggOpusOptions {
  /** The rate of the audio before resampling; informational, written into OpusHead. */
  inputSampleRateHz: number;
  /** bit/s; -1000 (OPUS_AUTO) lets libopus choose. */
  bitrate?: number;
  /** Ogg stream serial; random when omitted. */
  serial?: number;
}

export class OggOpusStream {
  private readonly enc: OpusEncoder;
  private readonly ogg: OggWriter;
  private readonly preSkip: number;
  private readonly frame = new Int16Array(OPUS_FRAME_SAMPLES);
  private fill = 0;
  private inputSamples = 0;
  private encodedSamples = 0;
  private headersSent = false;

  constructor(private readonly opts: OggOpusOptions) {
    this.enc = new OpusEncoder({ channels: 1, sample_rate: OPUS_RATE_HZ, application: 'audio' });
    const bitrate = opts.bitrate ?? OPUS_BITRATE_AUTO;
    this.enc.bitrate = bitrate === OPUS_BITRATE_AUTO ? 'auto' : bitrate;
    this.preSkip = this.enc.ctl(OPUS_GET_LOOKAHEAD);
    this.ogg = new OggWriter(opts.serial ?? (Math.random() * 0x100000000) >>> 0);
  }

  /** 48 kHz samples in; pages out (the two header pages come first). */
  push(pcm: Int16Array): Uint8Array[] {
    const out = this.headers();
    const packets: Uint8Array[] = [];
    this.inputSamples += pcm.length;
    let i = 0;
    while (i < pcm.length) {
      const take = Math.min(OPUS_FRAME_SAMPLES - this.fill, pcm.length - i);
      this.frame.set(pcm.subarray(i, i + take), this.fill);
      this.fill += take;
      i += take;
      if (this.fill === OPUS_FRAME_SAMPLES) {
        packets.push(this.encodeFrame());
        this.fill = 0;
      }
    }
    this.pages(packets, false, out);
    return out;
  }

  /** Pads and encodes the remainder, covers the encoder look-ahead, and closes the stream. */
  end(): Uint8Array[] {
    const out = this.headers();
    const packets: Uint8Array[] = [];
    if (this.fill > 0) {
      this.frame.fill(0, this.fill);
      packets.push(this.encodeFrame());
      this.fill = 0;
    }
    while (this.encodedSamples < this.preSkip + this.inputSamples || packets.length === 0) {
      this.frame.fill(0);
      packets.push(this.encodeFrame());
    }
    this.pages(packets, true, out);
    return out;
  }

  private encodeFrame(): Uint8Array {
    this.encodedSamples += OPUS_FRAME_SAMPLES;
    return this.enc.encode(this.frame);
  }

  private headers(): Uint8Array[] {
    if (this.headersSent) return [];
    this.headersSent = true;
    const head = new Uint8Array(19);
    const hv = new DataView(head.buffer);
    head.set(new TextEncoder().encode('OpusHead'), 0);
    head[8] = 1; // version
    head[9] = 1; // channels
    hv.setUint16(10, this.preSkip, true);
    hv.setUint32(12, this.opts.inputSampleRateHz, true);
    hv.setInt16(16, 0, true); // output gain
    head[18] = 0; // mapping family 0: mono/stereo
    const vendor = new TextEncoder().encode(VENDOR);
    const tags = new Uint8Array(8 + 4 + vendor.length + 4);
    const tv = new DataView(tags.buffer);
    tags.set(new TextEncoder().encode('OpusTags'), 0);
    tv.setUint32(8, vendor.length, true);
    tags.set(vendor, 12);
    tv.setUint32(12 + vendor.length, 0, true); // no user comments
    return [this.ogg.page([head], 0n, OGG_FLAG_BOS), this.ogg.page([tags], 0n, 0)];
  }

  private pages(packets: Uint8Array[], last: boolean, out: Uint8Array[]): void {
    // Granule after packet k of this batch: encoded total minus the packets still after it.
    let before = this.encodedSamples - packets.length * OPUS_FRAME_SAMPLES;
    let start = 0;
    while (start < packets.length) {
      let end = start;
      let segments = 0;
      while (end < packets.length && end - start < MAX_PACKETS_PER_PAGE) {
        const s = Math.floor(packets[end].length / 255) + 1;
        if (segments + s > 255) break;
        segments += s;
        end++;
      }
      before += (end - start) * OPUS_FRAME_SAMPLES;
      const final = last && end === packets.length;
      const granule = final ? this.preSkip + this.inputSamples : before;
      out.push(this.ogg.page(packets.slice(start, end), BigInt(granule), final ? OGG_FLAG_EOS : 0));
      start = end;
    }
  }
}
