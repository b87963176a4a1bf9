// Synthesis benchmark: POST /v1/tts through the whole platform (HTTP, auth, validation,
// synthesis actor, gRPC, encoding, backpressure) beside the same synthesis requested
// directly from the backend over gRPC, in the same run. Three parts, one JSON object:
//
// steady (issue 20's goal): `--streams` (100) concurrent wav streams through the platform
//   for `--seconds` (30, after `--warmup-seconds` 5), each paced at real time, a new one
//   starting as one ends, while `--direct-streams` (20) streams ask the same backend
//   directly, at the same time, from the same load generator. "Paced at real time" means
//   what a real-time synthesis engine does: the backend (native, synthetic engine,
//   PARLEY_SYNTHETIC_PACING=realtime, zero time to first audio) sends each 100 ms chunk no
//   earlier than it plays, so a 3-second text takes 3 seconds to stream; the clients read
//   as fast as bytes come. Slots start staggered over one stream's length (otherwise 100
//   identical streams stay in lockstep: a burst every 3 seconds). Time to first audio:
//   request sent → first body bytes (platform), call started → first audio chunk
//   (direct), both on the load generator's clock, from before the request is built to the
//   first non-empty audio in hand. `addedTtfaMs` = platform percentile − direct percentile
//   over the streams started in the window, with each difference's 95 % interval
//   (`p50Interval95`, `p99Interval95`: both samples resampled; the direct path has fewer
//   streams, so its percentiles carry most of the scatter). Platform CPU over the window
//   per stream and per audio second.
// burst: `--levels` (100) streams started at once, per format of `--formats`
//   (wav,mp3,opus), against a zero-delay backend with fast pacing (the case the issue
//   measured first): time to first byte, streams/s, and the platform's CPU per stream
//   beyond the same streams read over bare gRPC in this process.
// encoders: CPU per audio second of the platform's encoder (src/audio createEncoder, 100 ms
//   pushes at the output rate, creation included) beside the codec alone (LAME WASM for
//   mp3, libopus for opus; wav has no codec), and beside what the platform spends per
//   audio second beyond bare gRPC in the burst.
//
//   npx tsx bench/tts.ts [--mode all|steady|burst|encoders] [--streams 100]
//       [--direct-streams 20] [--seconds 30] [--warmup-seconds 5] [--steady-format wav]
//       [--levels 100] [--formats wav,mp3,opus] [--text "..."] [--short-text "..."]
//       [--cpu-profile file.cpuprofile]   (the platform's thread over the steady window)
//
// The load generator (HTTP client and the direct gRPC client of the steady part) runs in a
// child process, so the platform's process serves requests and nothing else and its CPU
// time is the platform's own cost. The burst part's direct path runs in this process (its
// CPU is the bare gRPC client's, subtracted from the platform's).
import { writeFile } from 'node:fs/promises';
import http from 'node:http';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { create } from '@bufbuild/protobuf';
import { Encoder as OpusEncoder } from '@evan/opus';
import { createEncoder as createWasmEncoder } from 'wasm-media-encoders';
import { createEncoder, int16ToFloat32, loadMp3Module } from '../src/audio/index.ts';
import { AudioEncoding, SynthesizeRequestSchema } from '../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient } from '../src/inference/grpc-service.ts';
import { spawnNativeBackend, type SynthesizeInput } from '../src/inference/index.ts';
import { parseSynthesisRequest, toBackendRequest } from '../src/speech/request.ts';
import { startBenchPlatform, testSignal } from './lib.ts';

const { values } = parseArgs({
  options: {
    mode: { type: 'string', default: 'all' },
    streams: { type: 'string', default: '100' },
    'direct-streams': { type: 'string', default: '20' },
    seconds: { type: 'string', default: '30' },
    'warmup-seconds': { type: 'string', default: '5' },
    'steady-format': { type: 'string', default: 'wav' },
    levels: { type: 'string', default: '100' },
    formats: { type: 'string', default: 'wav,mp3,opus' },
    text: { type: 'string', default: 'The quick brown fox jumps over the lazy dog.' },
    'short-text': { type: 'string', default: 'Hello there.' },
    // A real Postgres keeps the embedded store's work (PGlite runs in this process) out of the figures.
    'database-url': { type: 'string', default: process.env.DATABASE_URL ?? '' },
    rounds: { type: 'string', default: '20' },
    'cpu-profile': { type: 'string' },
    child: { type: 'boolean', default: false },
  },
});
type Format = 'wav' | 'mp3' | 'opus';
const rateOf = (f: string) => (f === 'opus' ? 48000 : 44100);
const textFor = (c: number) => (c >= 1000 ? values['short-text']! : values.text!);
const r2 = (n: number) => +n.toFixed(2);
const pct = (xs: number[], p: number) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return r2(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!);
};
// Event-loop delay: the histogram holds the sampling interval plus the lateness; this reports the lateness.
const ELD_RESOLUTION_MS = 5;
const lateness = (h: ReturnType<typeof monitorEventLoopDelay>) => {
  const ms = (ns: number) => r2(Math.max(0, ns / 1e6 - ELD_RESOLUTION_MS));
  return { p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max) };
};
/**
 * 95 % interval of `pct(a, p) - pct(b, p)` by resampling both with replacement (1,000 draws,
 * seeded): the direct path has ~5× fewer streams than the platform's, so most of a run's
 * scatter in the added p50 is the direct median's own sampling error; this says how much.
 */
const diffInterval = (a: number[], b: number[], p: number): [number, number] | null => {
  if (!a.length || !b.length) return null;
  let seed = 0x2545f491;
  const rnd = () => ((seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32);
  const draw = (xs: number[]) => pct(Array.from(xs, () => xs[Math.floor(rnd() * xs.length)]!), p)!;
  const diffs = Array.from({ length: 1000 }, () => draw(a) - draw(b)).sort((x, y) => x - y);
  return [r2(diffs[25]!), r2(diffs[974]!)];
};
const dist = (xs: number[]) => ({ n: xs.length, p50: pct(xs, 50), p90: pct(xs, 90), p99: pct(xs, 99), max: pct(xs, 100) });

interface One { ttfbMs: number; totalMs: number; bytes: number }
type Result = One | { error: string };

/** The backend request the platform makes of a `POST /v1/tts` body (the "same synthesis"). */
async function backendRequestFor(body: { text: string; format: Format }): Promise<SynthesizeInput> {
  const req = parseSynthesisRequest(body, undefined, { requireText: true });
  return toBackendRequest(req, 'bench', async () => ({ referenceId: '', references: [] }));
}

// ─── the load generator (child process) ─────────────────────────────────────────────

function platformStream(agent: http.Agent, o: { port: number; key: string; body: string }, onBytes?: (n: number) => void): Promise<One> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let ttfbMs = -1;
    let bytes = 0;
    const req = http.request(
      { host: '127.0.0.1', port: o.port, path: '/v1/tts', method: 'POST', agent, headers: { Authorization: `Bearer ${o.key}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(o.body) } },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return reject(new Error(`status ${res.statusCode}`));
        }
        res.on('data', (d: Buffer) => {
          if (ttfbMs < 0) ttfbMs = performance.now() - t0;
          bytes += d.length;
          onBytes?.(d.length);
        });
        res.on('end', () => resolve({ ttfbMs, totalMs: performance.now() - t0, bytes }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}

async function directStream(client: ReturnType<typeof createGrpcClient>, input: SynthesizeInput, onBytes?: (n: number) => void): Promise<One> {
  const t0 = performance.now();
  let ttfbMs = -1;
  let bytes = 0;
  const call = client.synthesize(create(SynthesizeRequestSchema, input));
  for await (const c of call as AsyncIterable<{ audio: Uint8Array }>) {
    if (c.audio.length === 0) continue;
    if (ttfbMs < 0) ttfbMs = performance.now() - t0;
    bytes += c.audio.length;
    onBytes?.(c.audio.length);
  }
  return { ttfbMs, totalMs: performance.now() - t0, bytes };
}

interface SteadyOrder {
  type: 'steady';
  port: number;
  key: string;
  backendAddress: string;
  format: Format;
  text: string;
  streams: number;
  directStreams: number;
  warmupSeconds: number;
  seconds: number;
}

async function childSteady(o: SteadyOrder) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const client = createGrpcClient(o.backendAddress, undefined, { 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
  await new Promise<void>((r, j) => client.waitForReady(Date.now() + 5000, (e) => (e ? j(e) : r())));
  const body = JSON.stringify({ text: o.text, format: o.format });
  const input = await backendRequestFor({ text: o.text, format: o.format });
  // One stream of each kind first: its length spreads the slots' starts.
  const probe = await directStream(client, input);
  const platformProbe = await platformStream(agent, { port: o.port, key: o.key, body });
  const streamMs = probe.totalMs;

  let phase: 'warmup' | 'record' | 'drain' = 'warmup';
  const rec = {
    platform: { ttfa: [] as number[], total: [] as number[], errors: 0, firstError: undefined as string | undefined, completedInWindow: 0, bytesInWindow: 0 },
    direct: { ttfa: [] as number[], total: [] as number[], errors: 0, firstError: undefined as string | undefined, completedInWindow: 0, bytesInWindow: 0 },
  };
  const slot = async (path: 'platform' | 'direct', delayMs: number) => {
    await new Promise((r) => setTimeout(r, delayMs));
    const r = rec[path];
    const onBytes = (n: number) => {
      if (phase === 'record') r.bytesInWindow += n;
    };
    while (phase !== 'drain') {
      const startedIn = phase;
      try {
        const x = path === 'platform' ? await platformStream(agent, { port: o.port, key: o.key, body }, onBytes) : await directStream(client, input, onBytes);
        if (phase === 'record') r.completedInWindow++;
        if (startedIn === 'record') {
          r.ttfa.push(x.ttfbMs);
          r.total.push(x.totalMs);
        }
      } catch (err) {
        if (startedIn === 'record') {
          r.errors++;
          r.firstError ??= String(err);
        }
      }
    }
  };
  const slots = [
    ...Array.from({ length: o.streams }, (_, i) => slot('platform', (i * streamMs) / o.streams)),
    ...Array.from({ length: o.directStreams }, (_, i) => slot('direct', ((i + 0.5) * streamMs) / o.directStreams)),
  ];
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  await new Promise((r) => setTimeout(r, o.warmupSeconds * 1000));
  phase = 'record';
  process.send!({ type: 'window-start' });
  eld.enable();
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, o.seconds * 1000));
  const cpu = process.cpuUsage(cpu0);
  eld.disable();
  phase = 'drain';
  process.send!({ type: 'window-end' });
  await Promise.all(slots);
  client.close();
  agent.destroy();
  return {
    streamMs: r2(streamMs),
    audioSecondsPerStream: probe.bytes / 2 / rateOf(o.format),
    // Encoded bytes of one platform stream: bytes received → audio seconds for any format.
    platformBytesPerStream: platformProbe.bytes,
    platform: rec.platform,
    direct: rec.direct,
    loadgen: { cpuCores: r2((cpu.user + cpu.system) / 1000 / (o.seconds * 1000)), eventLoopDelayMs: lateness(eld) },
  };
}

async function runChild() {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  process.on('message', async (m: SteadyOrder | { type: 'burst'; port: number; key: string; body: string; concurrency: number } | { type: 'exit' }) => {
    if (m.type === 'exit') process.exit(0);
    if (m.type === 'steady') process.send!({ type: 'steady-result', result: await childSteady(m) });
    if (m.type === 'burst') {
      const results = await Promise.allSettled(Array.from({ length: m.concurrency }, () => platformStream(agent, m)));
      process.send!({ type: 'burst-result', results: results.map((r) => (r.status === 'fulfilled' ? r.value : { error: String(r.reason) })) });
    }
  });
}

// ─── the platform side (this process) ───────────────────────────────────────────────

async function withPlatform<T>(backendEnv: Record<string, string>, fn: (ctx: { port: number; key: string; backendAddress: string; loadgen: ChildProcess }) => Promise<T>): Promise<T> {
  const backend = await spawnNativeBackend({ engine: 'synthetic', env: backendEnv, stderr: 'ignore' });
  const { platform, key } = await startBenchPlatform({ backendAddress: backend.address, databaseUrl: values['database-url'] });
  const loadgen = fork(fileURLToPath(import.meta.url), ['--child'], { execArgv: ['--import=tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  try {
    return await fn({ port: platform.port, key, backendAddress: backend.address, loadgen });
  } finally {
    loadgen.send({ type: 'exit' });
    await platform.close();
    await backend.stop();
  }
}

async function steady() {
  const format = values['steady-format'] as Format;
  const seconds = Number(values.seconds);
  return withPlatform({ PARLEY_SYNTHETIC_TTFA_MS: '0', PARLEY_SYNTHETIC_PACING: 'realtime' }, async ({ port, key, backendAddress, loadgen }) => {
    const order: SteadyOrder = {
      type: 'steady',
      port,
      key,
      backendAddress,
      format,
      text: values.text!,
      streams: Number(values.streams),
      directStreams: Number(values['direct-streams']),
      warmupSeconds: Number(values['warmup-seconds']),
      seconds,
    };
    const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
    const profiler = values['cpu-profile'] ? new inspector.Session() : null;
    let cpu0 = process.cpuUsage();
    let cpu = cpu0;
    let wall0 = 0;
    let wallMs = 0;
    const result = await new Promise<Awaited<ReturnType<typeof childSteady>>>((resolve) => {
      const onMessage = async (m: { type: string; result?: Awaited<ReturnType<typeof childSteady>> }) => {
        if (m.type === 'window-start') {
          if (profiler) {
            profiler.connect();
            await profiler.post('Profiler.enable');
            await profiler.post('Profiler.start');
          }
          eld.enable();
          cpu0 = process.cpuUsage();
          wall0 = performance.now();
        } else if (m.type === 'window-end') {
          cpu = process.cpuUsage(cpu0);
          wallMs = performance.now() - wall0;
          eld.disable();
          if (profiler) {
            const { profile } = await profiler.post('Profiler.stop');
            await writeFile(values['cpu-profile']!, JSON.stringify(profile));
            profiler.disconnect();
          }
        } else if (m.type === 'steady-result') {
          loadgen.off('message', onMessage);
          resolve(m.result!);
        }
      };
      loadgen.on('message', onMessage);
      loadgen.send(order);
    });
    const p = result.platform;
    const d = result.direct;
    const cpuMs = (cpu.user + cpu.system) / 1000;
    const audioS = (p.bytesInWindow / result.platformBytesPerStream) * result.audioSecondsPerStream;
    const pt = dist(p.ttfa);
    const dt = dist(d.ttfa);
    const added = (q: 'p50' | 'p99') => (pt[q] !== null && dt[q] !== null ? r2(pt[q]! - dt[q]!) : null);
    return {
      format,
      text: values.text,
      concurrentStreams: { platform: order.streams, direct: order.directStreams },
      seconds,
      streamMs: result.streamMs,
      audioSecondsPerStream: r2(result.audioSecondsPerStream),
      addedTtfaMs: { p50: added('p50'), p99: added('p99'), p50Interval95: diffInterval(p.ttfa, d.ttfa, 50), p99Interval95: diffInterval(p.ttfa, d.ttfa, 99) },
      platform: {
        ttfaMs: pt,
        streamMs: dist(p.total),
        errors: p.errors,
        ...(p.firstError ? { firstError: p.firstError } : {}),
        streamsPerSecond: r2(p.completedInWindow / (wallMs / 1000)),
        audioSecondsPerSecond: r2(audioS / (wallMs / 1000)),
        // The platform's process over the window (HTTP, auth, actor, gRPC client, encoding, store).
        cpuCores: r2(cpuMs / wallMs),
        cpuMsPerStream: r2((cpuMs / audioS) * result.audioSecondsPerStream),
        cpuMsPerAudioSecond: +(cpuMs / audioS).toFixed(3),
        eventLoopDelayMs: lateness(eld),
      },
      direct: { ttfaMs: dt, streamMs: dist(d.total), errors: d.errors, ...(d.firstError ? { firstError: d.firstError } : {}) },
      loadgen: result.loadgen,
    };
  });
}

async function burst() {
  const LEVELS = values.levels!.split(',').map(Number);
  const FORMATS = values.formats!.split(',') as Format[];
  return withPlatform({ PARLEY_SYNTHETIC_TTFA_MS: '0', PARLEY_SYNTHETIC_PACING: 'fast' }, async ({ port, key, backendAddress, loadgen }) => {
    const raw = createGrpcClient(backendAddress, undefined, { 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
    await new Promise<void>((r, j) => raw.waitForReady(Date.now() + 5000, (e) => (e ? j(e) : r())));
    const platformBatch = (format: string, text: string, concurrency: number) =>
      new Promise<Result[]>((resolve) => {
        const on = (m: { type: string; results?: Result[] }) => {
          if (m.type !== 'burst-result') return;
          loadgen.off('message', on);
          resolve(m.results!);
        };
        loadgen.on('message', on);
        loadgen.send({ type: 'burst', port, key, body: JSON.stringify({ text, format }), concurrency });
      });
    const inputs = new Map<string, SynthesizeInput>();
    const inputFor = async (format: Format, text: string) => {
      const k = `${format}\n${text}`;
      if (!inputs.has(k)) inputs.set(k, await backendRequestFor({ text, format }));
      return inputs.get(k)!;
    };
    const level = async (path: 'platform' | 'direct', format: Format, concurrency: number) => {
      const rounds = concurrency === 1 ? Number(values.rounds) : 1;
      const text = textFor(concurrency);
      const input = await inputFor(format, text);
      const ttfb: number[] = [];
      const total: number[] = [];
      let errors = 0;
      let firstError: string | undefined;
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      for (let r = 0; r < rounds; r++) {
        const results: Result[] =
          path === 'platform'
            ? await platformBatch(format, text, concurrency)
            : (await Promise.allSettled(Array.from({ length: concurrency }, () => directStream(raw, input)))).map((x) => (x.status === 'fulfilled' ? x.value : { error: String(x.reason) }));
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
        streamsPerSecond: r2((streams / wallMs) * 1000),
        // CPU of this process per stream: the platform (HTTP, actor, gRPC client, encoding) on
        // the platform path; the bare gRPC client on the direct path.
        cpuMsPerStream: +((cpu.user + cpu.system) / 1000 / Math.max(1, streams)).toFixed(3),
        wallMs: Math.round(wallMs),
      };
    };
    // Warm-up: JIT, connections, the MP3 encoder's WASM, store caches.
    for (const f of FORMATS) for (let i = 0; i < 5; i++) await Promise.all([platformBatch(f, values.text!, 1), directStream(raw, await inputFor(f, values.text!))]);
    const results: Record<string, unknown> = {};
    for (const format of FORMATS) {
      for (const c of LEVELS) {
        const d = await level('direct', format, c);
        const p = await level('platform', format, c);
        const secs = (await directStream(raw, await inputFor(format, textFor(c)))).bytes / 2 / rateOf(format);
        const added = (q: 'p50' | 'p99') => (p.ttfbMs[q] !== null && d.ttfbMs[q] !== null ? r2(p.ttfbMs[q]! - d.ttfbMs[q]!) : null);
        const addedCpu = p.cpuMsPerStream - d.cpuMsPerStream;
        results[`${format}_c${c}`] = {
          text: textFor(c),
          audioSecondsPerStream: r2(secs),
          addedTtfbMs: { p50: added('p50'), p99: added('p99') },
          addedCpuMsPerStream: +addedCpu.toFixed(3),
          addedCpuMsPerAudioSecond: +(addedCpu / secs).toFixed(3),
          platform: { ...p, audioSecondsPerSecond: r2(p.streamsPerSecond * secs) },
          direct: { ...d, audioSecondsPerSecond: r2(d.streamsPerSecond * secs) },
        };
      }
    }
    raw.close();
    return results;
  });
}


/** The backend's own audio for the default text at `rate`, as the chunks it sends. */
async function backendAudio(rate: number): Promise<Int16Array[]> {
  const backend = await spawnNativeBackend({ engine: 'synthetic', env: { PARLEY_SYNTHETIC_TTFA_MS: '0', PARLEY_SYNTHETIC_PACING: 'fast' }, stderr: 'ignore' });
  const raw = createGrpcClient(backend.address);
  await new Promise<void>((r, j) => raw.waitForReady(Date.now() + 5000, (e) => (e ? j(e) : r())));
  const input = await backendRequestFor({ text: values.text!, format: rate === 48000 ? 'opus' : 'wav' });
  const out: Int16Array[] = [];
  for await (const c of raw.synthesize(create(SynthesizeRequestSchema, input)) as AsyncIterable<{ audio: Uint8Array }>) {
    const b = c.audio.slice();
    if (b.length) out.push(new Int16Array(b.buffer, 0, b.length >> 1));
  }
  raw.close();
  await backend.stop();
  return out;
}

/**
 * CPU ms per audio second: the platform's encoder (creation included) and the codec alone,
 * 3-s streams in 100 ms pushes, on a test signal (a tone, a sweep and noise, as bench/audio.ts)
 * and on the backend's own audio for the default text (the synthetic engine's).
 */
async function encoders() {
  const STREAM_S = 3;
  const STREAMS = 40;
  const cpuMs = (run: () => void | Promise<void>) => async () => {
    await run(); // warm-up (JIT, WASM tiers)
    const c0 = process.cpuUsage();
    for (let i = 0; i < STREAMS; i++) await run();
    const c = process.cpuUsage(c0);
    return +((c.user + c.system) / 1000 / (STREAMS * STREAM_S)).toFixed(3);
  };
  await loadMp3Module();
  const out: Record<string, { encoderMsPerAudioSecond: number; codecAloneMsPerAudioSecond: number | null; encoderOnBackendAudioMsPerAudioSecond: number }> = {};
  for (const format of ['wav', 'mp3', 'opus'] as const) {
    const rate = rateOf(format);
    const pcm = testSignal(rate, STREAM_S);
    const size = rate / 10;
    const parts: Int16Array[] = [];
    for (let i = 0; i < pcm.length; i += size) parts.push(pcm.subarray(i, i + size));
    const real = await backendAudio(rate);
    const realS = real.reduce((n, c) => n + c.length, 0) / rate;
    const onBackendAudio = +(((await cpuMs(async () => {
      const e = await createEncoder({ format, sampleRateHz: rate, inputSampleRateHz: rate, mp3BitrateKbps: 128 });
      for (const p of real) e.push(p);
      e.end();
    })()) * STREAM_S) / realS).toFixed(3);
    const encoder = await cpuMs(async () => {
      const e = await createEncoder({ format, sampleRateHz: rate, inputSampleRateHz: rate, mp3BitrateKbps: 128 });
      for (const p of parts) e.push(p);
      e.end();
    })();
    let codec: number | null = null;
    if (format === 'mp3') {
      const lame = await createWasmEncoder('audio/mpeg', await loadMp3Module());
      const floats = parts.map((p) => int16ToFloat32(p));
      codec = await cpuMs(() => {
        lame.configure({ sampleRate: rate, channels: 1, bitrate: 128, outputSampleRate: 44100 });
        for (const f of floats) lame.encode([f]);
        lame.finalize();
      })();
    } else if (format === 'opus') {
      const frames: Int16Array[] = [];
      for (let i = 0; i + 960 <= pcm.length; i += 960) frames.push(pcm.slice(i, i + 960));
      codec = await cpuMs(() => {
        const enc = new OpusEncoder({ channels: 1, sample_rate: 48000, application: 'audio' });
        enc.bitrate = 'auto';
        for (const f of frames) enc.encode(f);
      })();
    }
    out[format] = { encoderMsPerAudioSecond: encoder, codecAloneMsPerAudioSecond: codec, encoderOnBackendAudioMsPerAudioSecond: onBackendAudio };
  }
  return out;
}

// ─── main ───────────────────────────────────────────────────────────────────────────

if (values.child) {
  await runChild();
} else {
  const mode = values.mode!;
  const started = performance.now();
  const at = new Date().toISOString();
  const loadavgBefore = os.loadavg().map(r2);
  const out: Record<string, unknown> = {};
  if (mode === 'all' || mode === 'steady') out.steady = await steady();
  if (mode === 'all' || mode === 'burst') out.burst = await burst();
  if (mode === 'all' || mode === 'encoders' || mode === 'burst') {
    const enc = await encoders();
    const b = out.burst as Record<string, { addedCpuMsPerAudioSecond: number }> | undefined;
    const level = values.levels!.split(',')[0];
    out.encoderCostMsPerAudioSecond = Object.fromEntries(
      Object.entries(enc).map(([f, e]) => [f, { platformBeyondGrpcInBurst: b?.[`${f}_c${level}`]?.addedCpuMsPerAudioSecond ?? null, ...e }]),
    );
  }
  process.stdout.write(
    `${JSON.stringify(
      {
        bench: 'tts',
        at,
        engine: 'native backend (synthetic engine, zero time to first audio) as a child process; steady: realtime pacing; burst: fast pacing',
        note: 'load generator in a child process; steady.addedTtfaMs: platform minus direct percentiles over streams started in the window, both paths at once on the same backend; burst.*.addedCpuMsPerStream: this process on the platform path minus the bare gRPC client on the direct path',
        store: values['database-url'] ? 'postgres' : 'pglite (in this process)',
        machine: { cpus: os.cpus().length, node: process.version, loadavgBefore, loadavgAfter: os.loadavg().map(r2) },
        totalSeconds: Math.round((performance.now() - started) / 1000),
        ...out,
      },
      null,
      2,
    )}\n`,
  );
  process.exit(0);
}
