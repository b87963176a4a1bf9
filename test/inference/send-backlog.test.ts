// What the shared recognition call has written and not yet sent (docs/inference.md, "Send
// backlog"): a backend that stops reading fills the call's HTTP/2 window, the caller audio after
// it waits in the client, and `sendBacklog` says how many bytes and for how long; once the backend
// reads again it drains to nothing. The stalling backend stands in for a backend (or a connection)
// that falls behind.
import t from 'tap';
import { createInferenceClient, pb } from '../../src/inference/index.ts';
import { startStallingBackend } from '../fixtures/stalling-backend.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const FRAME = 640; // 20 ms of 16 kHz 16-bit mono

t.test('caller audio held back by flow control is counted, aged and drained', async (t) => {
  const stalling = await startStallingBackend();
  const client = createInferenceClient({ nativeAddress: stalling.address, backends: '', backend: { channels: 1 } });
  t.teardown(async () => {
    await client.close();
    await stalling.close();
  });
  t.same(client.sendBacklog(), { recognition: { bytes: 0, ageMs: 0 }, synthesis: { bytes: 0, ageMs: 0 } }, 'nothing waits before any call');
  t.equal(await client.backendFor('transcription').backend.multiplexKnown(), true, 'the backend lists TranscribeStreams');
  const streams = await Promise.all([1, 2, 3, 4].map(() => client.transcribeStream({ model: 'transcribe-1', input: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } })));
  t.teardown(() => { for (const s of streams) s.cancel(); });
  // 400 KB of audio (~518 KB with its framing) in 50 turns of the event loop, one ~10 KB message
  // each: far past the stream's 64 KB window and grpc-js's 32 KB retry buffer.
  const pcm = new Uint8Array(FRAME);
  for (let turn = 0; turn < 50; turn++) {
    for (let f = 0; f < 4; f++) for (const s of streams) s.sendAudio(pcm);
    await new Promise((r) => setImmediate(r));
  }
  await sleep(300);
  const held = client.sendBacklog();
  t.ok(held.recognition.bytes > 300_000, `all but the window's worth waits in the client (${held.recognition.bytes} bytes)`);
  t.ok(held.recognition.ageMs >= 300, `its oldest write has waited at least the 300 ms since (${Math.round(held.recognition.ageMs)} ms)`);
  t.equal(stalling.bytesRead, 0, 'the backend has read nothing');

  stalling.release();
  for (let i = 0; i < 200 && client.sendBacklog().recognition.bytes > 0; i++) await sleep(10);
  t.same(client.sendBacklog().recognition, { bytes: 0, ageMs: 0 }, 'drained once the backend reads');
  t.ok(stalling.bytesRead > 409_600, `the backend got every frame (${stalling.bytesRead} bytes with their framing)`);
});

t.test('a backend without the shared call: each stream\'s own call counts', async (t) => {
  const stalling = await startStallingBackend({ shared: false });
  const client = createInferenceClient({ nativeAddress: stalling.address, backends: '', backend: { channels: 1 } });
  t.teardown(async () => {
    await client.close();
    await stalling.close();
  });
  t.equal(await client.backendFor('transcription').backend.multiplexKnown(), false, 'the backend does not list TranscribeStreams');
  const streams = await Promise.all([1, 2].map(() => client.transcribeStream({ model: 'transcribe-1', input: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } })));
  t.teardown(() => { for (const s of streams) s.cancel(); });
  // 200 KB per stream, past each stream's 64 KB window.
  const pcm = new Uint8Array(FRAME);
  for (let f = 0; f < 320; f++) for (const s of streams) s.sendAudio(pcm);
  await sleep(300);
  const held = client.sendBacklog();
  t.ok(held.recognition.bytes > 200_000, `the audio past each call's window waits (${held.recognition.bytes} of 409,600 bytes)`);
  t.ok(held.recognition.ageMs >= 200, `its oldest write has waited (${Math.round(held.recognition.ageMs)} ms, read at most every 100 ms)`);
  t.equal(stalling.recognitionCalls, 2, 'a call per stream');

  // A call that ends stops counting, though its bytes never left.
  streams[0]!.cancel();
  await sleep(200);
  const one = client.sendBacklog().recognition.bytes;
  t.ok(one > 0 && one <= held.recognition.bytes / 2 + 1_000, `the cancelled call's writes are no longer counted (${one} of ${held.recognition.bytes} bytes left)`);

  stalling.release();
  for (let i = 0; i < 200 && client.sendBacklog().recognition.bytes > 0; i++) await sleep(10);
  t.same(client.sendBacklog().recognition, { bytes: 0, ageMs: 0 }, 'drained once the backend reads');
});
