// A recorded track (docs/api/recordings.md) is time-aligned with the session: each piece of audio lands
// where it was heard, the gaps between read back as silence, and audio is written in chunks.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { parseWav } from '../../src/audio/index.ts';
import { Track, WRITE_CHUNK_BYTES, uploadFailure, writeFailure } from '../../src/recordings/recorder.ts';
import { S3Client, S3Error } from '../../src/recordings/s3.ts';

const dir = mkdtempSync(join(tmpdir(), 'parley-track-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const BYTES_PER_MS = 32; // 16 kHz, 16-bit

/** `ms` of audio whose bytes are all `v` (never 0, so silence is told apart). */
const tone = (ms: number, v: number) => new Uint8Array(ms * BYTES_PER_MS).fill(v);

function readTrack(path: string) {
  const bytes = new Uint8Array(readFileSync(path));
  const wav = parseWav(bytes)!;
  return { wav, pcm: bytes.subarray(44) };
}

t.test('audio lands at its time on the session timeline; a gap reads back as silence', async (t) => {
  const track = new Track(join(dir, 's1', 'agent.wav'), 1000);
  // 1 s of speech from t=0, then quiet for 3 s, then 0.5 s more at t=4 s.
  for (let i = 0; i < 50; i++) track.push(tone(20, 7), 1000 + i * 20);
  for (let i = 0; i < 25; i++) track.push(tone(20, 9), 5000 + i * 20);
  const bytes = await track.close();
  t.equal(bytes, 4500 * BYTES_PER_MS, '4.5 s on the timeline');
  const { wav, pcm } = readTrack(track.path);
  t.match(wav, { sampleRateHz: 16000, channels: 1 });
  t.equal(pcm.length, bytes, 'the header names what the file holds');
  t.ok(pcm.subarray(0, 1000 * BYTES_PER_MS).every((b) => b === 7), 'the first second is the first speech');
  t.ok(pcm.subarray(1000 * BYTES_PER_MS, 4000 * BYTES_PER_MS).every((b) => b === 0), 'the quiet 3 s are silence');
  t.ok(pcm.subarray(4000 * BYTES_PER_MS).every((b) => b === 9), 'the second speech at 4 s');
});

t.test('audio longer than a write chunk is written whole and in order; jitter under 60 ms is not a gap', async (t) => {
  const track = new Track(join(dir, 's2', 'user.wav'), 0);
  const frames = Math.ceil((WRITE_CHUNK_BYTES * 2.5) / (20 * BYTES_PER_MS));
  // Frames arrive up to 40 ms late and in bursts: placed back to back, no silence inserted.
  for (let i = 0; i < frames; i++) track.push(tone(20, (i % 250) + 1), i * 20 + (i % 3 === 0 ? 40 : 0));
  const bytes = await track.close();
  t.equal(bytes, frames * 20 * BYTES_PER_MS);
  const { pcm } = readTrack(track.path);
  let ok = true;
  for (let i = 0; i < frames && ok; i++) ok = pcm.subarray(i * 640, (i + 1) * 640).every((b) => b === (i % 250) + 1);
  t.ok(ok, `${frames} frames in order across ${Math.ceil(bytes / WRITE_CHUNK_BYTES)} chunks`);
});

t.test('a reused chunk buffer never leaks an earlier track\'s audio into silence or past the end', async (t) => {
  // Fill chunks with loud audio and finish the track: its buffers go back to the pool.
  const loud = new Track(join(dir, 's3', 'agent.wav'), 0);
  for (let i = 0; i < 300; i++) loud.push(tone(20, 0xee), i * 20);
  await loud.close();
  // A short track: 100 ms, 2 s of quiet, 100 ms (each write is a partial chunk of a reused buffer).
  const track = new Track(join(dir, 's4', 'agent.wav'), 0);
  for (let i = 0; i < 5; i++) track.push(tone(20, 1), i * 20);
  for (let i = 0; i < 5; i++) track.push(tone(20, 2), 2100 + i * 20);
  const bytes = await track.close();
  t.equal(bytes, 2200 * BYTES_PER_MS);
  t.equal(statSync(track.path).size, 44 + bytes, 'nothing written past the last audio');
  const { pcm } = readTrack(track.path);
  t.ok(pcm.subarray(0, 100 * BYTES_PER_MS).every((b) => b === 1));
  t.ok(pcm.subarray(100 * BYTES_PER_MS, 2100 * BYTES_PER_MS).every((b) => b === 0), 'silence, not the earlier track');
  t.ok(pcm.subarray(2100 * BYTES_PER_MS).every((b) => b === 2));
});

t.test('gaps inside a chunk (late frames, short pauses) read back as silence from a reused buffer', async (t) => {
  const loud = new Track(join(dir, 's6', 'user.wav'), 0);
  for (let i = 0; i < 300; i++) loud.push(tone(20, 0xee), i * 20);
  await loud.close();
  // 100 ms frames, each arriving 80–300 ms after the previous one ended: every gap is longer
  // than the 60 ms jitter allowance and shorter than what is left of the chunk.
  const track = new Track(join(dir, 's7', 'user.wav'), 0);
  const gaps = [80, 300, 120, 200, 90];
  const starts: number[] = [];
  let at = 0;
  for (const [i, g] of gaps.entries()) {
    starts.push(at);
    track.push(tone(100, i + 1), at);
    at += 100 + g;
  }
  const bytes = await track.close();
  t.equal(bytes, (starts.at(-1)! + 100) * BYTES_PER_MS, 'the last frame ends where it was heard');
  const { pcm } = readTrack(track.path);
  for (const [i, s] of starts.entries()) {
    t.ok(pcm.subarray(s * BYTES_PER_MS, (s + 100) * BYTES_PER_MS).every((b) => b === i + 1), `frame ${i + 1} at ${s} ms`);
    if (i < gaps.length - 1) t.ok(pcm.subarray((s + 100) * BYTES_PER_MS, starts[i + 1]! * BYTES_PER_MS).every((b) => b === 0), `the ${gaps[i]} ms after it is silence`);
  }
});

t.test('a track that cannot be written fails on close instead of pretending', async (t) => {
  writeFileSync(join(dir, 'blocker'), 'a file where the session folder should be');
  const track = new Track(join(dir, 'blocker', 's5', 'agent.wav'), 0);
  track.push(tone(20, 1), 0);
  await t.rejects(track.close());
});

t.test('a full disk (ENOSPC from /dev/full) stops the track at its first write and names the reason', { skip: existsSync('/dev/full') ? false : 'no /dev/full here' }, async (t) => {
  mkdirSync(join(dir, 's8'));
  symlinkSync('/dev/full', join(dir, 's8', 'agent.wav')); // every write to it fails with ENOSPC
  const told: unknown[] = [];
  const track = new Track(join(dir, 's8', 'agent.wav'), 0, (err) => told.push(err));
  for (let i = 0; i < 300; i++) track.push(tone(20, 1), i * 20);
  const err = await track.close().then(() => null, (e: unknown) => e);
  t.match(err, { code: 'ENOSPC' }, 'close rejects with the write\'s error');
  t.equal(told.length, 1, 'told once, however much audio followed');
  t.same(writeFailure(err), { code: 'disk_full', message: 'Recording stopped: the recordings disk is full (ENOSPC)' });
  t.same(writeFailure(Object.assign(new Error('io'), { code: 'EIO' })), { code: 'write_failed', message: 'The track could not be written (EIO)' });
});

t.test('an upload failure says why without naming a secret', async (t) => {
  t.equal(uploadFailure(new S3Error('S3 PUT answered 503', 503)).message, 'The track could not be uploaded: the store answered 503');
  t.equal(uploadFailure(new DOMException('timed out', 'TimeoutError')).message, 'The track could not be uploaded: the store did not answer within 120 s');
  const secretAccessKey = 'never-in-a-message';
  const client = new S3Client({ endpoint: 'http://127.0.0.1:1', bucket: 'b', region: 'r', accessKeyId: 'AKID', secretAccessKey });
  const err = await client.put('k', new Uint8Array(1), 'audio/wav').then(() => null, (e: unknown) => e);
  const f = uploadFailure(err);
  t.same(f, { code: 'upload_failed', message: 'The track could not be uploaded: the store could not be reached' });
  t.notOk(JSON.stringify(f).includes(secretAccessKey));
});

t.test('speech across chunk boundaries, a silence longer than a chunk and a short pause read back in place', async (t) => {
  const loud = new Track(join(dir, 's9', 'user.wav'), 0);
  for (let i = 0; i < 300; i++) loud.push(tone(20, 0xee), i * 20);
  await loud.close();
  // Speech in 100 ms frames: 3.1 s, a 2.3 s silence (longer than a chunk: a hole), 2.9 s, a 70 ms
  // pause (inside the chunk: zeros), 1.5 s, from a reused buffer that held loud audio.
  const track = new Track(join(dir, 's10', 'agent.wav'), 0);
  const parts: [start: number, ms: number, v: number][] = [[0, 3100, 1], [5400, 2900, 2], [8370, 1500, 3]];
  for (const [start, ms, v] of parts) for (let at = 0; at < ms; at += 100) track.push(tone(100, v), start + at);
  const bytes = await track.close();
  t.equal(bytes, 9870 * BYTES_PER_MS, 'the last frame ends where it was heard');
  t.equal(statSync(track.path).size, 44 + bytes);
  const { wav, pcm } = readTrack(track.path);
  t.equal(wav.dataBytes, bytes, 'the header names what the file holds');
  let heard = 0;
  for (const [i, [start, ms, v]] of parts.entries()) {
    t.ok(pcm.subarray(start * BYTES_PER_MS, (start + ms) * BYTES_PER_MS).every((b) => b === v), `speech ${i + 1} at ${start} ms, whole`);
    t.ok(pcm.subarray(heard * BYTES_PER_MS, start * BYTES_PER_MS).every((b) => b === 0), `silence before it (${start - heard} ms)`);
    heard = start + ms;
  }
});
