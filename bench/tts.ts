// Synthesis benchmark: POST /v1/tts through the whole platform (HTTP, auth, validation,
// synthesis actor, gRPC, encoding, backpressure) beside the same synthesis requested
// directly from the backend over gRPC, in the same run, at several concurrencies, for
// wav, mp3 and opus. The backend is the native one (synthetic engine, zero delay, fast
// pacing) in a child process; the platform and the load generator share this process.
//
//   npx tsx bench/tts.ts [--levels 1,100,1000] [--formats wav,mp3,opus]
//                        [--text "..."] [--short-text "..."]   (--short-text at concurrency ≥ 1000)
//
// Figures: time to first byte (platform: first body bytes over HTTP; direct: first gRPC
// chunk), per-stream completion time, throughput (streams/s, audio seconds/s), the
// latency the platform adds (platform TTFB percentile minus direct first-chunk
// percentile), and CPU per stream of the platform's process (the HTTP load generator runs
// in a child process). Prints one JSON object.
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { create } from '@bufbuild/protobuf';
import { AudioEncoding, SynthesizeRequestSchema } from '../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient } from '../src/inference/grpc-service.ts';
import { spawnNativeBackend } from '../src/inference/index.ts';
import { createLogger } from '../src/log.ts';
import { randomSchema, startPlatform } from '../src/platform.ts';

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '1,100,1000' },
    formats: { type: 'string', default: 'wav,mp3,opus' },
    text: { type: 'string', default: 'The quick brown fox jumps over the lazy dog.' },
    'short-text': { type: 'string', default: 'Hello there.' },
    // A real Postgres keeps the embedded store's work (PGlite runs in this process) out of the figures.
    'database-url': { type: 'string', default: process.env.DATABASE_URL ?? '' },
    rounds: { type: 'string', default: '20' },
  },
});
const LEVELS = values.levels!.split(',').map(Number);
const FORMATS = values.formats!.split(',') as ('wav' | 'mp3' | 'opus')[];
const rateOf = (f: string) => (f === 'opus' ? 48000 : 44100);
const textFor = (c: number) => (c >= 1000 ? values['short-text']! : values.text!);


const backend = await spawnNativeBackend({ engine: 'synthetic', env: { PARLEY_SYNTHETIC_TTFA_MS: '0', PARLEY_SYNTHETIC_PACING: 'fast' }, stderr: 'ignore' });
const key = `pk_bench_${randomBytes(16).toString('hex')}`;
const platform = await startPlatform({
  env: { PARLEY_SPEECH_CONCURRENCY: '100000' }, // the bench measures the platform, not the per-team cap
  config: { host: '127.0.0.1', port: 0, dataDir: 'memory', databaseUrl: values['database-url'] || undefined, bootstrapKey: key, logLevel: 'silent', startNativeBackend: false, backendAddress: backend.address },
  dbSchema: values['database-url'] ? randomSchema() : undefined,
  log: createLogger({ level: 'silent' }),
});
const raw = createGrpcClient(backend.address, undefined, { 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
await new Promise<void>((r, j) => raw.waitForReady(Date.now() + 5000, (e) => (e ? j(e) : r())));

type Path = 'platform' | 'direct';
interface One { ttfbMs: number; totalMs: number; bytes: number }

// The HTTP load generator runs in a child process (plain node:http, keep-alive), so this
// process serves requests and nothing else and its CPU time is the platform's own cost.
const LOADGEN = `
const http = require('node:http');
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
function one(o) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let ttfbMs = -1, bytes = 0;
    const req = http.request({ host: '127.0.0.1', port: o.port, path: '/v1/tts', method: 'POST', agent,
      headers: { Authorization: 'Bearer ' + o.key, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(o.body) } }, (res) => {
      if (res.statusCode !== 200) { res.resume(); return reject(new Error('status ' + res.statusCode)); }
      res.on('data', (d) => { if (ttfbMs < 0) ttfbMs = performance.now() - t0; bytes += d.length; });
      res.on('end', () => resolve({ ttfbMs, totalMs: performance.now() - t0, bytes }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(o.body);
  });
}
process.on('message', async (o) => {
  const results = await Promise.allSettled(Array.from({ length: o.concurrency }, () => one(o)));
  process.send(results.map((r) => r.status === 'fulfilled' ? r.value : { error: String(r.reason) }));
});
`;
const loadgen = spawn(process.execPath, ['-e', LOADGEN], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
function platformBatch(format: string, text: string, concurrency: number): Promise<(One | { error: string })[]> {
  return new Promise((resolve) => {
    loadgen.once('message', (m) => resolve(m as (One | { error: string })[]));
    loadgen.send({ port: platform.port, key, body: JSON.stringify({ text, format }), concurrency });
  });
}

async function direct(format: string, text: string): Promise<One> {
  const t0 = performance.now();
  let ttfbMs = -1;
  let bytes = 0;
  const call = raw.synthesize(create(SynthesizeRequestSchema, { text, model: 's2.1-pro', chunkLength: 200, output: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: rateOf(format) } }));
  for await (const c of call as AsyncIterable<{ audio: Uint8Array }>) {
    if (ttfbMs < 0) ttfbMs = performance.now() - t0;
    bytes += c.audio.length;
  }
  return { ttfbMs, totalMs: performance.now() - t0, bytes };
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return +s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!.toFixed(2);
};

async function level(path: Path, format: string, concurrency: number) {
  const rounds = concurrency === 1 ? Number(values.rounds) : 1;
  const text = textFor(concurrency);
  const ttfb: number[] = [];
  const total: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let r = 0; r < rounds; r++) {
    const results: (One | { error: string })[] =
      path === 'platform'
        ? await platformBatch(format, text, concurrency)
        : (await Promise.allSettled(Array.from({ length: concurrency }, () => direct(format, text)))).map((x) => (x.status === 'fulfilled' ? x.value : { error: String(x.reason) }));
    for (const x of results) {
      if ('error' in x) {
        errors++;
        firstError ??= x.error;
      } else {
        ttfb.push(x.ttfbMs);
        total.push(x.totalMs);
      }
    }
  }
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const streams = ttfb.length;
  return {
    streams,
    errors,
    ...(firstError ? { firstError } : {}),
    ttfbMs: { p50: pct(ttfb, 50), p99: pct(ttfb, 99), max: pct(ttfb, 100) },
    streamMs: { p50: pct(total, 50), p99: pct(total, 99) },
    streamsPerSecond: +((streams / wallMs) * 1000).toFixed(1),
    // CPU of this process per stream: the platform (HTTP, actor, gRPC client, encoding) on
    // the platform path; the bare gRPC client on the direct path.
    cpuMsPerStream: +((cpu.user + cpu.system) / 1000 / Math.max(1, streams)).toFixed(3),
    wallMs: Math.round(wallMs),
  };
}

// Audio seconds per stream, measured once per format and text (for throughput in audio s/s).
async function audioSeconds(format: string, text: string): Promise<number> {
  const d = await direct(format, text);
  return d.bytes / 2 / rateOf(format);
}

// Warm-up: JIT, connections, the MP3 encoder's WASM, PGlite caches.
for (const f of FORMATS) for (let i = 0; i < 5; i++) await Promise.all([platformBatch(f, values.text!, 1), direct(f, values.text!)]);

const started = performance.now();
const results: Record<string, unknown> = {};
for (const format of FORMATS) {
  for (const c of LEVELS) {
    const d = await level('direct', format, c);
    const p = await level('platform', format, c);
    const secs = await audioSeconds(format, textFor(c));
    const added = (q: 'p50' | 'p99') => (p.ttfbMs[q] !== null && d.ttfbMs[q] !== null ? +(p.ttfbMs[q]! - d.ttfbMs[q]!).toFixed(2) : null);
    results[`${format}_c${c}`] = {
      text: textFor(c),
      audioSecondsPerStream: +secs.toFixed(2),
      addedTtfbMs: { p50: added('p50'), p99: added('p99') },
      addedCpuMsPerStream: +(p.cpuMsPerStream - d.cpuMsPerStream).toFixed(3),
      platform: { ...p, audioSecondsPerSecond: +(p.streamsPerSecond * secs).toFixed(1) },
      direct: { ...d, audioSecondsPerSecond: +(d.streamsPerSecond * secs).toFixed(1) },
    };
  }
}

raw.close();
loadgen.kill();
await platform.close();
await backend.stop();
process.stdout.write(
  `${JSON.stringify(
    {
      bench: 'tts',
      engine: 'synthetic (zero delay, fast pacing), native backend as a child process',
      note: 'HTTP load generator in a child process; cpuMsPerStream is this process: the platform (platform path) or the bare gRPC client (direct path); addedTtfbMs compares percentiles of the two paths',
      store: values['database-url'] ? 'postgres' : 'pglite (in this process)',
      machine: { cpus: os.cpus().length, node: process.version, loadavg: os.loadavg().map((x) => +x.toFixed(2)) },
      totalSeconds: Math.round((performance.now() - started) / 1000),
      results,
    },
    null,
    2,
  )}\n`,
);
