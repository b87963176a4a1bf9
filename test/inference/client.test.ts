// The platform's inference client against the real native backend (synthetic engine).
import t from 'tap';
import net from 'node:net';
import { startBackend } from '../../native/server.ts';
import { ServiceError } from '../../src/errors.ts';
import { createInferenceClient, pb } from '../../src/inference/index.ts';

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

const failure = (p: Promise<unknown>) => p.then(() => ({}) as ServiceError, (e: ServiceError) => e);

const collect = async <T>(it: AsyncIterable<T>) => {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
};

t.test('calls reach the backend with metadata and the backend model name', async (t) => {
  const seen: { rpc: string; traceparent: string; requestId: string; teamId: string }[] = [];
  // The metadata only (the hook also carries the decoded request of single-request calls).
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', onCall: ({ rpc, traceparent, requestId, teamId }) => seen.push({ rpc, traceparent, requestId, teamId }) });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const meta = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', requestId: 'req-1', teamId: 'team-9' };
  const chunks = await collect(client.synthesize({ text: 'Hi there.', model: 'unknown-model' }, meta));
  t.ok(chunks.at(-1)?.final, 'an unknown model id is served by s2.1-pro');
  t.same(seen.at(-1), { rpc: 'synthesize', ...meta }, 'traceparent, x-request-id and x-team-id reach the backend');

  const events = await collect(client.generate({ model: 'llm-high', messages: [{ role: pb.Role.USER, content: 'say "ok then"' }] }, meta));
  const text = events.flatMap((e) => (e.event.case === 'textDelta' ? [e.event.value] : [])).join('');
  t.equal(text, 'ok then', 'the chat id reaches the scripted model');

  const stream = await client.synthesizeStream({ model: 's2-pro' }, meta);
  stream.send('Streaming works. ');
  stream.flush(1);
  stream.end();
  const got = await collect(stream);
  t.ok(got.some((e) => e.event.case === 'flushed'), 'SynthesizeStream flushes');

  const audio = Buffer.concat(got.flatMap((e) => (e.event.case === 'chunk' ? [e.event.value.audio] : [])));
  const rate = got.find((e) => e.event.case === 'chunk')!.event.value as pb.AudioChunk;
  const r = await client.transcribe({ input: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: rate.sampleRateHz }, language: 'en' }, audio, meta);
  t.equal(r.text, 'Streaming works. ', 'Transcribe through the client');
  t.equal(r.language, 'en', 'language echoed');

  const live = await client.transcribeStream({ input: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: rate.sampleRateHz } }, meta);
  live.sendAudio(audio);
  live.commit();
  live.end();
  const committed = (await collect(live)).flatMap((e) => (e.event.case === 'committed' ? [e.event.value.text] : [])).join('');
  t.equal(committed, 'Streaming works. ', 'TranscribeStream through the client');

  const [h] = await client.health();
  t.ok(h.ok, 'health check answers');
  t.equal((await client.capabilities()).contractVersion, 'v1', 'capabilities');
});

t.test('backend errors arrive as ServiceErrors', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  await t.rejects(collect(client.synthesize({ text: 'Hi', referenceId: 'nope' })), { status: 400, message: 'Reference not found' });
  const speed = await failure(collect(client.synthesize({ text: 'Hi', prosody: { speed: 9 } })));
  t.same([speed.status, speed.fields?.[0].loc], [422, ['body', 'prosody', 'speed']], 'a bad field is a 422 naming it');
  t.equal((await failure(collect(client.synthesize({ text: '' })))).status, 422, 'empty text is a 422');
  await t.rejects(
    client.transcribe({ input: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } }, new Uint8Array(Buffer.from(new Int16Array(16000).map((_, i) => Math.round(8000 * Math.sin(i / 3))).buffer))),
    { status: 400, message: /needs a speech-to-text provider \(set PARLEY_STT_PROVIDER/ },
    'real (non-synthetic) audio: a 400 (not retried) naming the settings that enable recognition',
  );
  t.equal((await failure(collect(client.synthesize({ text: 'A long text. '.repeat(200) }, { timeoutMs: 1 })))).status, 504, 'a missed deadline is a 504');
});

t.test('a backend that is down gives 503 quickly, never a hang', async (t) => {
  const port = await freePort();
  const client = createInferenceClient({ nativeAddress: `127.0.0.1:${port}`, backends: '', backend: { connectTimeoutMs: 500 } });
  t.teardown(() => client.close());
  await t.rejects(collect(client.synthesize({ text: 'Hello.' })), { status: 503, code: 'unavailable' });
  t.equal((await failure(client.transcribe({}, new Uint8Array(0)))).status, 503, 'Transcribe too');
  const [h] = await client.health();
  t.equal(h.ok, false, 'health reports the backend down');
});

t.test('the per-backend concurrency limit answers 503 busy after a short wait', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', pacing: 'realtime' });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '', backend: { maxConcurrentCalls: 1, queueTimeoutMs: 50 } });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const ac = new AbortController();
  const first = client.synthesize({ text: 'A long sentence that plays in real time. '.repeat(5) }, { signal: ac.signal })[Symbol.asyncIterator]();
  await first.next();
  const err = await collect(client.synthesize({ text: 'Second.' })).catch((e) => e);
  t.ok(err instanceof ServiceError && err.status === 503 && err.headers?.['Retry-After'] === '1', 'the second call is refused with 503 and Retry-After');
  ac.abort();
  await first.next().catch(() => {});
  const ok = await collect(client.synthesize({ text: 'Third.' }));
  t.ok(ok.at(-1)?.final, 'the slot is free again after the first call ends');
});
