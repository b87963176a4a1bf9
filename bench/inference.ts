// Inference client benchmark: first-chunk latency and chunk throughput of Synthesize
// through the platform's client (src/inference) and through a bare grpc-js client, side
// by side, against the native backend's synthetic engine at zero delay (fast pacing),
// running as a child process like the embedded default.
//
//   npx tsx bench/inference.ts [--text "..."] [--levels 1,100,1000]
// Prints one JSON object.
import { parseArgs } from 'node:util';
import os from 'node:os';
import { create } from '@bufbuild/protobuf';
import { SynthesizeRequestSchema } from '../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient } from '../src/inference/grpc-service.ts';
import { createInferenceClient, spawnNativeBackend } from '../src/inference/index.ts';

const { values } = parseArgs({
  options: {
    text: { type: 'string', default: 'The quick brown fox jumps over the lazy dog.' },
    levels: { type: 'string', default: '1,100,1000' },
  },
});
const TEXT = values.text!;
const LEVELS = values.levels!.split(',').map(Number);

const backend = await spawnNativeBackend({ engine: 'synthetic', env: { PARLEY_SYNTHETIC_TTFA_MS: '0', PARLEY_SYNTHETIC_PACING: 'fast' }, stderr: 'ignore' });
const client = createInferenceClient({ nativeAddress: backend.address, backends: '', backend: { maxConcurrentCalls: 2000 } });
const raw = createGrpcClient(backend.address, undefined, { 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
await new Promise<void>((r, j) => raw.waitForReady(Date.now() + 5000, (e) => (e ? j(e) : r())));

type Path = 'client' | 'direct';

/** One call; returns ms to first chunk and the chunk count. */
async function one(path: Path): Promise<{ firstMs: number; chunks: number }> {
  const t0 = performance.now();
  let firstMs = -1;
  let chunks = 0;
  const stream = path === 'client' ? client.synthesize({ text: TEXT, model: 's2.1-pro' }) : raw.synthesize(create(SynthesizeRequestSchema, { text: TEXT, model: 's2.1-pro' }));
  for await (const _ of stream as AsyncIterable<unknown>) {
    if (chunks++ === 0) firstMs = performance.now() - t0;
  }
  return { firstMs, chunks };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return +s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))].toFixed(2);
};

interface Samples {
  first: number[];
  chunks: number;
  errors: number;
  wallMs: number;
  calls: number;
}

async function trial(path: Path, concurrency: number, rounds: number, into: Samples) {
  const t0 = performance.now();
  for (let r = 0; r < rounds; r++) {
    const results = await Promise.allSettled(Array.from({ length: concurrency }, () => one(path)));
    for (const x of results) {
      if (x.status === 'fulfilled') {
        into.first.push(x.value.firstMs);
        into.chunks += x.value.chunks;
      } else into.errors++;
    }
  }
  into.wallMs += performance.now() - t0;
  into.calls += rounds * concurrency;
}

function summary(x: Samples) {
  return {
    calls: x.calls,
    errors: x.errors,
    firstChunkMs: { p50: pct(x.first, 50), p95: pct(x.first, 95), p99: pct(x.first, 99), max: pct(x.first, 100) },
    chunksPerSecond: Math.round((x.chunks / x.wallMs) * 1000),
    chunksPerCall: Math.round(x.chunks / Math.max(1, x.first.length)),
    wallMs: Math.round(x.wallMs),
  };
}

/** Both paths at one concurrency, in alternating trials (direct, client, direct, client) so drift in machine load hits both alike. */
async function level(concurrency: number) {
  const rounds = concurrency === 1 ? 100 : concurrency <= 100 ? 3 : 1;
  const acc: Record<Path, Samples> = {
    direct: { first: [], chunks: 0, errors: 0, wallMs: 0, calls: 0 },
    client: { first: [], chunks: 0, errors: 0, wallMs: 0, calls: 0 },
  };
  for (let i = 0; i < 2; i++) {
    await trial('direct', concurrency, rounds, acc.direct);
    await trial('client', concurrency, rounds, acc.client);
  }
  return { direct: summary(acc.direct), client: summary(acc.client) };
}

// Warm both paths (JIT, connections).
for (let i = 0; i < 20; i++) await Promise.all([one('client'), one('direct')]);

const loadBefore = os.loadavg()[0];
const results: Record<string, Awaited<ReturnType<typeof level>>> = {};
for (const c of LEVELS) results[`concurrency_${c}`] = await level(c);

raw.close();
await client.close();
await backend.stop();
process.stdout.write(
  `${JSON.stringify({
    bench: 'inference',
    engine: 'synthetic (zero delay, fast pacing), backend as a child process',
    text: TEXT,
    chunkMs: 100,
    machine: { cpus: os.cpus().length, node: process.version, loadAverage1mBefore: +loadBefore.toFixed(2), loadAverage1mAfter: +os.loadavg()[0].toFixed(2) },
    results,
  }, null, 2)}\n`,
);
