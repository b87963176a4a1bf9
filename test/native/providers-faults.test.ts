// Provider failures through the native backend's engines, each against a local fixture
// (test/fixtures/provider-faults.ts): provider down, 401, 429 with a retry delay, 500 before
// and in the middle of a stream, a first byte later than the deadline, and the platform
// cancelling mid-stream. Each ends with the contract's mapped status (docs/providers.md
// "Errors"), never the key in a message, and nothing left running: the backend's active calls
// back at 0 and every provider connection closed.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import net from 'node:net';
import { AudioEncoding, GenerateRequestSchema, HealthRequestSchema, Role, SynthesizeRequestSchema, TranscribeRequestSchema, TranscribeStreamRequestSchema, type HealthResponse } from '../../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient, type InferenceGrpcClient } from '../../src/inference/grpc-service.ts';
import { startBackend, type Backend } from '../../native/server.ts';
import type { ProvidersConfig } from '../../native/config.ts';
import { startFaultyProvider, type ProviderFault } from '../fixtures/provider-faults.ts';

const KEY = 'sk-fault-secret-9876';
const fixture = await startFaultyProvider();

async function backendFor(providers: Omit<ProvidersConfig, 'firstByteTimeoutMs'>, firstByteTimeoutMs = 1500): Promise<{ b: Backend; client: InferenceGrpcClient }> {
  const b = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', providers: { ...providers, firstByteTimeoutMs } });
  return { b, client: createGrpcClient(b.address) };
}
const http = (base: string): Omit<ProvidersConfig, 'firstByteTimeoutMs'> => ({
  llm: { kind: 'openai', baseUrl: base, apiKey: KEY, model: 'm' },
  tts: { kind: 'openai', baseUrl: base, apiKey: KEY, model: 'tts-1', voice: 'alloy' },
  stt: { kind: 'openai', baseUrl: base, apiKey: KEY, model: 'whisper-1' },
});

const main = await backendFor(http(fixture.base));
const realtime = await backendFor({ stt: { kind: 'openai-realtime', baseUrl: fixture.base, apiKey: KEY, model: 'gpt-4o-transcribe' } });
t.teardown(async () => {
  for (const x of [main, realtime]) {
    x.client.close();
    await x.b.close();
  }
  await fixture.close();
});

interface Outcome {
  code: grpc.status | 'ok';
  details: string;
  metadata?: grpc.Metadata;
}
const outcome = (err: unknown): Outcome => {
  const e = err as grpc.ServiceError;
  return { code: e.code, details: e.details, metadata: e.metadata };
};

type Rpc = 'generate' | 'synthesize' | 'transcribe';
const RPCS: Rpc[] = ['generate', 'synthesize', 'transcribe'];

/** Runs one call to its end; `onFirst` sees the call at its first response (to cancel it). */
async function run(client: InferenceGrpcClient, rpc: Rpc, o: { deadlineMs?: number; onFirst?: (cancel: () => void) => void } = {}): Promise<Outcome> {
  const opts = o.deadlineMs ? { deadline: Date.now() + o.deadlineMs } : {};
  if (rpc === 'transcribe') {
    return new Promise<Outcome>((resolve) => {
      const call = client.transcribe(new grpc.Metadata(), opts, (err) => resolve(err ? outcome(err) : { code: 'ok', details: '' }));
      call.write(create(TranscribeRequestSchema, { config: { input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } }, audio: new Uint8Array(32_000) }));
      call.end();
    });
  }
  const call = rpc === 'generate'
    ? client.generate(create(GenerateRequestSchema, { messages: [{ role: Role.USER, content: 'Hello' }] }), new grpc.Metadata(), opts)
    : client.synthesize(create(SynthesizeRequestSchema, { text: 'Hello there.', output: { sampleRateHz: 16000 } }), new grpc.Metadata(), opts);
  try {
    let first = true;
    for await (const _ of call) {
      if (first) o.onFirst?.(() => call.cancel());
      first = false;
    }
    return { code: 'ok', details: '' };
  } catch (err) {
    return outcome(err);
  }
}

async function settled(t: Tap, x: { client: InferenceGrpcClient }, what: string) {
  let active = -1;
  for (let i = 0; i < 100 && (active !== 0 || fixture.open() > 0); i++) {
    active = (await new Promise<HealthResponse>((resolve, reject) => x.client.health(create(HealthRequestSchema), new grpc.Metadata(), {}, (e, r) => (e ? reject(e) : resolve(r!))))).activeCalls;
    if (active !== 0 || fixture.open() > 0) await new Promise((r) => setTimeout(r, 30));
  }
  t.equal(active, 0, `${what}: no call left active in the backend`);
  t.equal(fixture.open(), 0, `${what}: no provider connection left open`);
}
type Tap = Pick<typeof t, 'equal' | 'ok' | 'match' | 'notMatch'>;

async function each(t: Tap, fault: ProviderFault, check: (t: Tap, rpc: Rpc, o: Outcome, requests: number) => void, runOpts: Parameters<typeof run>[2] = {}) {
  fixture.fault = fault;
  for (const rpc of RPCS) {
    const before = fixture.requests.filter((r) => r.method === 'POST').length;
    const o = await run(main.client, rpc, runOpts);
    check(t, rpc, o, fixture.requests.filter((r) => r.method === 'POST').length - before);
    t.notMatch(o.details ?? '', /sk-fault/, `${rpc}: the key is never in the message`);
    await settled(t, main, rpc);
  }
  fixture.fault = null;
}

t.test('a provider that answers: each capability works through the fixture', async (t) => {
  await each(t, null, (t, rpc, o) => t.equal(o.code, 'ok', rpc));
});

t.test('provider down (connection refused): UNAVAILABLE, after one quick retry', async (t) => {
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const down = await backendFor(http(`http://127.0.0.1:${port}/v1`));
  t.teardown(async () => {
    down.client.close();
    await down.b.close();
  });
  for (const rpc of RPCS) {
    const o = await run(down.client, rpc);
    t.equal(o.code, grpc.status.UNAVAILABLE, rpc);
    t.match(o.details, new RegExp(`openai provider at 127\\.0\\.0\\.1:${port} \\(model [^)]+\\) is not answering \\(ECONNREFUSED\\)`), `${rpc}: names the provider and why`);
  }
});

t.test('401: FAILED_PRECONDITION naming the provider, never the key (nor the provider\'s words about it)', async (t) => {
  await each(t, '401', (t, rpc, o, n) => {
    t.equal(o.code, grpc.status.FAILED_PRECONDITION, rpc);
    t.match(o.details, /openai provider at 127\.0\.0\.1:\d+ \(model .+\) refused the credentials \(HTTP 401\): check the API key setting/, rpc);
    t.equal(n, 1, `${rpc}: not retried`);
  });
});

t.test('429: RESOURCE_EXHAUSTED with the provider\'s retry delay', async (t) => {
  await each(t, '429', (t, rpc, o) => {
    t.equal(o.code, grpc.status.RESOURCE_EXHAUSTED, rpc);
    t.match(o.details, /rate limit reached \(HTTP 429\), retry after 7 s/, rpc);
    t.equal(o.metadata?.get('retry-after-ms')[0], '7000', `${rpc}: the delay travels as retry-after-ms`);
  });
});

t.test('500 before the first byte: UNAVAILABLE after one retry', async (t) => {
  await each(t, '500', (t, rpc, o, n) => {
    t.equal(o.code, grpc.status.UNAVAILABLE, rpc);
    t.match(o.details, /failed \(HTTP 500\): boom/, rpc);
    t.equal(n, 2, `${rpc}: tried twice`);
  });
});

t.test('500 in the middle of a stream: UNAVAILABLE, not retried once bytes came', async (t) => {
  await each(t, '500-mid', (t, rpc, o, n) => {
    t.equal(o.code, grpc.status.UNAVAILABLE, rpc);
    t.equal(n, 1, `${rpc}: tried once`);
  });
});

t.test('first byte later than the deadline: DEADLINE_EXCEEDED, the provider request closed', async (t) => {
  fixture.slowMs = 3000;
  // The call's own deadline…
  await each(t, 'slow', (t, rpc, o) => t.equal(o.code, grpc.status.DEADLINE_EXCEEDED, `${rpc}: the call's deadline`), { deadlineMs: 400 });
  t.ok(fixture.requests.slice(-3).every((r) => r.done), 'the fixture saw each request closed');
  // …or, without one, the backend's provider timeout (1.5 s here).
  await each(t, 'slow', (t, rpc, o) => {
    t.equal(o.code, grpc.status.DEADLINE_EXCEEDED, `${rpc}: the provider timeout`);
    t.match(o.details, /sent nothing before the deadline/);
  });
});

t.test('the platform cancelling mid-stream: the provider sees its request closed', async (t) => {
  fixture.fault = 'trickle';
  for (const rpc of ['generate', 'synthesize'] as const) {
    const o = await run(main.client, rpc, { onFirst: (cancel) => cancel() });
    t.equal(o.code, grpc.status.CANCELLED, rpc);
    const closed = await fixture.requests.filter((r) => r.method === 'POST').at(-1)!.closed;
    t.ok(closed.early, `${rpc}: the fixture saw the request closed before its end`);
    await settled(t, main, rpc);
  }
  fixture.fault = null;
});

t.test('realtime transcription socket: a refused handshake fails the stream at once; a cancelled stream closes the socket', async (t) => {
  const stream = () => {
    const call = realtime.client.transcribeStream();
    call.write(create(TranscribeStreamRequestSchema, { event: { case: 'config', value: { input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } } } }));
    return call;
  };
  fixture.fault = '401';
  const refused = stream();
  const err = await new Promise<grpc.ServiceError>((resolve) => {
    refused.on('error', resolve);
    refused.on('data', () => {});
  });
  t.equal(err.code, grpc.status.FAILED_PRECONDITION);
  t.match(err.details, /refused the credentials \(HTTP 401\)/);
  t.notMatch(err.details, /sk-fault/);
  await settled(t, realtime, 'refused socket');

  fixture.fault = null;
  const call = stream();
  call.on('error', () => {});
  call.on('data', () => {});
  for (let i = 0; i < 50 && !fixture.requests.some((r) => r.socket && !r.done); i++) await new Promise((r) => setTimeout(r, 20));
  const sock = fixture.requests.filter((r) => r.socket).at(-1)!;
  t.notOk(sock.done, 'the socket is open while the stream is');
  t.equal(sock.headers.authorization, `Bearer ${KEY}`, 'the key in the handshake header');
  t.match(sock.url, /^\/v1\/realtime\?intent=transcription/);
  call.cancel();
  await sock.closed;
  t.pass('cancelling the stream closed the provider socket');
  await settled(t, realtime, 'cancelled socket');
});
