// Many generations on one call (GenerateStreams), against the real native backend.
//
// Rules (docs/inference.md, "Many generations on one call"): a backend that lists GenerateStreams
// in Capabilities serves every generation of a client over one call; each generation gets the
// events a Generate call of its own gives, its metadata per stream; one generation's failure
// (an unknown model) or cancellation ends that generation only, with the error a Generate call
// would have given; the backend going away fails every generation open on the call; a backend
// that does not list it gets one Generate call per generation, as before.
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import * as pb from '../../src/gen/inference/v1/inference_pb.ts';
import { startBackend } from '../../native/server.ts';
import { createInferenceClient } from '../../src/inference/index.ts';
import type { Backend } from '../../src/inference/backend.ts';
import type { CallInfo } from '../../native/service.ts';
import type { ServiceError } from '../../src/errors.ts';
import { startChatProvider } from '../fixtures/chat-provider.ts';
import type { ProvidersConfig } from '../../native/config.ts';

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

const ask = (content: string) => ({ model: 'llm-medium', messages: [{ role: pb.Role.USER, content }] });
const traceparent = (i: number) => `00-${'a'.repeat(31)}${i}-${'b'.repeat(16)}-01`;
const QUESTIONS = ['say "one two three"', 'say "a second reply"', 'What time is it?'];
/** Events as plain values (case and value), comparable across the two paths. */
const plain = (events: pb.GenerateResponse[]) => events.map((e) => JSON.parse(JSON.stringify({ case: e.event.case, value: e.event.value }, (_k, v) => (typeof v === 'bigint' ? String(v) : v))));

async function setup(t: { teardown(f: () => unknown): void }, multiplexGeneration: boolean, providers?: ProvidersConfig) {
  const calls: CallInfo[] = [];
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', multiplexGeneration, providers, onCall: (c) => calls.push(c) });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const conn = client.backendFor('chat').backend;
  // Generations started before the backend's Capabilities has answered use their own calls;
  // these tests start once it has.
  await conn.generationMultiplexKnown();
  return { backend, client, calls, conn };
}

/** The chat provider's completion requests (not its model listing). */
const completions = (chat: { requests: { url: string; closed: Promise<{ early: boolean }> }[] }) => chat.requests.filter((r) => r.url.endsWith('/chat/completions'));

/** The events `req` gives on a Generate call of its own (the raw gRPC client). */
const perCall = (conn: Backend, req: ReturnType<typeof ask>) =>
  collect(conn.client.generate(create(pb.GenerateRequestSchema, req)) as AsyncIterable<pb.GenerateResponse>);

t.test('a backend offering GenerateStreams serves several generations on one call, each its own', async (t) => {
  const { client, calls, conn } = await setup(t, true);
  t.ok((await client.capabilities()).rpcs.includes('GenerateStreams'), 'the native backend lists GenerateStreams');
  const expected = await Promise.all(QUESTIONS.map((q) => perCall(conn, ask(q))));
  calls.length = 0;

  const got = await Promise.all(QUESTIONS.map((q, i) => collect(client.generate(ask(q), { requestId: `session-${i}`, teamId: 'team-1', traceparent: traceparent(i) }))));
  t.same(got.map(plain), expected.map(plain), 'each generation got the events of its own request, as on a Generate call');
  t.match(got[0].map((e) => e.event.case), ['textDelta', 'textDelta', 'textDelta', 'finish'], 'text deltas, then the finish');
  t.equal(calls.filter((c) => c.rpc === 'generateStreams').length, 1, 'one GenerateStreams call carried them');
  const streams = calls.filter((c) => c.rpc === 'generate');
  t.same(
    streams.map((c) => [c.requestId, c.teamId, c.traceparent, (c.request as pb.GenerateRequest).messages[0].content]).sort(),
    QUESTIONS.map((q, i) => [`session-${i}`, 'team-1', traceparent(i), q]).sort(),
    "each generation reached the backend with its own request id, team, traceparent and request",
  );
  t.equal(conn.generationStreams.open, 0, 'finished generations are not open any more');

  const more = await collect(client.generate(ask('say "again"'), { requestId: 'session-9' }));
  t.equal(more.at(-1)?.event.case, 'finish', 'a later generation is served');
  t.equal(calls.filter((c) => c.rpc === 'generateStreams').length, 1, 'on the same call');
});

t.test("one generation's failure ends it alone, with the error a Generate call gives", async (t) => {
  const { client } = await setup(t, true);
  const own = await setup(t, false);
  const errorOf = (c: typeof client, req: Parameters<typeof client.generate>[0]) =>
    collect(c.generate(req)).then(
      () => null,
      (e: ServiceError) => ({ name: e.name, code: e.code, status: e.status, message: e.message, fields: e.fields }),
    );
  const bad = { model: 'llm-medium', messages: [{ role: pb.Role.USER, content: 'hi' }], tools: [{ name: '' }] };
  const failed = errorOf(client, bad);
  const fine = collect(client.generate(ask('say "still here"')));
  const err = await failed;
  t.match(err, { status: 422, fields: [{ loc: ['body', 'tools', '0', 'name'] }] }, 'a tool without a name fails that generation, naming the field');
  t.same(err, await errorOf(own.client, bad), 'as on a Generate call of its own');
  t.equal((await fine).at(-1)?.event.case, 'finish', 'the other generation finished');
  const empty = { model: 'llm-medium', messages: [] };
  const invalid = await errorOf(client, empty);
  t.match(invalid, { status: 422, message: 'must not be empty', fields: [{ loc: ['body', 'messages'] }] }, 'a request without messages is refused, naming the field');
  t.same(invalid, await errorOf(own.client, empty), 'as on a Generate call of its own');
});

t.test('leaving a generation early cancels it on the backend, and the call serves the next', async (t) => {
  const chat = await startChatProvider();
  t.teardown(() => chat.close());
  const { client, conn } = await setup(t, true, { llm: { kind: 'openai', baseUrl: chat.base, apiKey: 'sk-test', model: 'fixture' }, firstByteTimeoutMs: 5000 });
  chat.fault = 'trickle'; // streams "more " every 50 ms until its request is closed
  const ac = new AbortController();
  const pieces: string[] = [];
  const read = (async () => {
    for await (const e of client.generate(ask('talk forever'), { signal: ac.signal })) {
      if (e.event.case === 'textDelta') pieces.push(e.event.value);
      if (pieces.length === 3) ac.abort();
    }
  })();
  t.match(await read.then(() => null, (e: unknown) => e), { name: 'AbortError' }, 'the reader sees its abort');
  t.equal(pieces.length, 3, 'nothing is read after the abort');
  t.same(await completions(chat)[0].closed, { early: true }, "the backend stopped the provider's request");
  t.equal(conn.generationStreams.open, 0, 'the generation is no longer open');

  let n = 0;
  for await (const e of client.generate(ask('and again'))) {
    if (e.event.case === 'textDelta' && ++n === 2) break; // leaving the loop cancels too
  }
  t.same(await completions(chat)[1].closed, { early: true }, 'leaving the loop stopped the second request');
  chat.fault = null;
  const last = await collect(client.generate(ask('say "done now"')));
  t.equal(last.map((e) => (e.event.case === 'textDelta' ? e.event.value : '')).join('').trim(), 'done now', 'the next generation is answered in full');
});

for (const multiplexGeneration of [true, false]) {
  t.test(`the backend going away mid-reply fails every generation${multiplexGeneration ? ' on the call, as it fails calls' : ' (one call each)'}`, async (t) => {
    const chat = await startChatProvider();
    t.teardown(() => chat.close());
    const { client, backend, conn } = await setup(t, multiplexGeneration, { llm: { kind: 'openai', baseUrl: chat.base, apiKey: 'sk-test', model: 'fixture' }, firstByteTimeoutMs: 5000 });
    chat.fault = 'trickle';
    const open = [0, 1].map(() => {
      let deltas = 0;
      const done = (async () => {
        for await (const e of client.generate(ask('talk forever'))) if (e.event.case === 'textDelta') deltas++;
      })().then(() => null, (e: unknown) => e);
      return { done, deltas: () => deltas };
    });
    while (open.some((o) => o.deltas() === 0)) await new Promise((r) => setTimeout(r, 20));
    await backend.close(); // cancels the calls in progress
    for (const o of open) t.match(await o.done, { status: 502, message: 'Inference backend cancelled the call' }, 'a generation fails as its call is cancelled');
    t.equal(conn.inFlight, 0, 'their slots are back');
    t.equal(conn.generationStreams.open, 0, 'no generation left open');
  });
}

t.test('a backend not offering GenerateStreams gets one Generate call per generation', async (t) => {
  const { client, calls, conn } = await setup(t, false);
  t.notOk((await client.capabilities()).rpcs.includes('GenerateStreams'), 'not listed');
  const got = await Promise.all(QUESTIONS.map((q, i) => collect(client.generate(ask(q), { requestId: `session-${i}` }))));
  t.same(got.map((g) => g.at(-1)?.event.case), ['finish', 'finish', 'finish'], 'every generation finished');
  t.equal(calls.filter((c) => c.rpc === 'generateStreams').length, 0, 'no shared call');
  t.same(calls.filter((c) => c.rpc === 'generate').map((c) => c.requestId).sort(), ['session-0', 'session-1', 'session-2'], 'a Generate call each');
  t.equal(conn.generationStreams.messages, 0, 'nothing written on a shared call');
});

t.test('a generation after the client closed fails at once and opens no connection', async (t) => {
  const { client, calls } = await setup(t, true);
  await client.close();
  const before = calls.length;
  const err = await collect(client.generate(ask('hello'))).then(() => null, (e: ServiceError) => e);
  t.match(err, { status: 503 }, 'refused as unavailable');
  t.equal(calls.length, before, 'the backend saw no call');
});

