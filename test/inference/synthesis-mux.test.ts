// Many live synthesis streams on one call (SynthesizeStreams), against the real native backend.
//
// Rules (docs/inference.md, "Many synthesis streams on one call"): a backend that lists
// SynthesizeStreams in Capabilities serves every live synthesis stream of a client over one call;
// each stream gets the audio of its own text, the same audio a SynthesizeStream call gives; the
// backend sends a stream no more audio than the caller granted it credit for, so a caller that
// does not read holds at most its window; one stream's cancellation or failure ends that stream
// only; the backend going away fails every stream as it fails calls; a backend that does not list
// it gets one SynthesizeStream call per stream, as before.
import t from 'tap';
import * as pb from '../../src/gen/inference/v1/inference_pb.ts';
import { startBackend } from '../../native/server.ts';
import { create } from '@bufbuild/protobuf';
import { createInferenceClient, type SynthesisSession } from '../../src/inference/index.ts';
import type { Backend } from '../../src/inference/backend.ts';
import { SYNTHESIS_GRANT_BYTES, SYNTHESIS_WINDOW_BYTES } from '../../src/inference/synthesis-mux.ts';
import type { CallInfo } from '../../native/service.ts';

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

const config = { model: 's2-pro', language: 'en', output: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } };
const audioOf = (events: pb.SynthesizeStreamResponse[]) => Buffer.concat(events.flatMap((e) => (e.event.case === 'chunk' ? [e.event.value.audio] : [])));
const flushedOf = (events: pb.SynthesizeStreamResponse[]) => events.flatMap((e) => (e.event.case === 'flushed' ? [Number(e.event.value.id)] : []));

async function setup(t: { teardown(f: () => unknown): void }, multiplexSynthesis: boolean) {
  const calls: CallInfo[] = [];
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', multiplexSynthesis, onCall: (c) => calls.push(c) });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const conn = client.backendFor('speech').backend;
  // Streams opened before the backend's Capabilities has answered use their own calls; these
  // tests start once it has.
  await conn.synthesisMultiplexKnown();
  return { backend, client, calls, conn };
}

/** The audio `pieces` give on a SynthesizeStream call of their own (the raw gRPC client), flushed once. */
async function perCall(conn: Backend, pieces: string[]): Promise<Buffer> {
  const call = conn.client.synthesizeStream();
  const w = (event: pb.SynthesizeStreamRequest['event']) => call.write(create(pb.SynthesizeStreamRequestSchema, { event }));
  w({ case: 'config', value: create(pb.SynthesizeRequestSchema, config) });
  for (const p of pieces) w({ case: 'text', value: p });
  w({ case: 'flush', value: create(pb.FlushSchema, { id: 7n }) });
  call.end();
  return audioOf(await collect(call as AsyncIterable<pb.SynthesizeStreamResponse>));
}

/** What one SynthesizeStream-like session gives for `pieces`, flushed once, then ended. */
function speak(s: SynthesisSession, pieces: string[]): Promise<pb.SynthesizeStreamResponse[]> {
  for (const p of pieces) s.send(p);
  s.flush(7);
  s.end();
  return collect(s);
}

const TEXTS = [['One stream ', 'speaks here.'], ['A second ', 'stream.'], ['The third ', 'one talks.']];
const LONG = 'This sentence is spoken again and again to make a reply long enough. '.repeat(24);

t.test('a backend offering SynthesizeStreams serves several streams on one call, each its own', async (t) => {
  const { client, calls, conn, backend } = await setup(t, true);
  t.ok((await client.capabilities()).rpcs.includes('SynthesizeStreams'), 'the native backend lists SynthesizeStreams');
  // The audio each text gives on a call of its own.
  const expected = await Promise.all(TEXTS.map((p) => perCall(conn, p)));

  const streams = await Promise.all(TEXTS.map((_, i) => client.synthesizeStream(config, { requestId: `session-${i}`, teamId: 'team-1' })));
  t.equal(conn.synthesisStreams.open, 3, 'three streams open on the shared call');
  const before = conn.synthesisSent;
  // Pieces of every stream in turn, as sessions' replies arrive.
  for (let i = 0; i < 2; i++) streams.forEach((s, k) => s.send(TEXTS[k][i]));
  for (const s of streams) { s.flush(7); s.end(); }
  const got = await Promise.all(streams.map((s) => collect(s)));
  t.same(got.map(audioOf), expected, 'each stream got the audio of its own text, as on a call of its own');
  t.same(got.map(flushedOf), [[7], [7], [7]], "each stream's flush is answered on it");
  const sent = conn.synthesisSent;
  t.ok(sent.messages - before.messages <= 2, `inputs queued in one turn of the event loop shared a message (${sent.messages - before.messages} messages)`);
  t.equal(calls.filter((c) => c.rpc === 'synthesizeStreams').length, 1, 'one SynthesizeStreams call');
  t.equal(calls.filter((c) => c.rpc === 'synthesizeStream' && c.teamId === 'team-1').map((c) => c.requestId).sort().join(','), 'session-0,session-1,session-2', "each stream's request id and team reach the backend");
  t.equal(calls.filter((c) => c.rpc === 'synthesizeStream' && !c.teamId).length, TEXTS.length, 'no SynthesizeStream call but the reference ones');
  t.equal(conn.inFlight, 0, 'ended streams give their slots back');
  t.equal(backend.stats().activeCalls, 0, 'and the backend its');

  const again = await client.synthesizeStream(config);
  t.same(audioOf(await speak(again, TEXTS[0])), expected[0], 'a later stream on the same call');
  t.equal(calls.filter((c) => c.rpc === 'synthesizeStreams').length, 1, 'still one call');
});

t.test("the backend sends a stream only the audio its caller granted credit for", async (t) => {
  const { client, conn } = await setup(t, true);
  const whole = await perCall(conn, [LONG]);
  t.ok(whole.length > 4 * SYNTHESIS_WINDOW_BYTES, `the reply is longer than the window (${whole.length} bytes)`);

  const slow = await client.synthesizeStream(config);
  slow.send(LONG);
  slow.flush(1);
  slow.end();
  // A stream beside it that reads as it comes is not held back by the one that does not read.
  const other = await client.synthesizeStream(config);
  t.same(audioOf(await speak(other, [LONG])), whole, 'the stream beside it gets all its audio');
  // The slow one has its window and no more, however long the backend has had.
  await new Promise((r) => setTimeout(r, 300));
  const held = conn.synthesisStreams.bufferedBytes;
  t.ok(held >= SYNTHESIS_WINDOW_BYTES / 2, `the unread stream received audio up to its window (${held} bytes)`);
  t.ok(held <= SYNTHESIS_WINDOW_BYTES + 8 * 1024, `and no more than its window and a chunk (${held} bytes)`);

  // Reading it grants credit again, until the whole reply has come.
  const got = await collect(slow);
  t.same(audioOf(got), whole, 'read, it gets the whole reply, in order');
  t.same(flushedOf(got), [1], 'and its flush');
  const credits = conn.synthesisSent.credits;
  t.ok(credits >= Math.floor((whole.length - SYNTHESIS_WINDOW_BYTES) / SYNTHESIS_GRANT_BYTES), `credit was granted as it was read (${credits} grants)`);
  t.equal(conn.synthesisStreams.bufferedBytes, 0, 'nothing left held');
});

t.test("one stream's cancel or failure ends that stream only", async (t) => {
  const { client, conn, backend } = await setup(t, true);
  const expected = await perCall(conn, TEXTS[1]);
  const a = await client.synthesizeStream(config);
  const b = await client.synthesizeStream(config);
  const ac = new AbortController();
  const c = await client.synthesizeStream(config, { signal: ac.signal });
  // A stream whose configuration the backend refuses, as it refuses a call's.
  const bad = await conn.synthesizeStream({ model: 'no-such-model' });
  const badResult = collect(bad).then(() => null, (err) => err);

  for (const s of [a, c]) { s.send(LONG); s.flush(1); }
  const first = await a[Symbol.asyncIterator]().next();
  t.equal(first.value?.event.case, 'chunk', 'the stream to be cancelled was speaking');
  a.cancel();
  ac.abort(new Error('caller left'));
  const bResult = speak(b, TEXTS[1]);

  await t.rejects(collect(a), { message: 'Inference backend cancelled the call' }, 'the cancelled stream ends as a cancelled call does');
  await t.rejects(collect(c), { message: 'caller left' }, 'the aborted stream ends with its reason');
  t.match(await badResult, { status: 400, message: 'Model not found: no-such-model' }, "the refused stream fails as a refused call does");
  t.same(audioOf(await bResult), expected, 'the stream beside them is spoken to its end');
  t.equal(conn.inFlight, 0, 'every slot is back');
  // The backend stops the cancelled ones (their synthesis ends on the cancel input).
  for (let i = 0; i < 100 && backend.stats().activeCalls > 0; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(backend.stats().activeCalls, 0, 'the backend stopped the cancelled streams');

  const d = await client.synthesizeStream(config);
  t.same(audioOf(await speak(d, TEXTS[1])), expected, 'the shared call still serves new streams');
});

for (const multiplexSynthesis of [true, false]) {
  t.test(`the backend going away mid-reply fails every stream${multiplexSynthesis ? ' on the call, as it fails calls' : ' (one call each)'}`, async (t) => {
    const { client, backend, conn } = await setup(t, multiplexSynthesis);
    const streams = await Promise.all([client.synthesizeStream(config), client.synthesizeStream(config)]);
    for (const s of streams) { s.send(LONG); s.flush(1); }
    // Each has begun its reply (and holds it unread: the backend waits for credit, or HTTP/2's window).
    for (const s of streams) t.equal((await s[Symbol.asyncIterator]().next()).value?.event.case, 'chunk', 'speaking');
    const results = streams.map((s) => collect(s).then(() => null, (err) => err));
    await backend.close(); // cancels the calls in progress
    for (const err of await Promise.all(results)) t.match(err, { status: 502, message: 'Inference backend cancelled the call' }, 'a stream fails as its call is cancelled');
    t.equal(conn.inFlight, 0, 'their slots are back');
    t.equal(conn.synthesisStreams.open, 0, 'no stream left open');
  });
}

t.test('the backend closing fails idle streams on the call with 503', async (t) => {
  const { client, backend, conn } = await setup(t, true);
  const streams = await Promise.all([client.synthesizeStream(config), client.synthesizeStream(config)]);
  const results = streams.map((s) => collect(s).then(() => null, (err) => err));
  await backend.close();
  for (const err of await Promise.all(results)) t.match(err, { status: 503 }, 'an idle stream fails with 503, as an idle call does');
  t.equal(conn.inFlight, 0, 'their slots are back');
});

t.test('a backend without SynthesizeStreams gets one SynthesizeStream call per stream', async (t) => {
  const { client, calls, conn } = await setup(t, false);
  t.notOk((await client.capabilities()).rpcs.includes('SynthesizeStreams'), 'not listed');
  const expected = await Promise.all(TEXTS.slice(0, 2).map((p) => perCall(conn, p)));
  const streams = await Promise.all(expected.map((_, i) => client.synthesizeStream(config, { requestId: `s${i}` })));
  const c = await client.synthesizeStream(config);
  c.send(LONG);
  c.cancel();
  const got = await Promise.all(streams.map((s, i) => speak(s, TEXTS[i])));
  t.same(got.map(audioOf), expected, 'each stream got its own audio');
  await t.rejects(collect(c), { message: 'Inference backend cancelled the call' }, 'a cancelled one ends as a cancelled call does');
  t.equal(conn.synthesisStreams.open, 0, 'nothing multiplexed');
  t.equal(calls.filter((x) => x.rpc === 'synthesizeStreams').length, 0, 'no SynthesizeStreams call');
  t.equal(calls.filter((x) => x.rpc === 'synthesizeStream').length, 2 + 3, 'one SynthesizeStream call per stream (two for reference, three streams)');
});
