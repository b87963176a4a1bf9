import t from 'tap';
import { createOggEncoder } from 'wasm-media-encoders';
import { ServiceError } from '../../src/errors.ts';
import { createEncoder, decodeAudio, int16ToFloat32, sniffFormat, wavHeader } from '../../src/audio/index.ts';
import { writeFlac } from './flac-writer.ts';
import { concat, dominantHz, sine } from './signal.ts';

async function encode(format: 'mp3' | 'opus' | 'wav', sampleRateHz: number, pcm: Int16Array, inputSampleRateHz = sampleRateHz) {
  const enc = await createEncoder({ format, sampleRateHz, inputSampleRateHz });
  return concat([...enc.push(pcm), ...enc.end()]);
}

/** A WAV with any layout, written by hand. */
function wav(formatTag: number, channels: number, rate: number, bits: number, frames: number, sample: (i: number, c: number) => number): Uint8Array {
  const width = bits / 8;
  const data = new Uint8Array(frames * channels * width);
  const v = new DataView(data.buffer);
  for (let i = 0; i < frames; i++)
    for (let c = 0; c < channels; c++) {
      const at = (i * channels + c) * width;
      const s = sample(i, c); // in [-1, 1)
      if (formatTag === 3) v.setFloat32(at, s, true);
      else if (bits === 8) v.setUint8(at, Math.round(s * 127) + 128);
      else if (bits === 16) v.setInt16(at, Math.round(s * 32767), true);
      else if (bits === 24) {
        const x = Math.round(s * 8388607);
        v.setUint8(at, x & 0xff);
        v.setUint8(at + 1, (x >> 8) & 0xff);
        v.setInt8(at + 2, x >> 16);
      } else v.setInt32(at, Math.round(s * 2147483647), true);
    }
  const h = wavHeader(rate, data.length);
  const hv = new DataView(h.buffer);
  hv.setUint16(20, formatTag, true);
  hv.setUint16(22, channels, true);
  hv.setUint32(28, rate * channels * width, true);
  hv.setUint16(32, channels * width, true);
  hv.setUint16(34, bits, true);
  return concat([h, data]);
}

const tone = (i: number, rate: number, hz = 1000) => 0.4 * Math.sin((2 * Math.PI * hz * i) / rate);

t.test('sniffFormat recognises magic bytes, not declared types', async (t) => {
  const pcm = sine(1000, 44100, 100);
  t.equal(sniffFormat(await encode('wav', 44100, pcm)), 'wav');
  t.equal(sniffFormat(await encode('mp3', 44100, pcm)), 'mp3');
  t.equal(sniffFormat(await encode('opus', 48000, pcm, 44100)), 'ogg-opus');
  t.equal(sniffFormat(writeFlac([pcm], 44100)), 'flac');
  t.equal(sniffFormat(concat([Uint8Array.from([0x49, 0x44, 0x33, 4, 0, 0, 0, 0, 0, 2, 0, 0]), await encode('mp3', 44100, pcm)])), 'mp3', 'ID3 then MPEG');
  t.equal(sniffFormat(Uint8Array.from([0, 0, 0, 0x20, 0x66, 0x74, 0x79, 0x70, 0x4d, 0x34, 0x41])), 'm4a');
  t.equal(sniffFormat(Uint8Array.from([0x1a, 0x45, 0xdf, 0xa3, 1])), 'webm');
  t.equal(sniffFormat(new TextEncoder().encode('{"text":"not audio"}')), null);
  t.equal(sniffFormat(new Uint8Array(0)), null);
  t.equal(sniffFormat(new Uint8Array(64)), null);
});

t.test('decodeAudio: WAV fast path for every integer width, float, stereo downmix, streamed sizes', async (t) => {
  for (const [tag, bits] of [[1, 8], [1, 16], [1, 24], [1, 32], [3, 32]] as const) {
    const bytes = wav(tag, 2, 22050, bits, 22050, (i, c) => (c === 0 ? tone(i, 22050) : tone(i, 22050)));
    const d = await decodeAudio(bytes);
    t.equal(d.sampleRateHz, 22050, `${bits}-bit tag ${tag}`);
    t.equal(d.pcm.length, 22050);
    t.equal(d.durationMs, 1000);
    t.equal(dominantHz(d.pcm, 22050), 1000);
    const peak = d.pcm.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    t.ok(Math.abs(peak - 0.4 * 32768) < 400, `${bits}-bit level ${peak}`);
  }
  // Opposite channels cancel in the downmix.
  const cancel = await decodeAudio(wav(1, 2, 16000, 16, 1600, (i, c) => (c === 0 ? tone(i, 16000) : -tone(i, 16000))));
  t.ok(cancel.pcm.every((x) => Math.abs(x) <= 1), 'stereo averaged to mono');
  // A streamed WAV (placeholder sizes) is read up to the bytes present.
  const streamed = await encode('wav', 16000, sine(1000, 16000, 250));
  const d = await decodeAudio(streamed);
  t.equal(d.pcm.length, 4000);
});

t.test('decodeAudio: mp3, Ogg Opus, Ogg Vorbis and FLAC through audio-decode', async (t) => {
  const mp3 = await decodeAudio(await encode('mp3', 44100, sine(1000, 44100, 1000)));
  t.equal(mp3.sampleRateHz, 44100);
  t.ok(mp3.durationMs >= 1000 && mp3.durationMs < 1000 + 26.2 * 2 + 1, `mp3 ${mp3.durationMs} ms`);
  t.equal(dominantHz(mp3.pcm, 44100), 1000);

  const opus = await decodeAudio(await encode('opus', 48000, sine(1000, 16000, 1000), 16000));
  t.equal(opus.sampleRateHz, 48000);
  t.ok(Math.abs(opus.durationMs - 1000) <= 20, `opus ${opus.durationMs} ms`);
  t.equal(dominantHz(opus.pcm, 48000), 1000);

  const flac = await decodeAudio(writeFlac([sine(1000, 32000, 1000), sine(1000, 32000, 1000)], 32000));
  t.equal(flac.sampleRateHz, 32000);
  t.equal(flac.pcm.length, 32000);
  t.equal(dominantHz(flac.pcm, 32000), 1000);

  const vorbis = await createOggEncoder();
  vorbis.configure({ sampleRate: 44100, channels: 1, vbrQuality: 3 });
  const ogg = concat([vorbis.encode([int16ToFloat32(sine(1000, 44100, 1000))]).slice(), vorbis.finalize().slice()]);
  t.equal(sniffFormat(ogg), 'ogg-vorbis');
  const v = await decodeAudio(ogg);
  t.equal(v.sampleRateHz, 44100);
  t.ok(Math.abs(v.durationMs - 1000) <= 30, `vorbis ${v.durationMs} ms`);
  t.equal(dominantHz(v.pcm, 44100), 1000);
});

t.test('decodeAudio rejects what is not audio with a 400', async (t) => {
  const inputs: [string, Uint8Array][] = [
    ['text', new TextEncoder().encode('hello, this is not audio at all')],
    ['zeros', new Uint8Array(4096)],
    ['empty', new Uint8Array(0)],
    ['random', Uint8Array.from({ length: 5000 }, (_, i) => (i * 2654435761) >>> 24)],
    ['truncated wav', (await encode('wav', 16000, sine(1000, 16000, 100))).subarray(0, 40)],
    ['wav without samples', wavHeader(16000, 0)],
    ['broken ogg', concat([new TextEncoder().encode('OggS'), new Uint8Array(200).fill(0x55)])],
    ['broken flac', concat([new TextEncoder().encode('fLaC'), new Uint8Array(100).fill(0x11)])],
  ];
  for (const [name, bytes] of inputs) {
    try {
      await decodeAudio(bytes);
      t.fail(`${name} decoded`);
    } catch (err) {
      t.ok(err instanceof ServiceError, `${name}: ServiceError`);
      t.equal((err as ServiceError).status, 400, `${name}: 400`);
      t.match((err as Error).message, /Audio could not be decoded/);
    }
  }
});

t.test('decodeAudio: a WAV whose data size is 0 or 0xFFFFFFFF is read to the end', async (t) => {
  for (const size of [0, 0xffffffff]) {
    const bytes = await encode('wav', 8000, sine(1000, 8000, 500));
    new DataView(bytes.buffer, bytes.byteOffset).setUint32(40, size, true);
    const d = await decodeAudio(bytes);
    t.equal(d.pcm.length, 4000, `data size ${size}`);
  }
});
