// Many recognition streams on one call (TranscribeStreams), against the real native backend.
//
// Rules (docs/inference.md, "Many recognition streams on one call"): a backend that lists
// TranscribeStreams in Capabilities serves every realtime recognition stream of a client over one
// call; each stream hears its own audio and gets its own events; one stream's cancellation or
// failure ends that stream only; a backend that does not list it gets one TranscribeStream call
// per stream, as before.
import t from 'tap';
import * as pb from '../../src/gen/inference/v1/inference_pb.ts';
import { startBackend } from '../../native/server.ts';
import { createInferenceClient, type InferenceClient } from '../../src/inference/index.ts';
import type { CallInfo } from '../../native/service.ts';

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** Synthetic speech of `text` (the synthetic recognizer decodes it back) at 16 kHz. */
async function speech(client: InferenceClient, text: string): Promise<Buffer> {
  const chunks = await collect(client.synthesize({ text, model: 's2-pro', output: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } }));
  return Buffer.concat(chunks.map((c) => c.audio));
}

const config = { input: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } };
const committed = (events: pb.TranscribeStreamResponse[]) => events.flatMap((e) => (e.event.case === 'committed' ? [e.event.value.text] : [])).join('');

/** Sends `pcm` in 40 ms frames, every frame of every stream in turn (as sessions' frames arrive). */
function interleave(streams: { sendAudio(p: Uint8Array): void }[], audio: Buffer[]): void {
  const frame = 1280;
  const longest = Math.max(...audio.map((a) => a.length));
  for (let at = 0; at < longest; at += frame) {
    streams.forEach((s, i) => {
      if (at < audio[i].length) s.sendAudio(audio[i].subarray(at, at + frame));
    });
  }
}

async function setup(t: { teardown(f: () => unknown): void }, multiplexRecognition: boolean) {
  const calls: CallInfo[] = [];
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', multiplexRecognition, onCall: (c) => calls.push(c) });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const conn = client.backendFor('transcription').backend;
  // Streams opened before the backend's Capabilities has answered use their own calls (the
  // question is not on a session's path); these tests start once it has.
  await conn.multiplexKnown();
  return { backend, client, calls, conn };
}

const PHRASES = ['One stream here.', 'A second stream.', 'The third one talks.'];

t.test('a backend offering TranscribeStreams serves several streams on one call, each its own', async (t) => {
  const { client, calls, conn, backend } = await setup(t, true);
  t.ok((await client.capabilities()).rpcs.includes('TranscribeStreams'), 'the native backend lists TranscribeStreams');
  const audio = await Promise.all(PHRASES.map((p) => speech(client, p)));
  const streams = await Promise.all(PHRASES.map((_, i) => client.transcribeStream(config, { requestId: `session-${i}`, teamId: 'team-1' })));
  t.equal(conn.multiplexedStreams, 3, 'three streams open on the shared call');
  const before = conn.multiplexedSent;
  interleave(streams, audio);
  for (const s of streams) s.end();
  const got = await Promise.all(streams.map((s) => collect(s)));
  t.same(got.map(committed), PHRASES, 'each stream heard its own audio, and only it');
  const sent = conn.multiplexedSent;
  // The three opens were queued with the streams; then every frame and the three ends.
  const frames = audio.reduce((n, a) => n + Math.ceil(a.length / 1280), 0) + 6;
  t.equal(sent.inputs - before.inputs, frames, 'every open, frame and end went out as an input');
  t.ok(sent.messages - before.messages < 3, `frames queued in one turn of the event loop shared a message (${sent.messages - before.messages} messages)`);
  t.ok(got.every((evs) => evs.some((e) => e.event.case === 'speechStarted') && evs.some((e) => e.event.case === 'speechEnded')), 'speech started and ended on each');
  t.equal(calls.filter((c) => c.rpc === 'transcribeStreams').length, 1, 'one TranscribeStreams call');
  t.equal(calls.filter((c) => c.rpc === 'transcribeStream' && c.teamId === 'team-1').map((c) => c.requestId).sort().join(','), 'session-0,session-1,session-2', "each stream's request id and team reach the backend");
  t.equal(conn.inFlight, 0, 'ended streams give their slots back');
  t.equal(backend.stats().activeCalls, 0, 'and the backend its');

  // A later stream reuses the call.
  const again = await client.transcribeStream(config);
  again.sendAudio(audio[0]);
  again.end();
  t.equal(committed(await collect(again)), PHRASES[0], 'a later stream on the same call');
  t.equal(calls.filter((c) => c.rpc === 'transcribeStreams').length, 1, 'still one call');
});

// The websocket transport hands a stream a view of uWebSockets.js's buffer, which it reuses once
// the frame's callback returns: a stream reads a frame during sendAudio only.
for (const multiplex of [true, false]) {
  t.test(`a frame is read while sendAudio runs: its buffer may be reused at once (${multiplex ? 'one shared call' : 'a call per stream'})`, async (t) => {
    const { client, conn } = await setup(t, multiplex);
    const [one, two] = await Promise.all(PHRASES.slice(0, 2).map((p) => speech(client, p)));
    const streams = await Promise.all([0, 1].map(() => client.transcribeStream(config)));
    t.equal(conn.multiplexedStreams, multiplex ? 2 : 0);
    const scratch = new Uint8Array(1280);
    const audio = [one, two];
    const longest = Math.max(one.length, two.length);
    for (let at = 0; at < longest; at += 1280) {
      streams.forEach((s, i) => {
        if (at >= audio[i].length) return;
        const f = audio[i].subarray(at, at + 1280);
        scratch.set(f);
        s.sendAudio(scratch.subarray(0, f.length));
        scratch.fill(0x55); // the sender's next use of its buffer
      });
    }
    for (const s of streams) s.end();
    const got = await Promise.all(streams.map((s) => collect(s)));
    t.same(got.map(committed), PHRASES.slice(0, 2), 'each stream heard its audio as it was when sent');
  });
}

t.test("one stream's cancel or failure ends that stream only", async (t) => {
  const { client, conn, backend } = await setup(t, true);
  const audio = await Promise.all(PHRASES.map((p) => speech(client, p)));
  const [a, b] = await Promise.all([client.transcribeStream(config), client.transcribeStream(config)]);
  const ac = new AbortController();
  const c = await client.transcribeStream(config, { signal: ac.signal });
  // A stream whose configuration the backend refuses (a sample rate out of range).
  const bad = await conn.transcribeStream({ input: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: 1000 } });
  const badResult = collect(bad).then(() => null, (err) => err);

  interleave([a, b, c], audio.map((x) => x.subarray(0, x.length >> 1)));
  a.cancel();
  ac.abort(new Error('caller left'));
  interleave([b], [audio[1].subarray(audio[1].length >> 1)]);
  b.end();

  await t.rejects(collect(a), { message: 'Inference backend cancelled the call' }, 'the cancelled stream ends as a cancelled call does');
  await t.rejects(collect(c), { message: 'caller left' }, 'the aborted stream ends with its reason');
  const err = await badResult;
  t.match(err, { status: 422, fields: [{ loc: ['body', 'config', 'input', 'sample_rate_hz'] }] }, "the refused stream fails with the backend's status");
  t.equal(committed(await collect(b)), PHRASES[1], 'the stream beside them is heard to its end');
  t.equal(conn.inFlight, 0, 'every slot is back');
  t.equal(backend.stats().activeCalls, 0, 'the backend stopped the cancelled streams');

  const d = await client.transcribeStream(config);
  d.sendAudio(audio[2]);
  d.end();
  t.equal(committed(await collect(d)), PHRASES[2], 'the shared call still serves new streams');
});

t.test('the backend going away fails every stream on the call, as it fails calls', async (t) => {
  const { client, backend, conn } = await setup(t, true);
  const streams = await Promise.all([client.transcribeStream(config), client.transcribeStream(config)]);
  const results = streams.map((s) => collect(s).then(() => null, (err) => err));
  await backend.close();
  for (const err of await Promise.all(results)) t.match(err, { status: 503 }, 'a stream fails with 503');
  t.equal(conn.inFlight, 0, 'their slots are back');
});

t.test('a backend without TranscribeStreams gets one TranscribeStream call per stream', async (t) => {
  const { client, calls, conn } = await setup(t, false);
  t.notOk((await client.capabilities()).rpcs.includes('TranscribeStreams'), 'not listed');
  const audio = await Promise.all(PHRASES.slice(0, 2).map((p) => speech(client, p)));
  const streams = await Promise.all(audio.map((_, i) => client.transcribeStream(config, { requestId: `s${i}` })));
  const c = await client.transcribeStream(config);
  interleave(streams, audio);
  c.cancel();
  for (const s of streams) s.end();
  t.same((await Promise.all(streams.map((s) => collect(s)))).map(committed), PHRASES.slice(0, 2), 'each stream heard its own audio');
  await t.rejects(collect(c), { message: 'Inference backend cancelled the call' }, 'a cancelled one ends as a cancelled call does');
  t.equal(conn.multiplexedStreams, 0, 'nothing multiplexed');
  t.equal(calls.filter((x) => x.rpc === 'transcribeStreams').length, 0, 'no TranscribeStreams call');
  t.equal(calls.filter((x) => x.rpc === 'transcribeStream').length, 3, 'one TranscribeStream call per stream');
});
