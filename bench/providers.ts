// Provider engines benchmark: time to first audio (speech) and time to first token (chat)
// through the native backend's provider engines, beside the same provider called directly, in
// the same run, at each concurrency level.
//
//   npx tsx bench/providers.ts [--levels 1,50] [--calls 200] [--provider-delay-ms 20] [--kinds engine_chat,…]
//                               [--backend-cpu-prof file.cpuprofile]
//
// The provider is a light local stand-in in its own process (`--serve` mode of this file): an
// OpenAI-style `/v1/audio/speech` that answers after `--provider-delay-ms` with 1 s of 24 kHz
// PCM in 100 ms pieces, and `/v1/chat/completions` that streams 20 tokens after the same delay.
// The native backend runs as a child process with PARLEY_TTS_PROVIDER / PARLEY_LLM_PROVIDER
// pointing at it (as `npm start` would run it); this process makes both kinds of calls:
// - direct: `fetch` to the provider, until the first audio bytes / the first SSE content delta;
// - engine: gRPC `Synthesize` (24 kHz, the provider's own rate, and 16 kHz, resampled) until
//   the first chunk with audio, `Generate` until the first text delta.
// Each level runs `--calls` calls of each kind, `level` at a time, direct and engine calls
// interleaved. Prints one JSON object: p50/p90/p99 in ms per kind, and what the engines add at
// p50, p90 and p99 (engine percentile minus direct percentile).
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { create } from '@bufbuild/protobuf';
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

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '1,50' },
    calls: { type: 'string', default: '200' },
    'provider-delay-ms': { type: 'string', default: '20' },
    // Only these kinds of call (comma-separated, of KINDS below): e.g. `engine_chat` for the
    // backend's CPU per call of one kind. What the engines add needs both kinds it compares.
    kinds: { type: 'string' },
    serve: { type: 'boolean', default: false },
    // A CPU profile of the backend child over the last level's measured window, to this file.
    'backend-cpu-prof': { type: 'string' },
  },
});
const DELAY_MS = Number(values['provider-delay-ms']);

/** The stand-in provider (run in a child process by the benchmark itself). */
function serveProvider() {
  const pcm100ms = Buffer.alloc(4800); // 100 ms at 24 kHz, 16-bit
  for (let i = 0; i < 2400; i++) pcm100ms.writeInt16LE(Math.round(8000 * Math.sin(i / 5)), i * 2);
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'GET') return void res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"object":"list","data":[]}');
      setTimeout(() => {
        if (req.url!.endsWith('/audio/speech')) {
          res.writeHead(200, { 'Content-Type': 'audio/pcm' });
          let n = 0;
          const next = () => {
            if (res.destroyed) return;
            if (n++ === 10) return void res.end();
            res.write(pcm100ms);
            setImmediate(next);
          };
          next();
        } else {
          res.writeHead(200, { 'Content-Type': 'text/event-stream' });
          for (let i = 0; i < 20; i++) res.write(`data: {"choices":[{"index":0,"delta":{"content":"word${i} "},"finish_reason":null}]}\n\n`);
          res.end('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":20}}\n\ndata: [DONE]\n\n');
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
  const provider = spawn(process.execPath, ['--import=tsx', new URL(import.meta.url).pathname, '--serve', '--provider-delay-ms', String(DELAY_MS)], { stdio: ['ignore', 'pipe', 'inherit'] });
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
  const client = createGrpcClient(backend.address);

  const speechBody = JSON.stringify({ model: 'tts-1', input: 'The quick brown fox jumps over the lazy dog.', voice: 'alloy', response_format: 'pcm' });
  const chatBody = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'Hello' }], stream: true });

  /** ms from the request to its first body bytes (first content delta for chat). */
  async function direct(kind: 'speech' | 'chat'): Promise<number> {
    const t0 = performance.now();
    const res = await fetch(`${base}/${kind === 'speech' ? 'audio/speech' : 'chat/completions'}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: kind === 'speech' ? speechBody : chatBody });
    const reader = res.body!.getReader();
    let at = NaN;
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      if (Number.isNaN(at) && (kind === 'speech' ? r.value.length > 0 : new TextDecoder().decode(r.value).includes('"content":"'))) at = performance.now() - t0;
    }
    return at;
  }

  async function engine(kind: 'speech' | 'speech16' | 'chat'): Promise<number> {
    const t0 = performance.now();
    let at = NaN;
    if (kind === 'chat') {
      for await (const m of client.generate(create(GenerateRequestSchema, { model: 'llm-medium', messages: [{ role: Role.USER, content: 'Hello' }] }))) {
        if (Number.isNaN(at) && m.event.case === 'textDelta') at = performance.now() - t0;
      }
    } else {
      for await (const c of client.synthesize(create(SynthesizeRequestSchema, { text: 'The quick brown fox jumps over the lazy dog.', output: { sampleRateHz: kind === 'speech' ? 24000 : 16000 } }))) {
        if (Number.isNaN(at) && c.audio.length) at = performance.now() - t0;
      }
    }
    return at;
  }

  const ALL_KINDS = ['direct_speech', 'engine_speech', 'engine_speech_16k', 'direct_chat', 'engine_chat'] as const;
  const KINDS = values.kinds ? ALL_KINDS.filter((k) => values.kinds!.split(',').includes(k)) : ALL_KINDS;
  const runOne = (k: (typeof KINDS)[number]) =>
    k === 'direct_speech' ? direct('speech') : k === 'engine_speech' ? engine('speech') : k === 'engine_speech_16k' ? engine('speech16') : k === 'direct_chat' ? direct('chat') : engine('chat');

  // Warm up both paths (connections, the backend's first calls).
  for (const k of KINDS) for (let i = 0; i < 5; i++) await runOne(k);

  const calls = Number(values.calls);
  const levels: Record<string, unknown>[] = [];
  const levelList = values.levels!.split(',').map(Number);
  for (const level of levelList) {
    const profiled = values['backend-cpu-prof'] && level === levelList.at(-1);
    if (profiled) process.kill(backend.status().pid!, 'SIGUSR2');
    const times: Record<string, number[]> = Object.fromEntries(KINDS.map((k) => [k, []]));
    // A queue of calls, kinds interleaved, `level` running at once.
    const queue = Array.from({ length: calls }, (_, i) => KINDS.map((k) => ({ k, i }))).flat();
    const t0 = performance.now();
    const pid = backend.status().pid!;
    const cpu0 = cpuMsOf(pid);
    const self0 = process.cpuUsage();
    await Promise.all(Array.from({ length: level }, async () => {
      for (let job = queue.shift(); job; job = queue.shift()) times[job.k]!.push(await runOne(job.k));
    }));
    const wallS = (performance.now() - t0) / 1000;
    const backendCpuMs = cpuMsOf(pid) - cpu0;
    const self = process.cpuUsage(self0);
    if (profiled) {
      process.kill(backend.status().pid!, 'SIGUSR2');
      await new Promise((r) => setTimeout(r, 1000)); // it writes the profile
    }
    const n = (k: string) => times[k]?.length ?? 0;
    const engineCalls = n('engine_speech') + n('engine_speech_16k') + n('engine_chat');
    const stat = (k: string) => {
      const s = times[k]!.filter(Number.isFinite).sort((a, b) => a - b);
      return { n: s.length, p50: round(percentile(s, 50)), p90: round(percentile(s, 90)), p99: round(percentile(s, 99)) };
    };
    const out: Record<string, unknown> = {
      concurrency: level,
      wall_s: round(wallS),
      // The backend's CPU per engine call (its gRPC server, the provider request, chunking), and
      // this process's (gRPC and HTTP clients of both paths) per call of any kind.
      backend_cpu_ms_per_engine_call: round(backendCpuMs / engineCalls),
      bench_cpu_ms_per_call: round((self.user + self.system) / 1000 / (engineCalls + n('direct_speech') + n('direct_chat'))),
      load_average_1m: round(os.loadavg()[0]!),
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
    levels.push(out);
  }

  client.close();
  await backend.stop();
  for (const c of children) c.kill();
  process.stdout.write(`${JSON.stringify({ bench: 'providers', date: new Date().toISOString(), node: process.version, cpus: os.cpus().length, provider_delay_ms: DELAY_MS, calls_per_kind: calls, levels }, null, 2)}\n`);
}
