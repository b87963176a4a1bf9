// Provider engines benchmark: time to first audio (speech) and time to first token (chat)
// through the native backend's provider engines, beside the same provider called directly, in
// the same run, at each concurrency level.
//
//   npx tsx bench/providers.ts [--levels 1,50] [--calls 200 | --calls 40,200] [--provider-delay-ms 20]
//                               [--provider-pace realtime|burst] [--provider-chunk-ms 40] [--provider-speed 1] [--provider-tokens-per-s 50]
//                               [--kinds engine_chat,…] [--backend-cpu-prof file.cpuprofile]
//                               [--client platform|raw] [--channels 4] [--pace-ms 0 | --pace-ms 0,200]
//
// The provider is a light local stand-in in its own process (`--serve` mode of this file): an
// OpenAI-style `/v1/audio/speech` that answers after `--provider-delay-ms` with 1 s of 24 kHz
// PCM, and `/v1/chat/completions` that streams 20 tokens after the same delay. How the rest
// follows the first byte (`--provider-pace`):
// - `realtime` (default, as a real provider streams): the audio in `--provider-chunk-ms` (40)
//   pieces at real time (one piece every 40 ms; OpenAI's tts-1, Kokoro-FastAPI and ElevenLabs
//   stream at or above real time, in pieces of tens of ms; `--provider-speed 4`: four times
//   real time, a piece every 10 ms), the tokens one SSE event each at
//   `--provider-tokens-per-s` (50; hosted and local models stream ~50–100 tokens/s);
// - `burst` (the figures before 2026-11-27 07:00 UTC): the audio in 100 ms pieces and the
//   tokens in one write, all as fast as the socket takes them.
// The native backend runs as a child process with PARLEY_TTS_PROVIDER / PARLEY_LLM_PROVIDER
// pointing at it (as `npm start` would run it); this process makes both kinds of calls:
// - direct: `fetch` to the provider, until the first audio bytes / the first SSE content delta;
// - engine: gRPC `Synthesize` (24 kHz, the provider's own rate, and 16 kHz, resampled) until
//   the first chunk with audio, `Generate` until the first text delta, through the platform's
//   own client (`--client raw`: one grpc-js channel with default options, as before).
// Each level runs `--calls` calls of each kind, `level` at a time, direct and engine calls
// interleaved. Prints one JSON object: p50/p90/p99 in ms per kind, and what the engines add at
// p50, p90 and p99 (engine percentile minus direct percentile).
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { Backend as PlatformBackend } from '../src/inference/backend.ts';
import { GenerateRequestSchema, Role, SynthesizeRequestSchema } from '../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient } from '../src/inference/grpc-service.ts';
import { spawnNativeBackend } from '../src/inference/index.ts';
import { readFileSync } from 'node:fs';
import { percentile, round } from './lib.ts';

/** CPU time (user + system, ms) a process has used so far, from /proc (Linux). */
function cpuMsOf(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
  } catch {
    return NaN;
  }
}

/**
 * A process's main thread (its event loop), from /proc/<pid>/schedstat (Linux): ms on a CPU and
 * ms runnable but waiting for one (queued behind other work on the cores).
 */
function schedOf(pid: number): { runMs: number; waitMs: number } {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ').map(Number);
    return { runMs: run! / 1e6, waitMs: wait! / 1e6 };
  } catch {
    return { runMs: NaN, waitMs: NaN };
  }
}

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '1,50' },
    // Calls of each kind per level: one number for every level, or one per level (`40,200`).
    calls: { type: 'string', default: '200' },
    'provider-delay-ms': { type: 'string', default: '20' },
    'provider-pace': { type: 'string', default: 'realtime' },
    'provider-chunk-ms': { type: 'string', default: '40' },
    'provider-speed': { type: 'string', default: '1' },
    'provider-tokens-per-s': { type: 'string', default: '50' },
    // Only these kinds of call (comma-separated, of KINDS below): e.g. `engine_chat` for the
    // backend's CPU per call of one kind. What the engines add needs both kinds it compares.
    kinds: { type: 'string' },
    client: { type: 'string', default: 'platform' },
    // The platform client's HTTP/2 connections (default: its own default, 4).
    channels: { type: 'string' },
    // Each of the `level` callers waits this long after a call before its next (0: back to back,
    // a closed loop; see bench/README.md); one number for every level, or one per level (`0,200`).
    'pace-ms': { type: 'string', default: '0' },
    serve: { type: 'boolean', default: false },
    // A CPU profile of the backend child over the last level's measured window, to this file.
    'backend-cpu-prof': { type: 'string' },
  },
});
const DELAY_MS = Number(values['provider-delay-ms']);
const PROVIDER_PACE = values['provider-pace']!;
if (PROVIDER_PACE !== 'realtime' && PROVIDER_PACE !== 'burst') throw new Error('--provider-pace is realtime or burst');
const CHUNK_MS = Number(values['provider-chunk-ms']);
const TOKENS_PER_S = Number(values['provider-tokens-per-s']);
const SPEED = Number(values['provider-speed']);
const PACE_LIST = values['pace-ms']!.split(',').map(Number);

/** This process's clock in ms, comparable across processes (bench and provider) up to their offset. */
const now = () => performance.timeOrigin + performance.now();

/** The stand-in provider (run in a child process by the benchmark itself). */
function serveProvider() {
  const realtime = PROVIDER_PACE === 'realtime';
  // 1 s of 24 kHz 16-bit PCM, in pieces of `--provider-chunk-ms` (realtime) or 100 ms (burst).
  const pieceMs = realtime ? CHUNK_MS : 100;
  const pieceBytes = Math.round((24000 * pieceMs) / 1000) * 2;
  const pieceCount = Math.ceil(1000 / pieceMs);
  const piece = Buffer.alloc(pieceBytes);
  for (let i = 0; i < pieceBytes / 2; i++) piece.writeInt16LE(Math.round(8000 * Math.sin(i / 5)), i * 2);
  const TOKENS = 20;
  const token = (i: number) => `data: {"choices":[{"index":0,"delta":{"content":"word${i} "},"finish_reason":null}]}\n\n`;
  const chatEnd = 'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":20}}\n\ndata: [DONE]\n\n';
  /** Calls `step(k)` for k = 0, 1, … every `everyMs` from now (against the clock, not drifting), until it answers false. */
  const paced = (everyMs: number, step: (k: number) => boolean) => {
    const start = performance.now();
    let k = 0;
    const tick = () => {
      if (!step(k++)) return;
      setTimeout(tick, Math.max(0, start + k * everyMs - performance.now()));
    };
    tick();
  };
  // Per call id (`#n` in the text): when its request had arrived, when its first byte was written.
  const seen = new Map<string, [number, number]>();
  const server = http.createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const arrived = now();
      if (req.url!.endsWith('/bench/clock')) return void res.end(String(now()));
      if (req.url!.endsWith('/bench/seen')) {
        res.end(JSON.stringify(Object.fromEntries(seen)));
        return void seen.clear();
      }
      if (req.method === 'GET') return void res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"object":"list","data":[]}');
      const id = /#(\d+)/.exec(Buffer.concat(parts).toString('latin1'))?.[1];
      const first = () => { if (id) seen.set(id, [arrived, now()]); };
      setTimeout(() => {
        if (req.url!.endsWith('/audio/speech')) {
          res.writeHead(200, { 'Content-Type': 'audio/pcm' });
          first();
          if (realtime) {
            paced(pieceMs / SPEED, (k) => {
              if (res.destroyed) return false;
              if (k < pieceCount) res.write(piece);
              else res.end();
              return k < pieceCount;
            });
            return;
          }
          let n = 0;
          const next = () => {
            if (res.destroyed) return;
            if (n++ === pieceCount) return void res.end();
            res.write(piece);
            setImmediate(next);
          };
          next();
        } else {
          res.writeHead(200, { 'Content-Type': 'text/event-stream' });
          first();
          if (realtime) {
            paced(1000 / TOKENS_PER_S, (k) => {
              if (res.destroyed) return false;
              if (k < TOKENS) res.write(token(k));
              else res.end(chatEnd);
              return k < TOKENS;
            });
            return;
          }
          for (let i = 0; i < TOKENS; i++) res.write(token(i));
          res.end(chatEnd);
        }
      }, DELAY_MS);
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`provider on ${(server.address() as AddressInfo).port}\n`));
}

if (values.serve) {
  serveProvider();
} else {
  const children: ChildProcess[] = [];
  const provider = spawn(process.execPath, ['--import=tsx', new URL(import.meta.url).pathname, '--serve', '--provider-delay-ms', String(DELAY_MS), '--provider-pace', PROVIDER_PACE, '--provider-chunk-ms', String(CHUNK_MS), '--provider-speed', String(SPEED), '--provider-tokens-per-s', String(TOKENS_PER_S)], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(provider);
  const port = await new Promise<number>((resolve) => {
    let out = '';
    provider.stdout!.on('data', (d) => {
      out += d;
      const m = /provider on (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
  });
  const base = `http://127.0.0.1:${port}/v1`;
  const backend = await spawnNativeBackend({
    engine: 'synthetic',
    stderr: 'ignore',
    env: {
      PARLEY_TTS_PROVIDER: 'openai', PARLEY_TTS_BASE_URL: base, PARLEY_TTS_MODEL: 'tts-1', PARLEY_TTS_VOICE: 'alloy',
      PARLEY_LLM_PROVIDER: 'openai', PARLEY_LLM_BASE_URL: base, PARLEY_LLM_MODEL: 'bench',
      ...(values['backend-cpu-prof'] ? { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${new URL('./cpu-profile-hook.mjs', import.meta.url).pathname}`.trim(), BENCH_CPU_PROFILE: values['backend-cpu-prof'] } : {}),
    },
  });
  // `platform`: the platform's own client (src/inference/backend.ts: its channels, options and
  // call handling), as a session's synthesis and model calls reach the backend; `raw`: one
  // grpc-js channel with default options (the figures before 2026-11-27 04:30 UTC).
  const raw = values.client === 'raw' ? createGrpcClient(backend.address) : null;
  const platform = raw ? null : new PlatformBackend(backend.address, values.channels ? { channels: Number(values.channels) } : {});
  const synthesize = (req: MessageInitShape<typeof SynthesizeRequestSchema>): AsyncIterable<{ audio: Uint8Array }> => (raw ? raw.synthesize(create(SynthesizeRequestSchema, req)) : platform!.synthesize(req));
  const generate = (req: MessageInitShape<typeof GenerateRequestSchema>): AsyncIterable<{ event: { case?: string } }> => (raw ? raw.generate(create(GenerateRequestSchema, req)) : platform!.generate(req));

  // Each call carries an id (`#n`, in one sentence) the provider notes with its arrival and first
  // write, so a call's time splits into: before the provider had the request (this process →
  // provider, or this process → backend → provider), the provider's own wait, and after its
  // first byte (provider → this process, or provider → backend → this process).
  let nextId = 0;
  const speechText = (id: number) => `The quick brown fox #${id} jumps over the lazy dog.`;
  const chatText = (id: number) => `Hello #${id}`;
  /** The provider's clock minus this one's (the sample with the shortest round trip of 50). */
  let offset = 0;
  {
    let best = Infinity;
    for (let i = 0; i < 50; i++) {
      const t0 = now();
      const p = Number(await (await fetch(`${base}/bench/clock`)).text());
      const t1 = now();
      if (t1 - t0 < best) [best, offset] = [t1 - t0, p - (t0 + t1) / 2];
    }
  }
  interface Call { id: number; t0: number; first: number }

  /** From the request to its first body bytes (first content delta for chat). */
  async function direct(kind: 'speech' | 'chat'): Promise<Call> {
    const id = nextId++;
    const body = kind === 'speech'
      ? JSON.stringify({ model: 'tts-1', input: speechText(id), voice: 'alloy', response_format: 'pcm' })
      : JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: chatText(id) }], stream: true });
    const t0 = now();
    const res = await fetch(`${base}/${kind === 'speech' ? 'audio/speech' : 'chat/completions'}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const reader = res.body!.getReader();
    let at = NaN;
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      if (Number.isNaN(at) && (kind === 'speech' ? r.value.length > 0 : new TextDecoder().decode(r.value).includes('"content":"'))) at = now();
    }
    return { id, t0, first: at };
  }

  async function engine(kind: 'speech' | 'speech16' | 'chat'): Promise<Call> {
    const id = nextId++;
    const t0 = now();
    let at = NaN;
    if (kind === 'chat') {
      for await (const m of generate({ model: 'llm-medium', messages: [{ role: Role.USER, content: chatText(id) }] })) {
        if (Number.isNaN(at) && m.event.case === 'textDelta') at = now();
      }
    } else {
      for await (const c of synthesize({ text: speechText(id), output: { sampleRateHz: kind === 'speech' ? 24000 : 16000 } })) {
        if (Number.isNaN(at) && c.audio.length) at = now();
      }
    }
    return { id, t0, first: at };
  }

  const ALL_KINDS = ['direct_speech', 'engine_speech', 'engine_speech_16k', 'direct_chat', 'engine_chat'] as const;
  const KINDS = values.kinds ? ALL_KINDS.filter((k) => values.kinds!.split(',').includes(k)) : ALL_KINDS;
  const runOne = (k: (typeof KINDS)[number]) =>
    k === 'direct_speech' ? direct('speech') : k === 'engine_speech' ? engine('speech') : k === 'engine_speech_16k' ? engine('speech16') : k === 'direct_chat' ? direct('chat') : engine('chat');

  // Warm up both paths (connections, the backend's first calls).
  for (const k of KINDS) for (let i = 0; i < 5; i++) await runOne(k);

  const levels: Record<string, unknown>[] = [];
  const levelList = values.levels!.split(',').map(Number);
  const callsList = values.calls!.split(',').map(Number);
  for (const [li, level] of levelList.entries()) {
    const calls = callsList[Math.min(li, callsList.length - 1)]!;
    const paceMs = PACE_LIST[Math.min(li, PACE_LIST.length - 1)]!;
    const profiled = values['backend-cpu-prof'] && level === levelList.at(-1);
    if (profiled) process.kill(backend.status().pid!, 'SIGUSR2');
    const times: Record<string, Call[]> = Object.fromEntries(KINDS.map((k) => [k, []]));
    await fetch(`${base}/bench/seen`).then((r) => r.text()); // forget the warm-up's
    // A queue of calls, kinds interleaved, `level` running at once.
    const queue = Array.from({ length: calls }, (_, i) => KINDS.map((k) => ({ k, i }))).flat();
    const t0 = performance.now();
    const pid = backend.status().pid!;
    const cpu0 = cpuMsOf(pid);
    const self0 = process.cpuUsage();
    const procs = { bench: process.pid, backend: pid, provider: provider.pid! };
    const cpuAt0 = Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, cpuMsOf(p)]));
    const schedAt0 = Object.fromEntries(Object.entries(procs).map(([k, p]) => [k, schedOf(p)]));
    const eld = monitorEventLoopDelay({ resolution: 1 });
    eld.enable();
    await Promise.all(Array.from({ length: level }, async () => {
      for (let job = queue.shift(); job; job = queue.shift()) {
        times[job.k]!.push(await runOne(job.k));
        if (paceMs) await new Promise((r) => setTimeout(r, paceMs));
      }
    }));
    const wallS = (performance.now() - t0) / 1000;
    const backendCpuMs = cpuMsOf(pid) - cpu0;
    const self = process.cpuUsage(self0);
    eld.disable();
    // Each process over the level: cores used (all its threads), and its main thread's time
    // on a CPU and waiting for one, per call of any kind (queueing behind CPU vs work).
    const perProcess = Object.fromEntries(Object.entries(procs).map(([k, p]) => {
      const s = schedOf(p);
      return [k, {
        cores: round((cpuMsOf(p) - cpuAt0[k]!) / (wallS * 1000)),
        main_thread_run_ms: round(s.runMs - schedAt0[k]!.runMs),
        main_thread_runqueue_wait_ms: round(s.waitMs - schedAt0[k]!.waitMs),
      }];
    }));
    if (profiled) {
      process.kill(backend.status().pid!, 'SIGUSR2');
      await new Promise((r) => setTimeout(r, 1000)); // it writes the profile
    }
    const seen = (await (await fetch(`${base}/bench/seen`)).json()) as Record<string, [number, number]>;
    const n = (k: string) => times[k]?.length ?? 0;
    /** p50 of each part of a kind's calls (this process's clock; the provider's shifted by `offset`). */
    const parts = (k: string) => {
      const before: number[] = [], wait: number[] = [], after: number[] = [];
      for (const c of times[k]!) {
        const s = seen[c.id];
        if (!s || !Number.isFinite(c.first)) continue;
        before.push(s[0] - offset - c.t0);
        wait.push(s[1] - s[0]);
        after.push(c.first - (s[1] - offset));
      }
      const p50 = (a: number[]) => round(percentile(a.sort((x, y) => x - y), 50));
      return { to_provider_p50: p50(before), provider_wait_p50: p50(wait), from_provider_first_byte_p50: p50(after) };
    };
    const engineCalls = n('engine_speech') + n('engine_speech_16k') + n('engine_chat');
    const stat = (k: string) => {
      const s = times[k]!.map((c) => c.first - c.t0).filter(Number.isFinite).sort((a, b) => a - b);
      return { n: s.length, p50: round(percentile(s, 50)), p90: round(percentile(s, 90)), p99: round(percentile(s, 99)), ...parts(k) };
    };
    const out: Record<string, unknown> = {
      concurrency: level,
      calls_per_kind: calls,
      pace_ms: paceMs,
      wall_s: round(wallS),
      calls_per_s: round((KINDS.length * calls) / wallS),
      // The backend's CPU per engine call (its gRPC server, the provider request, chunking), and
      // this process's (gRPC and HTTP clients of both paths) per call of any kind.
      backend_cpu_ms_per_engine_call: round(backendCpuMs / engineCalls),
      bench_cpu_ms_per_call: round((self.user + self.system) / 1000 / (engineCalls + n('direct_speech') + n('direct_chat'))),
      load_average_1m: round(os.loadavg()[0]!),
      processes: perProcess,
      bench_event_loop_delay_ms: { p50: round(eld.percentile(50) / 1e6), p99: round(eld.percentile(99) / 1e6), max: round(eld.max / 1e6) },
    };
    for (const k of KINDS) out[k] = stat(k);
    const added = (e: string, d: string, p: 'p50' | 'p90' | 'p99') => (out[e] && out[d] ? round((out[e] as Record<string, number>)[p]! - (out[d] as Record<string, number>)[p]!) : null);
    out.engine_adds_ms = {
      first_audio_p50: added('engine_speech', 'direct_speech', 'p50'),
      first_audio_p90: added('engine_speech', 'direct_speech', 'p90'),
      first_audio_16k_p50: added('engine_speech_16k', 'direct_speech', 'p50'),
      first_token_p50: added('engine_chat', 'direct_chat', 'p50'),
      first_token_p90: added('engine_chat', 'direct_chat', 'p90'),
      first_audio_p99: added('engine_speech', 'direct_speech', 'p99'),
      first_audio_16k_p99: added('engine_speech_16k', 'direct_speech', 'p99'),
      first_token_p99: added('engine_chat', 'direct_chat', 'p99'),
    };
    const split = (e: string, d: string) => {
      const E = out[e] as Record<string, number> | undefined, D = out[d] as Record<string, number> | undefined;
      return E && D ? { to_provider: round(E.to_provider_p50! - D.to_provider_p50!), provider_wait: round(E.provider_wait_p50! - D.provider_wait_p50!), from_provider_first_byte: round(E.from_provider_first_byte_p50! - D.from_provider_first_byte_p50!) } : null;
    };
    // What the engines add at p50, by part (medians of parts do not add up exactly to the total's).
    out.engine_adds_p50_by_part_ms = { first_audio: split('engine_speech', 'direct_speech'), first_audio_16k: split('engine_speech_16k', 'direct_speech'), first_token: split('engine_chat', 'direct_chat') };
    levels.push(out);
  }

  raw?.close();
  platform?.close();
  await backend.stop();
  for (const c of children) c.kill();
  process.stdout.write(`${JSON.stringify({ bench: 'providers', date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, client: raw ? 'raw' : 'platform', channels: raw ? 1 : Number(values.channels ?? 4), pace_ms: PACE_LIST, provider_delay_ms: DELAY_MS, provider_pace: PROVIDER_PACE === 'realtime' ? { pace: 'realtime', chunk_ms: CHUNK_MS, speed: SPEED, tokens_per_s: TOKENS_PER_S } : { pace: 'burst' }, levels }, null, 2)}\n`);
}
