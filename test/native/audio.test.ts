// The native backend's PCM helpers: caller frames read where they arrived.
import t from 'tap';
import { bytesToPcm, pcmBytes } from '../../native/audio.ts';

const samples = Int16Array.from([0, 1, -1, 32767, -32768, 1234, -4321]);

t.test('bytesToPcm reads aligned frames in place and copies misaligned ones', async (t) => {
  const bytes = pcmBytes(samples);
  const aligned = bytesToPcm(bytes);
  t.same(Array.from(aligned), Array.from(samples));
  t.equal(aligned.buffer, bytes.buffer, 'a view on the frame, no copy');

  // A field at an odd offset inside a larger message buffer.
  const message = new Uint8Array(bytes.length + 3);
  message.set(bytes, 1);
  const odd = bytesToPcm(message.subarray(1, 1 + bytes.length));
  t.same(Array.from(odd), Array.from(samples), 'the same samples from an odd offset');
  t.not(odd.buffer, message.buffer, 'copied: an Int16Array cannot start at an odd byte');

  t.same(Array.from(bytesToPcm(Uint8Array.from([1, 0, 2]))), [1], 'a trailing odd byte is dropped');
  const even = new Uint8Array(bytes.length + 2);
  even.set(bytes, 2);
  const inside = bytesToPcm(even.subarray(2));
  t.same(Array.from(inside), Array.from(samples), 'the same samples from an even offset inside a buffer');
  t.ok(inside.buffer === even.buffer && inside.byteOffset === 2, 'read in place');
});
