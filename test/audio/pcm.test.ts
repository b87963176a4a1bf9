import t from 'tap';
import {
  createFramer,
  createPcmByteReader,
  float32ToInt16,
  frames,
  int16ToFloat32,
  int16ToPcmBytes,
  pcmBytesToInt16,
} from '../../src/audio/index.ts';

t.test('int16 ⇄ float32 round trip, clipping', async (t) => {
  const x = Int16Array.from([0, 1, -1, 32767, -32768, 1234, -4321]);
  const f = int16ToFloat32(x);
  t.equal(f[4], -1);
  t.ok(f[3] < 1);
  t.same(Array.from(float32ToInt16(f)), Array.from(x));
  t.same(Array.from(float32ToInt16(Float32Array.from([1.5, -1.5, 0.5]))), [32767, -32768, 16384]);
});

t.test('pcm bytes are little-endian, also at odd offsets', async (t) => {
  const samples = Int16Array.from([1, -2, 0x1234, -32768, 32767]);
  const bytes = int16ToPcmBytes(samples);
  t.same(Array.from(bytes.subarray(0, 6)), [1, 0, 0xfe, 0xff, 0x34, 0x12]);
  t.same(Array.from(pcmBytesToInt16(bytes)), Array.from(samples));
  const shifted = new Uint8Array(bytes.length + 1);
  shifted.set(bytes, 1);
  const odd = shifted.subarray(1);
  t.equal(odd.byteOffset, 1);
  t.same(Array.from(pcmBytesToInt16(odd)), Array.from(samples));
  t.same(Array.from(pcmBytesToInt16(Uint8Array.from([1, 0, 2]))), [1], 'a trailing odd byte is ignored');
});

t.test('byte reader carries a split sample across chunks', async (t) => {
  const samples = Int16Array.from({ length: 101 }, (_, i) => i * 300 - 15000);
  const bytes = int16ToPcmBytes(samples);
  const r = createPcmByteReader();
  const got: number[] = [];
  for (const [a, b] of [[0, 3], [3, 4], [4, 99], [99, 202]]) got.push(...r.push(bytes.subarray(a, b)));
  t.same(got, Array.from(samples));
});

t.test('frames splits by duration; the last frame may be short', async (t) => {
  const pcm = new Int16Array(16000 + 100);
  const f = frames(pcm, 20, 16000);
  t.equal(f.length, 51);
  t.equal(f[0].length, 320);
  t.equal(f[50].length, 100);
});

t.test('framer emits whole frames across pushes and flushes the rest', async (t) => {
  const framer = createFramer(20, 8000); // 160 samples
  const src = Int16Array.from({ length: 1000 }, (_, i) => i);
  const out: Int16Array[] = [];
  out.push(...framer.push(src.subarray(0, 7)));
  out.push(...framer.push(src.subarray(7, 500)));
  out.push(...framer.push(src.subarray(500)));
  t.equal(out.length, 6);
  t.ok(out.every((f) => f.length === 160));
  const rest = framer.flush();
  t.equal(rest.length, 40);
  t.same([...out.flatMap((f) => Array.from(f)), ...rest], Array.from(src));
});
