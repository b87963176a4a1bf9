// The platform's client opens a connection of its own for the calls many streams share (the
// muxes'), with a receive window of SHARED_RECEIVE_WINDOW_BYTES on the connection and on each
// stream (docs/inference.md, "Flow control"): with HTTP/2's 64 KB the one SynthesizeStreams call
// that carries every session's replies waited for a window update every 64 KB, and a new
// reply's first audio queued behind the others' (bench/README.md, sixteenth pass (c)). The pool's
// connections keep 64 KB, which bounds what a per-call stream whose reader stopped holds.
// A bare HTTP/2 server stands in for the backend: it lists the shared RPCs, answers nothing
// else, and reads what each of the client's connections allows it to send.
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { create, toBinary } from '@bufbuild/protobuf';
import t from 'tap';
import { Backend, SHARED_RECEIVE_WINDOW_BYTES } from '../../src/inference/backend.ts';
import { CapabilitiesResponseSchema } from '../../src/gen/inference/v1/inference_pb.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('shared calls ride a connection with a wide receive window; per-call streams keep 64 KB', async (t) => {
  const server = http2.createServer();
  const calls = new Map<http2.ServerHttp2Session, string[]>();
  server.on('session', (s) => calls.set(s, []));
  server.on('stream', (stream, headers) => {
    const path = String(headers[':path']);
    calls.get(stream.session as http2.ServerHttp2Session)!.push(path.slice(path.lastIndexOf('/') + 1));
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.on('error', () => {});
    if (!path.endsWith('/Capabilities')) return; // the other calls stay open, unanswered
    const body = toBinary(CapabilitiesResponseSchema, create(CapabilitiesResponseSchema, { contractVersion: 'v1', rpcs: ['SynthesizeStreams', 'TranscribeStreams', 'SynthesizeStream'] }));
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    frame.set(body, 5);
    stream.end(frame);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const backend = new Backend(`127.0.0.1:${(server.address() as AddressInfo).port}`, { channels: 1, connectTimeoutMs: 5000 });
  t.teardown(async () => {
    backend.close();
    for (const s of calls.keys()) s.destroy();
    await new Promise((r) => server.close(r));
  });
  t.ok(SHARED_RECEIVE_WINDOW_BYTES > 65_535, 'wider than HTTP/2\'s default');
  t.equal(await backend.synthesisMultiplexKnown(), true, 'the backend lists SynthesizeStreams');
  const stream = await backend.synthesizeStream({ model: 'm' });
  t.teardown(() => stream.cancel());
  for (let i = 0; i < 200 && ![...calls.values()].some((c) => c.includes('SynthesizeStreams')); i++) await sleep(10);
  const shared = [...calls].find(([, c]) => c.includes('SynthesizeStreams'))?.[0];
  const pool = [...calls].find(([, c]) => c.includes('Capabilities'))?.[0];
  if (!shared || !pool) return void t.fail('the client opened a SynthesizeStreams call and asked Capabilities', { calls: [...calls.values()] });
  t.not(shared, pool, 'the shared call has a connection of its own');
  for (let i = 0; i < 100 && shared.state.remoteWindowSize !== SHARED_RECEIVE_WINDOW_BYTES; i++) await sleep(10);
  t.equal(shared.remoteSettings.initialWindowSize, SHARED_RECEIVE_WINDOW_BYTES, 'the shared connection: each stream\'s window (the client\'s SETTINGS)');
  t.equal(shared.state.remoteWindowSize, SHARED_RECEIVE_WINDOW_BYTES, 'the shared connection: the connection\'s window (its window update)');
  t.equal(pool.remoteSettings.initialWindowSize, 65_535, 'a pool connection: HTTP/2\'s 64 KB per stream');
});
