// Compatibility-layer benchmark, one run:
// 1. Family C `stream-input` (wss /compat/elevenlabs/v1/text-to-speech/{voice}/stream-input):
//    `--sockets` (default 200) concurrent sockets, each sending the init message, a few text
//    messages, a flush and the empty end message, with sync_alignment. Figures: time to the
//    first audio frame per socket (from its first text message), frames per second over all
//    sockets, audio seconds per second, errors.
// 2. OpenAI-style POST /compat/v1/audio/speech beside native POST /v1/tts, the same text and
//    format at `--concurrency` (default 50) for `--rounds` rounds each, interleaved: requests
//    per second, time to first byte and audio seconds per second.
// The backend is the native one (synthetic engine, zero delay, fast pacing) in a child
// process; the load generators (ws and node:http) run in another child process, so this
// process serves and nothing else. Prints one JSON object.
//
//   npx tsx bench/compat.ts [--sockets 200] [--concurrency 50] [--rounds 5] [--text "..."]
import { spawn } from 'node:child_process';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { spawnNativeBackend } from '../src/inference/index.ts';
import { startBenchPlatform } from './lib.ts';

const { values } = parseArgs({
  options: {
    sockets: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '5' },
    text: { type: 'string', default: 'The quick brown fox jumps over the lazy dog. It was a bright cold day in April. ' },
    'database-url': { type: 'string', default: process.env.DATABASE_URL ?? '' },
  },
});
const SOCKETS = Number(values.sockets);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);
const TEXT = values.text!;
const RATE = 16000;

const backend = await spawnNativeBackend({ engine: 'synthetic', env: { PARLEY_SYNTHETIC_TTFA_MS: '0', PARLEY_SYNTHETIC_PACING: 'fast' }, stderr: 'ignore' });
const { platform, key } = await startBenchPlatform({ backendAddress: backend.address, databaseUrl: values['database-url'] });

// The load generator: stream-input sockets with `ws`, HTTP speech requests with node:http.
const LOADGEN = `
const http = require('node:http');
const WebSocket = require('ws');
const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
function socket(o) {
  return new Promise((resolve) => {
    const ws = new WebSocket(o.url, { headers: { 'xi-api-key': o.key } });
    let t0 = 0, firstMs = -1, frames = 0, audioBytes = 0, lastAt = 0, error;
    ws.on('open', () => {
      ws.send(JSON.stringify({ text: ' ' }));
      t0 = performance.now();
      const words = o.text.match(/\\S+\\s*/g);
      for (const w of words) ws.send(JSON.stringify({ text: w }));
      ws.send(JSON.stringify({ text: '', flush: true }));
      ws.send(JSON.stringify({ text: '' }));
    });
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.error) error = f.error;
      if (typeof f.audio === 'string') {
        if (firstMs < 0) firstMs = performance.now() - t0;
        frames++;
        audioBytes += Buffer.byteLength(f.audio, 'base64');
      } else if (f.alignment) frames++;
      lastAt = performance.now();
    });
    ws.on('error', (e) => (error = String(e)));
    ws.on('close', (code) => resolve({ firstMs, frames, audioBytes, totalMs: lastAt - t0, code, error }));
  });
}
function speech(o) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let ttfbMs = -1, bytes = 0;
    const req = http.request({ host: '127.0.0.1', port: o.port, path: o.path, method: 'POST', agent,
      headers: { Authorization: 'Bearer ' + o.key, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(o.body) } }, (res) => {
      if (res.statusCode !== 200) { res.resume(); return resolve({ error: 'status ' + res.statusCode }); }
      res.on('data', (d) => { if (ttfbMs < 0) ttfbMs = performance.now() - t0; bytes += d.length; });
      res.on('end', () => resolve({ ttfbMs, totalMs: performance.now() - t0, bytes }));
      res.on('error', (e) => resolve({ error: String(e) }));
    });
    req.on('error', (e) => resolve({ error: String(e) }));
    req.end(o.body);
  });
}
process.on('message', async (o) => {
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: o.n }, () => (o.kind === 'ws' ? socket(o) : speech(o))));
  process.send({ wallMs: performance.now() - t0, results });
});
`;
const loadgen = spawn(process.execPath, ['-e', LOADGEN], { cwd: process.cwd(), stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
function batch<T>(o: Record<string, unknown>): Promise<{ wallMs: number; results: T[] }> {
  return new Promise((resolve) => {
    loadgen.once('message', (m) => resolve(m as { wallMs: number; results: T[] }));
    loadgen.send(o);
  });
}

const pct = (xs: number[], p: number) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return +s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!.toFixed(2);
};
const r2 = (n: number) => Math.round(n * 100) / 100;

// Warm-up: encoders, workers, connections.
await batch({ kind: 'ws', n: 4, url: `ws://127.0.0.1:${platform.port}/compat/elevenlabs/v1/text-to-speech/default/stream-input?output_format=pcm_${RATE}&sync_alignment=true`, key, text: TEXT });

// 0. stream-input, one socket at a time: the unloaded time to first audio frame.
const single: number[] = [];
for (let i = 0; i < 10; i++) {
  const b = await batch<{ firstMs: number; code: number }>({ kind: 'ws', n: 1, url: `ws://127.0.0.1:${platform.port}/compat/elevenlabs/v1/text-to-speech/default/stream-input?output_format=pcm_${RATE}&sync_alignment=true`, key, text: TEXT });
  if (b.results[0]!.code === 1000) single.push(b.results[0]!.firstMs);
}

// 1. stream-input, SOCKETS at once.
interface Sock { firstMs: number; frames: number; audioBytes: number; totalMs: number; code: number; error?: string }
const cpu0 = process.cpuUsage();
const ws = await batch<Sock>({ kind: 'ws', n: SOCKETS, url: `ws://127.0.0.1:${platform.port}/compat/elevenlabs/v1/text-to-speech/default/stream-input?output_format=pcm_${RATE}&sync_alignment=true`, key, text: TEXT });
const wsCpu = process.cpuUsage(cpu0);
const okSockets = ws.results.filter((s) => s.code === 1000 && !s.error && s.firstMs >= 0);
const frames = okSockets.reduce((a, s) => a + s.frames, 0);
const audioS = okSockets.reduce((a, s) => a + s.audioBytes / 2 / RATE, 0);
const streamInput = {
  sockets: SOCKETS,
  completed: okSockets.length,
  errors: SOCKETS - okSockets.length,
  ...(ws.results.find((s) => s.error) ? { firstError: ws.results.find((s) => s.error)!.error } : {}),
  textChars: TEXT.length,
  timeToFirstAudioFrameOneSocketMs: { p50: pct(single, 50), max: pct(single, 100) },
  timeToFirstAudioFrameMs: { p50: pct(okSockets.map((s) => s.firstMs), 50), p90: pct(okSockets.map((s) => s.firstMs), 90), p99: pct(okSockets.map((s) => s.firstMs), 99), max: pct(okSockets.map((s) => s.firstMs), 100) },
  socketMs: { p50: pct(okSockets.map((s) => s.totalMs), 50), p99: pct(okSockets.map((s) => s.totalMs), 99) },
  wallMs: r2(ws.wallMs),
  framesTotal: frames,
  framesPerS: r2(frames / (ws.wallMs / 1000)),
  framesPerSocket: r2(frames / Math.max(1, okSockets.length)),
  audioSecondsPerS: r2(audioS / (ws.wallMs / 1000)),
  platformCpuMs: r2((wsCpu.user + wsCpu.system) / 1000),
};

// 2. OpenAI-style speech beside native /v1/tts, interleaved rounds.
interface Req { ttfbMs: number; totalMs: number; bytes: number; error?: string }
const paths = {
  compat: { path: '/compat/v1/audio/speech', body: JSON.stringify({ model: 'tts-1', input: TEXT, voice: '', response_format: 'pcm', sample_rate: RATE }) },
  native: { path: '/v1/tts', body: JSON.stringify({ text: TEXT, format: 'pcm', sample_rate: RATE }) },
};
const acc: Record<string, { ttfb: number[]; wallMs: number; ok: number; errors: number; bytes: number; firstError?: string; cpuMs: number }> = {
  compat: { ttfb: [], wallMs: 0, ok: 0, errors: 0, bytes: 0, cpuMs: 0 },
  native: { ttfb: [], wallMs: 0, ok: 0, errors: 0, bytes: 0, cpuMs: 0 },
};
for (let r = 0; r < ROUNDS; r++) {
  for (const name of ['compat', 'native'] as const) {
    const c0 = process.cpuUsage();
    const b = await batch<Req>({ kind: 'http', n: CONCURRENCY, port: platform.port, key, ...paths[name] });
    const c = process.cpuUsage(c0);
    const a = acc[name]!;
    a.wallMs += b.wallMs;
    a.cpuMs += (c.user + c.system) / 1000;
    for (const x of b.results) {
      if (x.error) {
        a.errors++;
        a.firstError ??= x.error;
      } else {
        a.ok++;
        a.ttfb.push(x.ttfbMs);
        a.bytes += x.bytes;
      }
    }
  }
}
const speech = Object.fromEntries(
  Object.entries(acc).map(([name, a]) => [
    name,
    {
      path: paths[name as 'compat' | 'native'].path,
      requests: a.ok,
      errors: a.errors,
      ...(a.firstError ? { firstError: a.firstError } : {}),
      requestsPerS: r2(a.ok / (a.wallMs / 1000)),
      ttfbMs: { p50: pct(a.ttfb, 50), p99: pct(a.ttfb, 99) },
      audioSecondsPerS: r2(a.bytes / 2 / RATE / (a.wallMs / 1000)),
      platformCpuMsPerRequest: r2(a.cpuMs / Math.max(1, a.ok)),
    },
  ]),
);

console.log(
  JSON.stringify(
    {
      bench: 'compat',
      machine: { cpus: os.cpus().length, node: process.version },
      backend: 'native synthetic engine, child process, ttfa 0, fast pacing',
      format: `pcm_${RATE}`,
      streamInput,
      speech: { concurrency: CONCURRENCY, rounds: ROUNDS, ...speech, compatOverNativeRps: r2(speech.compat!.requestsPerS / speech.native!.requestsPerS) },
    },
    null,
    2,
  ),
);

loadgen.kill();
await platform.close();
await backend.stop();
