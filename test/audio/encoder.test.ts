import t from 'tap';
import decode from 'audio-decode';
import { Decoder as OpusDecoder } from '@evan/opus';
import {
  createEncoder,
  parseOggPages,
  parseWav,
  STREAMING_DATA_SIZE,
  STREAMING_RIFF_SIZE,
  type EncoderOptions,
} from '../../src/audio/index.ts';
import { concat, dominantHz, sine } from './signal.ts';

async function encodeAll(opts: EncoderOptions, pcm: Int16Array, pieces: number[] = [pcm.length]) {
  const enc = await createEncoder(opts);
  const out: Uint8Array[] = [];
  let at = 0;
  for (const n of pieces) {
    out.push(...enc.push(pcm.subarray(at, at + n)));
    at += n;
  }
  out.push(...enc.end());
  return { enc, bytes: concat(out) };
}

/** Odd piece sizes that cover `length`. */
function oddPieces(length: number): number[] {
  const out: number[] = [];
  for (let left = length, k = 0; left > 0; k++) {
    const n = Math.min(left, [1, 333, 7, 4095, 960, 17][k % 6]);
    out.push(n);
    left -= n;
  }
  return out;
}

async function decodeMono(bytes: Uint8Array) {
  const d = await decode(bytes);
  return { x: d.channelData[0], sampleRateHz: d.sampleRate };
}

const ascii = (b: Uint8Array, from: number, to: number) => Buffer.from(b.subarray(from, to)).toString('latin1');

t.test('wav: streaming header, then samples; decodes back', async (t) => {
  const pcm = sine(1000, 16000, 1000);
  const { enc, bytes } = await encodeAll({ format: 'wav', sampleRateHz: 16000, inputSampleRateHz: 16000 }, pcm);
  t.equal(enc.contentType, 'audio/wav');
  t.equal(ascii(bytes, 0, 4), 'RIFF');
  t.equal(ascii(bytes, 8, 16), 'WAVEfmt ');
  t.equal(ascii(bytes, 36, 40), 'data');
  const v = new DataView(bytes.buffer, bytes.byteOffset);
  t.equal(v.getUint32(4, true), STREAMING_RIFF_SIZE);
  t.equal(v.getUint32(4, true), 4294967076);
  t.equal(v.getUint32(40, true), STREAMING_DATA_SIZE);
  t.equal(v.getUint32(40, true), 4294967040);
  t.equal(v.getUint32(16, true), 16, 'fmt size');
  t.equal(v.getUint16(20, true), 1, 'PCM');
  t.equal(v.getUint16(22, true), 1, 'mono');
  t.equal(v.getUint32(24, true), 16000, 'rate');
  t.equal(v.getUint32(28, true), 32000, 'byte rate');
  t.equal(v.getUint16(32, true), 2, 'block align');
  t.equal(v.getUint16(34, true), 16, 'bits');
  t.equal(bytes.length, 44 + pcm.length * 2);
  t.same(parseWav(bytes)?.dataOffset, 44);
  const d = await decodeMono(bytes);
  t.equal(d.sampleRateHz, 16000);
  t.equal(d.x.length, pcm.length);
  t.equal(dominantHz(d.x, 16000), 1000);
});

t.test('wav with nothing pushed is just the header', async (t) => {
  const enc = await createEncoder({ format: 'wav', sampleRateHz: 8000, inputSampleRateHz: 8000 });
  t.equal(concat(enc.end()).length, 44);
});

t.test('pcm: raw s16le, resampled when asked', async (t) => {
  const pcm = sine(1000, 24000, 500);
  const { enc, bytes } = await encodeAll({ format: 'pcm', sampleRateHz: 8000, inputSampleRateHz: 24000 }, pcm);
  t.equal(enc.contentType, 'audio/pcm;rate=8000');
  t.equal(bytes.length, 4000 * 2);
  const y = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2);
  t.equal(dominantHz(y, 8000), 1000);
});

t.test('the caller may reuse its input buffer after push', async (t) => {
  const enc = await createEncoder({ format: 'pcm', sampleRateHz: 16000, inputSampleRateHz: 16000 });
  const buf = Int16Array.from([1, 2, 3]);
  const [chunk] = enc.push(buf);
  buf.fill(9);
  t.same(Array.from(chunk), [1, 0, 2, 0, 3, 0]);
});

for (const [rate, inRate, sync] of [
  [44100, 44100, 'fffb'],
  [32000, 32000, 'fffb'],
  [44100, 24000, 'fffb'],
  [24000, 24000, 'fff3'],
  [16000, 16000, 'fff3'],
  [8000, 16000, 'ffe3'],
] as const) {
  t.test(`mp3 ${rate} Hz from ${inRate} Hz: frame sync, duration, frequency`, async (t) => {
    const pcm = sine(1000, inRate, 1000);
    const { enc, bytes } = await encodeAll({ format: 'mp3', sampleRateHz: rate, inputSampleRateHz: inRate, mp3BitrateKbps: 64 }, pcm);
    t.equal(enc.contentType, 'audio/mpeg');
    t.equal(Buffer.from(bytes.subarray(0, 2)).toString('hex'), sync, 'MPEG frame sync (no ID3 tag is written)');
    const d = await decodeMono(bytes);
    t.equal(d.sampleRateHz, rate);
    // MP3 has no length field in a stream: a decoder outputs LAME's fixed delay (576 + 529
    // samples) and pads to a whole frame (1152 samples, 576 below 32 kHz).
    const frame = rate >= 32000 ? 1152 : 576;
    const extra = d.x.length - rate;
    t.ok(extra >= 0 && extra <= 1105 + frame, `decoded ${d.x.length} samples for ${rate}`);
    t.equal(dominantHz(d.x, rate), 1000);
  });
}

t.test('mp3 bitrate tiers give the expected sizes', async (t) => {
  const pcm = sine(1000, 44100, 2000);
  for (const kbps of [64, 128, 192]) {
    const { bytes } = await encodeAll({ format: 'mp3', sampleRateHz: 44100, inputSampleRateHz: 44100, mp3BitrateKbps: kbps }, pcm);
    const measured = (bytes.length * 8) / 2 / 1000;
    t.ok(measured > kbps * 0.98 && measured < kbps * 1.1, `${kbps} kbit/s measured ${measured.toFixed(1)}`);
  }
});

t.test('mp3: odd-size pushes give the same bytes as one push', async (t) => {
  const pcm = sine(1000, 44100, 700);
  const opts = { format: 'mp3', sampleRateHz: 44100, inputSampleRateHz: 22050 } as const;
  const src = sine(1000, 22050, 700);
  const a = await encodeAll(opts, src);
  const b = await encodeAll(opts, src, oddPieces(src.length));
  t.ok(a.bytes.length > 0);
  t.same(Buffer.from(b.bytes).equals(Buffer.from(a.bytes)), true);
  const c = await encodeAll({ ...opts, inputSampleRateHz: 44100 }, pcm, oddPieces(pcm.length));
  const d = await encodeAll({ ...opts, inputSampleRateHz: 44100 }, pcm);
  t.same(Buffer.from(c.bytes).equals(Buffer.from(d.bytes)), true);
});

t.test('wav and pcm: odd-size pushes give the same bytes', async (t) => {
  const src = sine(1000, 24000, 300);
  for (const format of ['wav', 'pcm'] as const) {
    const a = await encodeAll({ format, sampleRateHz: 44100, inputSampleRateHz: 24000 }, src);
    const b = await encodeAll({ format, sampleRateHz: 44100, inputSampleRateHz: 24000 }, src, oddPieces(src.length));
    t.ok(Buffer.from(a.bytes).equals(Buffer.from(b.bytes)), format);
  }
});

t.test('opus: Ogg pages with OpusHead/OpusTags, valid CRCs, increasing granules', async (t) => {
  const pcm = sine(1000, 24000, 1000);
  const { enc, bytes } = await encodeAll({ format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 24000 }, pcm, oddPieces(pcm.length));
  t.equal(enc.contentType, 'audio/ogg;codecs=opus');
  t.equal(ascii(bytes, 0, 4), 'OggS');
  t.equal(ascii(bytes, 28, 36), 'OpusHead');
  const pages = parseOggPages(bytes);
  t.ok(pages.every((p) => p.crcValid), 'every CRC valid');
  t.same(pages.map((p) => p.sequence), pages.map((_, i) => i), 'sequence numbers');
  t.ok(pages.every((p) => p.serial === pages[0].serial), 'one serial');
  t.equal(pages[0].flags, 2, 'first page BOS');
  t.equal(pages.at(-1)!.flags, 4, 'last page EOS');
  const head = pages[0].packets[0];
  t.equal(head.length, 19);
  t.equal(head[8], 1, 'version');
  t.equal(head[9], 1, 'channels');
  const hv = new DataView(head.buffer, head.byteOffset);
  const preSkip = hv.getUint16(10, true);
  t.ok(preSkip > 0 && preSkip < 960 * 2, `pre-skip ${preSkip}`);
  t.equal(hv.getUint32(12, true), 24000, 'input rate');
  t.equal(ascii(pages[1].packets[0], 0, 8), 'OpusTags');
  t.equal(pages[1].granule, 0n);
  const audio = pages.slice(2);
  for (let i = 1; i < audio.length; i++) t.ok(audio[i].granule > audio[i - 1].granule, `granule ${i} increases`);
  // Every page's granule = 960 × packets so far, except the last: pre-skip + input length.
  let packets = 0;
  for (const p of audio.slice(0, -1)) {
    packets += p.packets.length;
    t.equal(p.granule, BigInt(packets * 960));
  }
  t.equal(audio.at(-1)!.granule, BigInt(preSkip + 48000), 'final granule trims to the input length');
  const d = await decodeMono(bytes);
  t.equal(d.sampleRateHz, 48000);
  t.ok(Math.abs(d.x.length - 48000) <= 960, `decoded ${d.x.length} samples (±1 frame)`);
  t.equal(dominantHz(d.x, 48000), 1000);
});

t.test('opus: the packets do not depend on chunking', async (t) => {
  const pcm = sine(1000, 48000, 800);
  const opts = { format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 48000, oggSerial: 7 } as const;
  const a = parseOggPages((await encodeAll(opts, pcm)).bytes);
  const b = parseOggPages((await encodeAll(opts, pcm, oddPieces(pcm.length))).bytes);
  const packets = (pages: typeof a) => pages.flatMap((p) => p.packets.map((x) => Buffer.from(x).toString('hex')));
  t.same(packets(b), packets(a));
  t.equal(b.at(-1)!.granule, a.at(-1)!.granule);
});

t.test('opus: packets decode with libopus; explicit bitrate is honoured', async (t) => {
  const pcm = sine(1000, 48000, 2000);
  const lo = await encodeAll({ format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 48000, opusBitrate: 24000 }, pcm);
  const hi = await encodeAll({ format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 48000, opusBitrate: 64000 }, pcm);
  t.ok(hi.bytes.length > lo.bytes.length * 1.8, `64k ${hi.bytes.length} B vs 24k ${lo.bytes.length} B`);
  const dec = new OpusDecoder({ channels: 1, sample_rate: 48000 });
  let samples = 0;
  for (const p of parseOggPages(lo.bytes).slice(2)) for (const pkt of p.packets) samples += dec.decode(pkt).length / 2;
  t.ok(samples >= 96000, 'all audio decodes');
});

t.test('opus: empty stream is still a valid Ogg Opus file', async (t) => {
  const enc = await createEncoder({ format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 48000 });
  const pages = parseOggPages(concat(enc.end()));
  t.equal(pages.length, 3);
  t.equal(pages[2].flags, 4);
});

t.test('encoder refuses what it cannot produce', async (t) => {
  await t.rejects(createEncoder({ format: 'opus', sampleRateHz: 44100, inputSampleRateHz: 44100 }), { code: 'bad_request' });
  await t.rejects(createEncoder({ format: 'mp3', sampleRateHz: 22050, inputSampleRateHz: 44100 }), { code: 'bad_request' });
  await t.rejects(createEncoder({ format: 'wav', sampleRateHz: 44100, inputSampleRateHz: 0 }), { code: 'bad_request' });
  await t.rejects(createEncoder({ format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 48000, opusBitrate: 12 }), { code: 'bad_request' });
});

t.test('mp3: a reused LAME instance gives the same bytes as a fresh one', async (t) => {
  const pcm = sine(1000, 32000, 500);
  const opts = { format: 'mp3', sampleRateHz: 32000, inputSampleRateHz: 32000, mp3BitrateKbps: 128 } as const;
  const first = await encodeAll(opts, pcm);
  // Different settings in between, then the same again.
  await encodeAll({ ...opts, sampleRateHz: 8000, mp3BitrateKbps: 64 }, pcm);
  const again = await encodeAll(opts, pcm);
  t.ok(Buffer.from(first.bytes).equals(Buffer.from(again.bytes)));
});

t.test('push after end is refused; end twice is empty', async (t) => {
  for (const format of ['mp3', 'wav', 'pcm', 'opus'] as const) {
    const enc = await createEncoder({ format, sampleRateHz: format === 'opus' ? 48000 : 44100, inputSampleRateHz: 16000 });
    enc.push(sine(1000, 16000, 50));
    enc.end();
    t.same(enc.end(), [], `${format} end twice`);
    t.throws(() => enc.push(new Int16Array(10)), `${format} push after end`);
  }
});
