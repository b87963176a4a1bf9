/**
 * Concurrent live sessions on one node (or two) over the websocket transport, with synthetic audio.
 *
 *   npx tsx bench/sessions.ts [--sessions 200] [--seconds 30] [--creations-seconds 5] [--settle-seconds 3] [--baseline-sessions 20] [--baseline-seconds 20] [--caller-frame-ms 100] [--backends 1] [--light-backend] [--nodes 2] [--workers N] [--platform-first | --load-idle] [--no-recording] [--silent-callers] [--young-generation default|N] [--only creations|idle] [--cpu-profile file] [--heap-profile file] [--idle-snapshots prefix]
 *   DATABASE_URL=postgres://root@127.0.0.1/test REDIS_URL=redis://127.0.0.1:6379 npx tsx bench/sessions.ts
 *
 * The platform runs in this process; the native backend (synthetic speech, scripted model,
 * fast pacing) runs as its own child process (`--backends 2|3`: recognition, synthesis and the
 * model split over that many backend processes through `INFERENCE_BACKENDS`), and the simulated callers run in a second
 * child, so this process's CPU time is the platform's alone. `--light-backend` runs
 * bench/light-backend.ts instead of the native backend: the same service and messages, with
 * recognition and synthesis that cost the machine little (see that file). `--nodes 2` (Postgres
 * and Redis) starts a second platform node in a child process on the same schema and Redis, and
 * the callers create every other session there: two event loops on one host. Each caller
 * connects, streams 16 kHz PCM in real time (silence, and a spoken question every ~6 s) and listens.
 * `--silent-callers`: the callers stream silence and never ask (no turns, no agent audio), so the
 * CPU figure is what the caller's audio alone costs: received, policed, recorded and batched to
 * the recognizer (bench/README.md, twenty-ninth pass).
 *
 * Three phases: `--baseline-sessions` (20) sessions talk alone for `--baseline-seconds` (20); then
 * the rest connect and every session is idle (connected, sending nothing: a muted microphone),
 * for the idle memory figure; then all N talk for `--seconds`, measured from `--settle-seconds`
 * (3) after they start (each has had time to ask; with 30 or more, V8 has also compiled the paths
 * that 300 sessions make hot, whose optimizing compilations otherwise take ~10 % of the
 * platform's CPU in a 20 s window: bench/README.md, fifteenth pass (b)).
 *
 * The headline is what a caller hears: `caller_turn_latency_ms`, timed by the callers on their
 * own clock from the last audio of their question leaving to the first agent audio arriving,
 * with N sessions talking beside the same with the baseline's 20 (the inflation is what load
 * costs); `platform_cpu_ms_per_talking_session_second` (the platform process, every thread, both
 * nodes with `--nodes 2`); memory per talking and per idle connected session. The rest is
 * diagnosis: sessions held, memory and CPU per session, turns, the platform-
 * added turn latency (per turn: end of speech → first agent audio sent, minus recognition,
 * eagerness, model and synthesis time as the platform timed its calls) p50/p99; the same
 * measured against the backends' own clocks (`platform_added_backend_timed_ms`, by hop: each
 * backend writes when it did its part to a PARLEY_BACKEND_TIMINGS file, bench/turn-timings.ts),
 * with the backends' event-loop delay; and session creations per second.
 */
import { execFileSync, fork, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import v8 from 'node:v8';
import vm from 'node:vm';
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import WebSocket from 'ws';
import { encodeText } from '../native/engines/synthetic/modem.ts';
import { startPlatform } from '../src/platform.ts';
import { startNode, type ParleyNode } from '../src/threads/primary.ts';
import { openDatabase, type Database } from '../src/store/db.ts';
import { createLogger } from '../src/log.ts';
import { spawnNativeBackend } from '../src/inference/index.ts';
import { percentile, platformNodeFlags, round } from './lib.ts';
import { backendTimedPlatformMs, HOPS, readBackendLoops, readBackendTimings } from './turn-timings.ts';
import type { TurnTimeline } from '../actors/types.ts';

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** What every caller says, as synthetic speech at 16 kHz. */
const QUESTION = 'What time is it?';
const QUESTION_PCM = encodeText(QUESTION, { sampleRateHz: 16000 }).pcm;
const LIGHT_BACKEND = fileURLToPath(new URL('./light-backend.ts', import.meta.url));

// ------------------------------------------------------------------------------------------
// The caller child: connects `n` sessions and talks until told to stop.

async function callers() {
  const { urls, key, agent, frameMs, silent } = JSON.parse(process.env.BENCH_CALLERS!) as { urls: string[]; key: string; agent: string; frameMs: number; silent?: boolean };
  const question = QUESTION_PCM;
  const frame = frameMs * 16; // samples at 16 kHz
  const phases = frameMs / 10; // one tick every 10 ms serves the callers of its phase
  const silence = new Uint8Array(frame * 2);
  const bytes = new Uint8Array(frame * 2);
  interface Caller {
    ws: WebSocket;
    talking: boolean;
    speakAt: number;
    pos: number;
    bytesIn: number;
    /** When this caller sent the last audio of its question (its own clock), until the agent answers; 0 otherwise. */
    endAt: number;
    /** Agent audio came while this caller was asking: the answer cannot be told apart, not timed. */
    overlap: boolean;
  }
  const sockets: Caller[] = [];
  let failed = 0;
  const seen: Record<string, number> = {};
  // What a caller hears: from the last audio of its question leaving to the first agent audio
  // arriving, both on this process's clock.
  let latencies: number[] = [];
  let missed = 0;
  let overlapped = 0;
  const loop = monitorEventLoopDelay({ resolution: 5 });
  const connect = async (from: number, to: number) => {
    const t0 = Date.now();
    let held = 0;
    await Promise.all(
      Array.from({ length: to - from }, async (_, j) => {
        const i = from + j;
        await sleep((j * 2000) / (to - from)); // ramp up over 2 s
        // With several nodes, each creates every n-th session; its websocket URL is that node's.
        const r = await fetch(`${urls[i % urls.length]}/v1/agent/sessions`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ agent_id: agent }) });
        if (r.status !== 200) { failed++; return; }
        const s = (await r.json()) as { websocket_url: string; token: string };
        const ws = new WebSocket(`${s.websocket_url.replace('localhost', '127.0.0.1')}?token=${s.token}`);
        const entry: Caller = { ws, talking: false, speakAt: 0, pos: -1, bytesIn: 0, endAt: 0, overlap: false };
        ws.on('message', (d, bin) => {
          if (bin) {
            entry.bytesIn += (d as Buffer).length;
            if (entry.pos >= 0) entry.overlap = true;
            else if (entry.endAt > 0) {
              latencies.push(performance.now() - entry.endAt);
              entry.endAt = 0;
            }
          } else {
            const m = JSON.parse(d.toString());
            const k = m.state ?? m.type ?? `${m.topic}:${m.role}:${m.final}`;
            seen[k] = (seen[k] ?? 0) + 1;
          }
        });
        ws.on('error', () => {});
        await new Promise<void>((res) => { ws.once('open', () => res()); ws.once('close', () => res()); });
        if (ws.readyState === WebSocket.OPEN) { sockets[i] = entry; held++; } else failed++;
      }),
    );
    return { held, ms: Date.now() - t0 };
  };
  // Each talking caller sends a frame of `frameMs` (100 ms) every `frameMs`, at its own phase: real
  // callers' frames are not in lock-step. A tick every 10 ms serves the callers whose phase it is (all
  // callers sending in the same millisecond was a burst of `n` frames no deployment sees). An idle
  // caller (connected, not talking: a muted microphone) sends nothing.
  let phase = 0;
  const tick = setInterval(() => {
    const now = Date.now();
    phase = (phase + 1) % phases;
    for (let k = phase; k < sockets.length; k += phases) {
      const s = sockets[k];
      if (!s || !s.talking || s.ws.readyState !== WebSocket.OPEN) continue;
      if (s.pos < 0 && now >= s.speakAt) {
        if (s.endAt > 0) missed++; // the previous question was never answered
        s.endAt = 0;
        s.overlap = false;
        s.pos = 0;
      }
      if (s.pos >= 0) {
        const piece = question.subarray(s.pos, s.pos + frame);
        bytes.fill(0);
        bytes.set(new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength));
        s.ws.send(bytes);
        s.pos += frame;
        if (s.pos >= question.length) {
          s.pos = -1;
          s.speakAt = now + 6000;
          if (s.overlap) overlapped++;
          else s.endAt = performance.now();
        }
      } else s.ws.send(silence);
    }
  }, 10);
  process.on('message', async (m: { type: string; from?: number; to?: number; count?: number }) => {
    if (m.type === 'connect') {
      const r = await connect(m.from!, m.to!);
      process.send!({ type: 'connected', ...r, failed });
    } else if (m.type === 'talk') {
      // The first `count` callers talk (each asks at its own moment over the first 6 s), the rest are idle.
      const now = Date.now();
      sockets.forEach((s, i) => {
        if (!s) return;
        s.talking = i < m.count!;
        s.pos = -1;
        s.endAt = 0;
        // --silent-callers: never a question, only the stream of silence.
        s.speakAt = silent ? Infinity : now + 1000 + (i * 6000) / m.count!;
      });
      process.send!({ type: 'talking' });
    } else if (m.type === 'measure') {
      latencies = [];
      missed = 0;
      overlapped = 0;
      loop.reset();
      loop.enable();
      process.send!({ type: 'measuring' });
    } else if (m.type === 'report') {
      loop.disable();
      process.send!({ type: 'report', latencies, missed, overlapped, loop: { p50: round(loop.percentile(50) / 1e6), p99: round(loop.percentile(99) / 1e6), max: round(loop.max / 1e6) } });
    } else if (m.type === 'stop') {
      clearInterval(tick);
      const live = sockets.filter(Boolean);
      const open = live.filter((s) => s.ws.readyState === WebSocket.OPEN).length;
      const audioIn = live.reduce((k, s) => k + s.bytesIn, 0);
      for (const s of live) s.ws.send(JSON.stringify({ type: 'user.hangup' }));
      await sleep(500);
      for (const s of live) s.ws.terminate();
      process.send!({ type: 'stopped', open, agentAudioSeconds: audioIn / 32000, seen });
      process.exit(0);
    }
  });
  process.send!({ type: 'ready' });
}

// ------------------------------------------------------------------------------------------
// The platform side.

async function main() {
  const n = arg('sessions', 200);
  const seconds = arg('seconds', 30);
  const creationSeconds = arg('creations-seconds', 5);
  const settleSeconds = arg('settle-seconds', 3);
  const key = `pk_bench_${randomBytes(16).toString('hex')}`;
  const backendCount = Math.max(1, Math.min(3, arg('backends', 1)));
  // --light-backend: bench/light-backend.ts (the same service, recognition by sound detection of
  // the callers' known phrase, synthesis of each distinct text once) instead of the native
  // backend, so the load takes little of the cores the platform is measured on.
  const light = process.argv.includes('--light-backend');
  // Each backend writes when it did its part of each turn (bench/turn-timings.ts).
  const timingsDir = mkdtempSync(join(os.tmpdir(), 'parley-bench-'));
  const timingFiles = Array.from({ length: backendCount }, (_, i) => join(timingsDir, `backend-${i}.jsonl`));
  const backends = await Promise.all(timingFiles.map((timings) => spawnNativeBackend(light
    ? { address: '127.0.0.1:0', entry: LIGHT_BACKEND, env: { BENCH_PHRASE: QUESTION, BENCH_PHRASE_MS: String(QUESTION_PCM.length / 16), LOG_LEVEL: 'warn', PARLEY_BACKEND_TIMINGS: timings } }
    : { address: '127.0.0.1:0', engine: 'synthetic', env: { PARLEY_SYNTHETIC_PACING: 'fast', PARLEY_BACKEND_TIMINGS: timings } })));
  const backend = backends[0];
  // --platform-first: the backends and the simulated callers run at the lowest CPU priority
  // (nice 19), as a box that gives the platform the CPU first would. What the platform adds to
  // a turn is then its own cost, not its wait behind the load generators on the same cores.
  // --load-idle (Linux, with `chrt`): the backends and the callers run under SCHED_IDLE instead,
  // every thread of them: they get a core only when the platform does not want it, and a
  // platform thread that wakes takes the core from them at once (at nice 19 it may wait out
  // their time slice). Closer to the platform on cores of its own; the load may then lag.
  const loadIdle = process.argv.includes('--load-idle');
  const platformFirst = loadIdle || process.argv.includes('--platform-first');
  const lowPriority = (pid: number | null | undefined) => {
    if (!platformFirst || !pid) return;
    os.setPriority(pid, 19);
    if (loadIdle) execFileSync('chrt', ['--all-tasks', '--idle', '--pid', '0', String(pid)]);
  };
  for (const b of backends) lowPriority(b.status().pid);
  // One role per process: recognition on the first, synthesis on the second, the model on the last.
  const inferenceBackends = backendCount === 1 ? undefined : [
    `transcribe-1=${backends[0].address}`,
    `s2.1-pro=${backends[1].address}`,
    `llm-medium=${backends[backendCount - 1].address}/scripted`,
  ].join(',');
  const nodeConfig = {
    host: '127.0.0.1', port: 0, dataDir: 'memory', bootstrapKey: key, logLevel: 'warn',
    startNativeBackend: false, speechEngine: 'synthetic', backendAddress: backend.address, inferenceBackends,
    maxSessions: 100_000, databaseUrl: process.env.DATABASE_URL, redisUrl: process.env.REDIS_URL,
  } as const;
  const dbSchema = process.env.DATABASE_URL ? `bench_${randomBytes(4).toString('hex')}` : undefined;
  // --workers N (N > 1, Postgres and Redis): the node runs N event loops in worker threads of
  // this process (PARLEY_WORKERS, src/threads/), all on one port; the callers' sockets spread
  // over them. This process's CPU is then every worker's; each worker's own thread is read too.
  // The per-part turn diagnosis (backend-timed) needs the in-process runtime: one loop only.
  const workerCount = Math.max(1, arg('workers', 1));
  if (workerCount > 1 && (!process.env.DATABASE_URL || !process.env.REDIS_URL)) throw new Error('--workers N needs DATABASE_URL and REDIS_URL (several workers share them)');
  const timelines: TurnTimeline[] = [];
  let node: ParleyNode | null = null;
  // KB per session of a memory difference; null without sessions, or with workers (the bench
  // collects garbage and reads memory on its main thread only: the differences came out negative).
  const kbPer = (bytes: number, sessions: number) => (sessions && !node ? round(bytes / sessions / 1024, 1) : null);
  let platform: { url: string; db: Database; state: { kind: string }; close(): Promise<void> };
  // One loop: what waits to leave on the shared calls (docs/inference.md, "Send backlog").
  let sendBacklog: (() => { recognition: { ageMs: number }; synthesis: { ageMs: number } }) | null = null;
  if (workerCount > 1) {
    const started = await startNode({ env: { ...process.env }, config: { ...nodeConfig, workers: workerCount }, dbSchema, log: createLogger({ level: 'warn' }) });
    node = started;
    const db = await openDatabase({ databaseUrl: process.env.DATABASE_URL, dataDir: 'memory', schema: dbSchema, max: 2 });
    platform = { url: `http://127.0.0.1:${started.port}`, db, state: { kind: 'redis' }, close: async () => { await started.close(); await db.close(); } };
  } else {
    const p = await startPlatform({ env: { ...process.env }, config: nodeConfig, dbSchema, log: createLogger({ level: 'warn' }) });
    p.runtime.supervisor.watchTurns((tl) => { timelines.push(tl); });
    sendBacklog = () => p.inference.sendBacklog();
    platform = p;
  }
  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const post = async (path: string, body?: unknown) => {
    const r = await fetch(platform.url + path, { method: 'POST', headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, body: (await r.json().catch(() => null)) as any };
  };
  await platform.db.sql`update teams set credit_micros = 1000000000000`;
  const a = await post('/v1/agent/agents', { name: 'bench', config: { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager', record_audio: !process.argv.includes('--no-recording') } } });
  const agent = a.body.agent_id as string;
  await post(`/v1/agent/agents/${agent}/publish`);
  // --nodes 2: a second platform node in a child process, on the same Postgres schema and Redis
  // (two event loops on one host); the callers create every other session on it.
  const nodes = Math.max(1, Math.min(2, arg('nodes', 1)));
  if (nodes === 2 && (!process.env.DATABASE_URL || !process.env.REDIS_URL)) throw new Error('--nodes 2 needs DATABASE_URL and REDIS_URL (the nodes share them)');
  const second = nodes === 2 ? await startSecondNode({ config: nodeConfig, dbSchema }) : null;

  // Session creations per second (closed loop, 32 in flight); the sessions are never joined.
  // The requests come from a child process: an HTTP client in this process would compete with
  // the platform for its event loop and measure itself (in-process fetch capped this at ~170/s;
  // autocannon in a child measured ~790/s on Postgres + Redis, see bench/README.md).
  // --only creations: this phase alone, with what it cost (below); --cpu-profile then covers it.
  const onlyAt = process.argv.indexOf('--only');
  const onlyCreations = onlyAt > 0 && process.argv[onlyAt + 1] === 'creations';
  // --only idle: neither the creation phase nor the talking phase: the baseline sessions talk for
  // `--baseline-seconds` (3 by default here) to warm the shared paths, then the idle phase alone
  // prints the idle memory figures.
  const onlyIdle = onlyAt > 0 && process.argv[onlyAt + 1] === 'idle';
  let creation: CreationReport = { created: 0, failed: 0, ms: 1, latencyMs: { p50: 0, p99: 0 }, cpuS: 0 };
  let creationsPerSecond = 0;
  if (!onlyIdle) {
    const creator = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, BENCH_ROLE: 'creator', BENCH_CREATOR: JSON.stringify({ url: platform.url, key, agent, seconds: creationSeconds, inFlight: 32 }) }, execArgv: ['--import=tsx'] });
    // The creator loads, says ready, and starts when told: the cost window is the creations alone.
    await new Promise((r) => creator.once('message', r));
    const creationProbe = onlyCreations ? await startCreationProbe(process.argv.indexOf('--cpu-profile'), node?.threads ?? []) : null;
    const created = new Promise<CreationReport>((r) => creator.once('message', (m) => r(m as never)));
    creator.send('go');
    creation = await created;
    creationsPerSecond = creation.created / (creation.ms / 1000);
    if (creationProbe) {
      const cost = await creationProbe.stop(creation);
      console.log(JSON.stringify({
        command: `npx tsx bench/sessions.ts --only creations --creations-seconds ${creationSeconds}${node ? ` --workers ${workerCount}` : ''}`,
        store: platform.db.kind,
        state: platform.state.kind,
        workers: workerCount,
        session_creations_per_second: round(creationsPerSecond, 1),
        session_creations: creation.created,
        session_creations_failed: creation.failed,
        session_creation_latency_ms: creation.latencyMs,
        ...cost,
        machine: { cores: os.cpus().length, load_average_1m_at_end: round(os.loadavg()[0]!, 2) },
      }));
      await platform.close();
      await Promise.all(backends.map((b) => b.stop()));
      rmSync(timingsDir, { recursive: true, force: true });
      process.exit(0);
    }
  }

  // --caller-frame-ms: how much audio each caller frame carries (10–100 ms, a multiple of 10;
  // default 100). The SDK's microphone sends 40 ms frames by default, telephony 20 ms: each frame
  // costs the platform a websocket message and a recording copy (bench/README.md, twenty-fifth pass).
  const callerFrameMs = Math.max(10, Math.min(100, Math.round(arg('caller-frame-ms', 100) / 10) * 10));
  const gc = exposeGc();
  gc();
  await sleep(500);
  const memBefore = process.memoryUsage();
  const child = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, BENCH_ROLE: 'callers', BENCH_CALLERS: JSON.stringify({ urls: [platform.url, ...(second ? [second.url] : [])], key, agent, frameMs: callerFrameMs, silent: process.argv.includes('--silent-callers') }) }, execArgv: ['--import=tsx'] });
  lowPriority(child.pid);
  const next = (type: string) => new Promise<any>((r) => { const on = (m: any) => { if (m.type === type) { child.off('message', on); r(m); } }; child.on('message', on); });
  const ask = <T = any>(m: Record<string, unknown>, answer: string): Promise<T> => { const p = next(answer); child.send(m); return p; };
  await next('ready');
  // Phase 1, the reference: `--baseline-sessions` (20) sessions talk alone for
  // `--baseline-seconds`; what their callers hear is what the platform gives an unloaded node.
  const baseN = Math.max(1, Math.min(n, arg('baseline-sessions', 20)));
  const baseSeconds = arg('baseline-seconds', onlyIdle ? 3 : 20);
  const first = await ask({ type: 'connect', from: 0, to: baseN }, 'connected');
  await ask({ type: 'talk', count: baseN }, 'talking');
  await sleep(1000);
  await ask({ type: 'measure' }, 'measuring');
  const baseCpu0 = process.cpuUsage();
  const baseT0 = performance.now();
  await sleep(baseSeconds * 1000);
  const baseCpu = process.cpuUsage(baseCpu0);
  const baseWallS = (performance.now() - baseT0) / 1000;
  const baseline = await ask<CallerReport>({ type: 'report' }, 'report');
  // Phase 2: the others connect and nobody talks (connected, microphones muted): the memory an
  // idle connected session holds.
  await ask({ type: 'talk', count: 0 }, 'talking');
  await sleep(2000);
  gc();
  const memQuiet = process.memoryUsage();
  // --idle-snapshots <prefix>: heap snapshots before and after the idle sessions connect
  // (<prefix>-quiet.heapsnapshot, <prefix>-idle.heapsnapshot), to see what an idle session holds.
  const snapAt = process.argv.indexOf('--idle-snapshots');
  if (snapAt > 0) v8.writeHeapSnapshot(`${process.argv[snapAt + 1]}-quiet.heapsnapshot`);
  const rest = n > baseN ? await ask({ type: 'connect', from: baseN, to: n }, 'connected') : { held: 0, failed: first.failed, ms: 0 };
  await sleep(2000);
  gc();
  const memIdle = process.memoryUsage();
  if (snapAt > 0) v8.writeHeapSnapshot(`${process.argv[snapAt + 1]}-idle.heapsnapshot`);
  const connected = { held: first.held + rest.held, failed: rest.failed };
  if (onlyIdle) {
    const idleHere = rest.held * (second ? 1 / 2 : 1);
    console.log(JSON.stringify({
      command: `npx tsx bench/sessions.ts --only idle --sessions ${n}${baseN !== 20 ? ` --baseline-sessions ${baseN}` : ''}${baseSeconds !== 3 ? ` --baseline-seconds ${baseSeconds}` : ''}${process.argv.includes('--no-recording') ? ' --no-recording' : ''}${light ? ' --light-backend' : ''}${second ? ' --nodes 2' : ''}${node ? ` --workers ${workerCount}` : ''}`,
      store: platform.db.kind,
      state: platform.state.kind,
      sessions_requested: n,
      sessions_held: connected.held,
      sessions_failed: connected.failed,
      idle_sessions: rest.held,
      memory_per_idle_session_kb: kbPer(memIdle.rss - memQuiet.rss, idleHere),
      heap_and_buffers_per_idle_session_kb: kbPer(memIdle.heapUsed + memIdle.arrayBuffers - memQuiet.heapUsed - memQuiet.arrayBuffers, idleHere),
      heap_per_idle_session_kb: kbPer(memIdle.heapUsed - memQuiet.heapUsed, idleHere),
      array_buffers_per_idle_session_kb: kbPer(memIdle.arrayBuffers - memQuiet.arrayBuffers, idleHere),
      external_per_idle_session_kb: kbPer(memIdle.external - memQuiet.external, idleHere),
      machine: { cores: os.cpus().length, load_average_1m_at_end: round(os.loadavg()[0]!, 2) },
      ...(node ? { note_workers: 'the *_per_idle_session_kb figures are null with workers: the bench collects garbage and reads the heap on its main thread only' } : {}),
    }));
    child.send({ type: 'stop' });
    await next('stopped');
    await second?.stop();
    await platform.close();
    await Promise.all(backends.map((b) => b.stop()));
    rmSync(timingsDir, { recursive: true, force: true });
    process.exit(0);
  }
  // Phase 3: every session talks; the measured window starts once each has had time to ask.
  await ask({ type: 'talk', count: n }, 'talking');
  await sleep(settleSeconds * 1000);
  timelines.length = 0;
  await ask({ type: 'measure' }, 'measuring');
  // --cpu-profile <file>: a V8 CPU profile of the platform's thread over the measured window only
  // (not start-up, creations or the ramp), for `bench/README.md`'s hot-spot tables.
  const profileAt = process.argv.indexOf('--cpu-profile');
  const profiler = profileAt > 0 ? new inspector.Session() : null;
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.start');
  }
  // --heap-profile <file>: sampled allocations over the same window (what feeds the collector).
  const heapAt = process.argv.indexOf('--heap-profile');
  const heapProfiler = heapAt > 0 ? new inspector.Session() : null;
  if (heapProfiler) {
    heapProfiler.connect();
    await heapProfiler.post('HeapProfiler.enable');
    await heapProfiler.post('HeapProfiler.startSampling', { samplingInterval: 64 * 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  }
  // CPU of the other processes on the same cores over the same window (Linux /proc; null elsewhere).
  // With several backends, each role's process too (recognition, synthesis, model).
  const roles = backendCount === 1 ? {} : Object.fromEntries(['backend_recognition', 'backend_synthesis', 'backend_model'].slice(0, backendCount).map((r, i) => [r, [backends[i === 2 ? backendCount - 1 : i].status().pid]]));
  const others = { backends: backends.map((b) => b.status().pid), callers: [child.pid], ...roles, ...(second ? { second_node: [second.pid] } : {}) };
  // The platform's main thread alone (its event loop: what queues a turn when it is saturated).
  const mainThread = `/proc/${process.pid}/task/${process.pid}/stat`;
  const main0 = procCpuSeconds([process.pid], mainThread);
  // Every thread of the process by name (V8's collector helpers, libuv's pool, workers, ...).
  const threads0 = threadCpuByName(process.pid);
  // --workers: each worker's thread (its event loop; the collector's helper threads are the process's).
  const workerStat = (node?.threads ?? []).map((tid) => (tid ? `/proc/${process.pid}/task/${tid}/stat` : null));
  const workers0 = workerStat.map((f) => (f ? procCpuSeconds([process.pid], f) : null));
  const secondMain = second ? `/proc/${second.pid}/task/${second.pid}/stat` : null;
  const secondMain0 = secondMain ? procCpuSeconds([second!.pid], secondMain) : null;
  second?.child.send({ type: 'measure' });
  const othersCpu0 = Object.fromEntries(Object.entries(others).map(([k, pids]) => [k, procCpuSeconds(pids)]));
  const machine0 = machineCpuSeconds();
  // The Postgres and Redis servers over the window (every client's: other work counts too).
  const servers0 = serverCpu();
  // The platform's event loop over the window: how late timers fire, and the GC pauses.
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  loopDelay.enable();
  const gcPauses: number[] = [];
  const gcByKind: Record<string, { count: number; total_ms: number; max_ms: number; external_memory?: number }> = {};
  const GC_KINDS: Record<number, string> = { [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor', [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major', [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental', [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb' };
  const gcObserver = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gcPauses.push(e.duration);
      const detail = (e as PerformanceEntry & { detail?: { kind?: number; flags?: number } }).detail;
      const kind = GC_KINDS[detail?.kind ?? 0] ?? 'other';
      const k = (gcByKind[kind] ??= { count: 0, total_ms: 0, max_ms: 0 });
      k.count++;
      // Collections V8 ran because array-buffer memory grew (bench/README.md, fourth pass).
      if ((detail?.flags ?? 0) & constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY) k.external_memory = (k.external_memory ?? 0) + 1;
      k.total_ms = round(k.total_ms + e.duration);
      k.max_ms = round(Math.max(k.max_ms, e.duration));
    }
  });
  gcObserver.observe({ entryTypes: ['gc'] });
  // The oldest wait on each shared call, every 100 ms (the mark that refuses new sessions is on it).
  const backlogAges = { recognition: [] as number[], synthesis: [] as number[] };
  const backlogTimer = sendBacklog && setInterval(() => {
    const b = sendBacklog!();
    backlogAges.recognition.push(b.recognition.ageMs);
    backlogAges.synthesis.push(b.synthesis.ageMs);
  }, 100);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const cpu = process.cpuUsage(cpu0);
  if (backlogTimer) clearInterval(backlogTimer);
  const heard = await ask<CallerReport>({ type: 'report' }, 'report');
  if (heapProfiler) {
    const { profile } = await heapProfiler.post('HeapProfiler.stopSampling');
    await writeFile(process.argv[heapAt + 1]!, JSON.stringify(profile));
    heapProfiler.disconnect();
  }
  if (profiler) {
    const { profile } = await profiler.post('Profiler.stop');
    await writeFile(process.argv[profileAt + 1]!, JSON.stringify(profile));
    profiler.disconnect();
  }
  const wallS = (performance.now() - t0) / 1000;
  const othersCores = Object.fromEntries(Object.entries(others).map(([k, pids]) => {
    const now = procCpuSeconds(pids);
    return [k, now === null || othersCpu0[k] === null ? null : round((now - othersCpu0[k]!) / wallS, 3)];
  }));
  const machine1 = machineCpuSeconds();
  const servers1 = serverCpu();
  if (process.env.DATABASE_URL) othersCores.postgres = round(servers1.postgres(servers0) / wallS, 3);
  if (process.env.REDIS_URL) othersCores.redis = round(servers1.redis(servers0) / wallS, 3);
  loopDelay.disable();
  gcObserver.disconnect();
  gcPauses.sort((x, y) => x - y);
  const main1 = procCpuSeconds([process.pid], mainThread);
  const threads1 = threadCpuByName(process.pid);
  const threadCores = Object.fromEntries(Object.entries(threads1).map(([k, v]) => [k, round((v - (threads0[k] ?? 0)) / wallS, 3)]).filter(([, v]) => (v as number) > 0).sort((a, b) => (b[1] as number) - (a[1] as number)));
  const workers1 = workerStat.map((f) => (f ? procCpuSeconds([process.pid], f) : null));
  const workerCores = workers1.map((c, i) => (c === null || workers0[i] === null ? null : round((c - workers0[i]!) / wallS, 3)));
  const mainThreadCores = main0 === null || main1 === null ? null : round((main1 - main0) / wallS, 3);
  const secondMain1 = secondMain ? procCpuSeconds([second!.pid], secondMain) : null;
  const secondMainCores = secondMain0 === null || secondMain1 === null ? null : round((secondMain1 - secondMain0) / wallS, 3);
  const secondLoop = second ? await second.report() : null;
  const machineBusyCores = machine0 && machine1 ? round((machine1.busy - machine0.busy) / wallS, 3) : null;
  gc();
  const memDuring = process.memoryUsage();
  child.send({ type: 'stop' });
  const stopped = await next('stopped');
  await sleep(2000);
  const rows = await platform.db.sql<{ metrics: { turns: { platform_ms: number | null; total_ms: number | null }[] } | null }[]>`select metrics from sessions where status <> 'pending'`;
  const allTurns = rows.flatMap((r) => r.metrics?.turns ?? []) as unknown as Record<string, number | null>[];
  const part = (k: string) => {
    const v = allTurns.map((x) => x[k]).filter((x): x is number => typeof x === 'number').sort((x, y) => x - y);
    return { p50: round(percentile(v, 50)), p99: round(percentile(v, 99)) };
  };
  const platformMs = rows.flatMap((r) => r.metrics?.turns ?? []).map((t) => t.platform_ms).filter((v): v is number => v !== null).sort((x, y) => x - y);
  const timed = backendTimedPlatformMs(timelines, readBackendTimings(timingFiles));
  const timedMs = timed.values.sort((x, y) => x - y);
  const totalMs = rows.flatMap((r) => r.metrics?.turns ?? []).map((t) => t.total_ms).filter((v): v is number => v !== null).sort((x, y) => x - y);
  const held = connected.held as number;
  const cpuCoreS = (cpu.user + cpu.system) / 1e6;
  // Platform CPU (every thread of the node, both nodes with --nodes 2) per second of one talking session.
  const platformCores = cpuCoreS / wallS + (othersCores.second_node ?? 0);
  const heardN = callerLatency(heard);
  // Memory is this process's (the first node's): with --nodes 2 it holds every other session.
  const share = second ? 1 / 2 : 1;
  const heldHere = held * share;
  const idleHere = rest.held * share;
  const heard20 = callerLatency(baseline);
  console.log(JSON.stringify({
    command: `npx tsx bench/sessions.ts --sessions ${n} --seconds ${seconds} --creations-seconds ${creationSeconds}${settleSeconds !== 3 ? ` --settle-seconds ${settleSeconds}` : ''} --backends ${backendCount}${baseN !== 20 ? ` --baseline-sessions ${baseN}` : ''}${baseSeconds !== 20 ? ` --baseline-seconds ${baseSeconds}` : ''}${callerFrameMs !== 100 ? ` --caller-frame-ms ${callerFrameMs}` : ''}${loadIdle ? ' --load-idle' : platformFirst ? ' --platform-first' : ''}${process.argv.includes('--no-recording') ? ' --no-recording' : ''}${process.argv.includes('--silent-callers') ? ' --silent-callers' : ''}${light ? ' --light-backend' : ''}${second ? ' --nodes 2' : ''}${node ? ` --workers ${workerCount}` : ''}`,
    // The headline: what a caller hears (timed by the callers on their own clock, from the last
    // audio of their question leaving to the first agent audio arriving) with N sessions talking,
    // beside the same with `baseline_sessions` talking alone; and what a talking session costs.
    caller_turn_latency_ms: {
      sessions: n, ...heardN,
      baseline: { sessions: baseN, seconds: baseSeconds, ...heard20 },
      ...inflation(heardN, heard20),
      callers_event_loop_delay_ms: heard.loop,
    },
    platform_cpu_ms_per_talking_session_second: held ? round((platformCores * 1000) / held, 3) : null,
    platform_cpu_ms_per_talking_session_second_at_baseline: first.held ? round(((baseCpu.user + baseCpu.system) / 1e3 / baseWallS) / first.held, 3) : null,
    memory_per_talking_session_kb: kbPer(memDuring.rss - memBefore.rss, heldHere),
    memory_per_idle_session_kb: kbPer(memIdle.rss - memQuiet.rss, idleHere),
    heap_and_buffers_per_idle_session_kb: kbPer(memIdle.heapUsed + memIdle.arrayBuffers - memQuiet.heapUsed - memQuiet.arrayBuffers, idleHere),
    array_buffers_per_idle_session_kb: kbPer(memIdle.arrayBuffers - memQuiet.arrayBuffers, idleHere),
    heap_and_buffers_per_talking_session_kb: kbPer(memDuring.heapUsed + memDuring.arrayBuffers - memBefore.heapUsed - memBefore.arrayBuffers, heldHere),
    machine: { cores: os.cpus().length, load_average_1m_at_end: round(os.loadavg()[0]!, 2) },
    backend: light ? 'light (bench/light-backend.ts)' : 'native (synthetic engine)',
    platform_first: platformFirst,
    load_idle: loadIdle,
    backends: backendCount,
    store: platform.db.kind,
    state: platform.state.kind,
    sessions_requested: n,
    sessions_held: held,
    sessions_failed: connected.failed,
    sessions_open_at_end: stopped.open,
    platform_cpu_cores: round(cpuCoreS / wallS, 3),
    platform_main_thread_cores: mainThreadCores,
    // The process's threads by name over the window (`main` is the event loop; V8's helper
    // threads run the collector's parallel and concurrent work; `libuv-worker` file writes).
    platform_thread_cores: threadCores,
    ...(node ? {
      workers: workerCount,
      worker_thread_cpu_cores: workerCores,
      note_workers: 'platform_cpu_cores is the whole node (every worker, the collector threads, the idle main thread); worker_thread_cpu_cores each worker\'s own thread; event_loop_delay_ms is the main thread\'s (idle): not a worker\'s; no backend-timed turns (platform_added_backend_timed_ms) with workers; memory_* and *_per_*_session_kb are null: the bench collects garbage on its main thread only, so the workers\' heaps (the creation phase\'s garbage among them) are uncollected at its baselines and the differences came out negative',
    } : {}),
    ...(second ? {
      nodes: 2,
      note_nodes: 'platform_* (but platform_cpu_ms_per_talking_session_second), memory_* and event_loop_delay_ms are the first node, memory per the half of the sessions it holds; second_node is the other; platform_cpu_cores_all_nodes both',
      second_node: { cpu_cores: othersCores.second_node, main_thread_cores: secondMainCores, event_loop_delay_ms: secondLoop },
      platform_cpu_cores_all_nodes: round(cpuCoreS / wallS + (othersCores.second_node ?? 0), 3),
    } : {}),
    event_loop_delay_ms: { p50: round(loopDelay.percentile(50) / 1e6), p99: round(loopDelay.percentile(99) / 1e6), max: round(loopDelay.max / 1e6) },
    // Sampled every 100 ms; null with workers (each has its own; /metrics gives the node's).
    inference_send_backlog_age_ms: sendBacklog ? Object.fromEntries(Object.entries(backlogAges).map(([k, v]) => { v.sort((x, y) => x - y); return [k, { p50: round(percentile(v, 50)), p99: round(percentile(v, 99)), max: round(v.at(-1) ?? 0) }]; })) : null,
    young_generation_mb: round((v8.getHeapSpaceStatistics().find((x) => x.space_name === 'new_space')?.space_size ?? 0) / 1048576, 1),
    gc_pauses: { count: gcPauses.length, total_ms: round(gcPauses.reduce((a, b) => a + b, 0)), p99_ms: round(percentile(gcPauses, 99)), max_ms: round(gcPauses.at(-1) ?? 0), by_kind: gcByKind },
    other_cpu_cores: { ...othersCores, machine_busy: machineBusyCores, machine_cores: os.cpus().length },
    cpu_per_session_percent_of_core: held ? round((platformCores / held) * 100, 3) : null,
    turns: platformMs.length,
    agent_audio_seconds_received: round(stopped.agentAudioSeconds, 1),
    platform_added_turn_latency_ms: { p50: round(percentile(platformMs, 50)), p99: round(percentile(platformMs, 99)) },
    platform_added_backend_timed_ms: {
      p50: round(percentile(timedMs, 50)), p99: round(percentile(timedMs, 99)), max: round(timedMs.at(-1) ?? 0), turns: timedMs.length, unmatched: timed.unmatched,
      by_hop: Object.fromEntries(HOPS.map((h) => { const v = [...timed.hops[h]].sort((x, y) => x - y); return [h, { p50: round(percentile(v, 50)), p99: round(percentile(v, 99)) }]; })),
      ...(second ? { note: 'turns of the first node only' } : {}),
    },
    backend_event_loop_delay_ms: Object.fromEntries(readBackendLoops(timingFiles).map((l, i) => [(backendCount === 1 ? ['backend'] : backendCount === 2 ? ['backend_recognition', 'backend_synthesis_and_model'] : ['backend_recognition', 'backend_synthesis', 'backend_model'])[i], l && { p50: round(l.p50Ms), p99: round(l.p99Ms), max: round(l.maxMs) }])),
    turn_latency_total_ms: { p50: round(percentile(totalMs, 50)), p99: round(percentile(totalMs, 99)) },
    turn_latency_parts_ms: { recognition: part('recognition_ms'), decide: part('decide_ms'), model: part('model_ms'), synthesis: part('synthesis_ms') },
    backend_cpu_note: 'the native backend (synthetic recognizer and synthesizer) runs in its own process on the same cores',
    session_creations_per_second: round(creationsPerSecond, 1),
    session_creations_failed: creation.failed,
    session_creation_latency_ms: creation.latencyMs,
    client_messages_seen: stopped.seen,
  }));
  await second?.stop();
  await platform.close();
  await Promise.all(backends.map((b) => b.stop()));
  rmSync(timingsDir, { recursive: true, force: true });
  process.exit(0);
}

/** What the callers report of a window: each answered question's latency on their clock. */
interface CallerReport { latencies: number[]; missed: number; overlapped: number; loop: { p50: number; p99: number; max: number } }

function callerLatency(r: CallerReport) {
  const v = [...r.latencies].sort((x, y) => x - y);
  // `unanswered`: a question whose caller heard nothing before asking again; `overlapped`: asked
  // while the agent was still speaking (its answer cannot be told from the earlier one: not timed).
  return { p50: round(percentile(v, 50)), p90: round(percentile(v, 90)), p99: round(percentile(v, 99)), max: round(v.at(-1) ?? NaN), turns: v.length, unanswered: r.missed, overlapped: r.overlapped };
}

/**
 * A run's latency over its baseline's. Questions asked while the agent still spoke (`overlapped`)
 * or never answered are not timed: when more than 1 % of either run's questions were, the
 * platform fell behind (a run on 2026-11-28 had recognition 5.4 s late and 2,059 of 2,522
 * questions overlapped), the timed ones are the survivors, and their p99 looked better than a
 * healthy run's. Then the inflation is null and `not_comparable` says why.
 */
function inflation(n: ReturnType<typeof callerLatency>, base: ReturnType<typeof callerLatency>) {
  const untimed = (r: ReturnType<typeof callerLatency>) => r.unanswered + r.overlapped;
  const percent = (r: ReturnType<typeof callerLatency>) => round((100 * untimed(r)) / Math.max(1, r.turns + untimed(r)), 1);
  const bad = [n, base].filter((r) => percent(r) > 1);
  if (bad.length === 0) return { untimed_questions_percent: percent(n), inflation_p50: round(n.p50 - base.p50), inflation_p99: round(n.p99 - base.p99) };
  return {
    untimed_questions_percent: percent(n),
    inflation_p50: null,
    inflation_p99: null,
    not_comparable: `${bad.map((r) => `${untimed(r)} of ${r.turns + untimed(r)} questions${r === base ? ' at the baseline' : ''}`).join(' and ')} were not timed (asked while the agent still spoke, or never answered): the platform fell behind, and the timed ones are only the questions that did not wait; read platform_added_backend_timed_ms.by_hop and turn_latency_parts_ms`,
  };
}

/** `global.gc`, exposed at run time (the bench runs under plain tsx, without `--expose-gc`). */
function exposeGc(): () => void {
  if (global.gc) return global.gc;
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** `--nodes 2`: the second platform node, in a child process (role `node`). */
async function startSecondNode(o: { config: Record<string, unknown>; dbSchema: string | undefined }) {
  // Its logs go to stderr: stdout carries this bench's one JSON line.
  const child = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, BENCH_ROLE: 'node', BENCH_NODE: JSON.stringify(o) }, execArgv: [...process.execArgv.filter((a) => a.startsWith('--max-semi-space-size')), '--import=tsx'], stdio: ['ignore', 2, 2, 'ipc'] });
  const on = <T>(type: string) => new Promise<T>((resolve) => child.on('message', (m: { type: string }) => { if (m.type === type) resolve(m as T); }));
  const { url } = await on<{ url: string }>('ready');
  return {
    child,
    url,
    pid: child.pid!,
    report: () => { const r = on<{ loop: unknown }>('report'); child.send({ type: 'report' }); return r.then((m) => m.loop); },
    stop: () => { const done = on('stopped'); child.send({ type: 'stop' }); return done; },
  };
}

/** The second node's process: a platform on the first node's database schema and Redis. */
async function secondNode() {
  const o = JSON.parse(process.env.BENCH_NODE!) as { config: NonNullable<Parameters<typeof startPlatform>[0]>["config"]; dbSchema?: string };
  const platform = await startPlatform({ env: { ...process.env }, config: o.config, dbSchema: o.dbSchema, log: createLogger({ level: 'warn' }) });
  const loop = monitorEventLoopDelay({ resolution: 5 });
  process.on('message', async (m: { type: string }) => {
    if (m.type === 'measure') loop.enable();
    else if (m.type === 'report') {
      loop.disable();
      process.send!({ type: 'report', loop: { p50: round(loop.percentile(50) / 1e6), p99: round(loop.percentile(99) / 1e6), max: round(loop.max / 1e6) } });
    } else if (m.type === 'stop') {
      await platform.close();
      process.send!({ type: 'stopped' }, () => process.exit(0));
    }
  });
  process.send!({ type: 'ready', url: platform.url });
}

/** User + system CPU seconds of these processes (Linux `/proc/<pid>/stat`), null when unreadable. */
function procCpuSeconds(pids: (number | null | undefined)[], path?: string): number | null {
  let ticks = 0;
  try {
    for (const pid of pids) {
      if (!pid) return null;
      const f = readFileSync(path ?? `/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime, stime (fields 14 and 15 of stat)
    }
  } catch {
    return null;
  }
  return ticks / 100; // USER_HZ
}

/**
 * CPU seconds of each thread of `pid` (Linux), keyed `main` for the process's own thread and
 * `name#i` for the others in the order they were created (Node 20 names every thread `node`:
 * the first ones, started with the process, are V8's platform workers that run the collector's
 * parallel and concurrent work; libuv's pool threads start on its first use, later).
 */
function threadCpuByName(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  try {
    const tids = readdirSync(`/proc/${pid}/task`).map(Number).sort((a, b) => a - b);
    tids.forEach((tid, i) => {
      try {
        const raw = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = tid === pid ? 'main' : `${raw.slice(raw.indexOf('(') + 1, raw.lastIndexOf(')')).trim()}#${i}`;
        const f = raw.slice(raw.lastIndexOf(') ') + 2).split(' ');
        out[name] = (Number(f[11]) + Number(f[12])) / 100;
      } catch {
        // the thread ended between the listing and the read
      }
    });
  } catch {
    // not Linux
  }
  return out;
}

/** Busy CPU seconds of the whole machine so far (`/proc/stat`), null when unreadable. */
function machineCpuSeconds(): { busy: number } | null {
  try {
    const [, ...v] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
    const n = v.map(Number);
    return { busy: (n.reduce((a, b) => a + b, 0) - n[3]! - n[4]!) / 100 }; // all but idle and iowait
  } catch {
    return null;
  }
}

/** What the creator child reports: counts, latency, and its own CPU over the run. */
interface CreationReport { created: number; failed: number; ms: number; latencyMs: { p50: number; p99: number }; cpuS: number }

/**
 * `--only creations`: what the creation phase cost. CPU of the platform (this process, every
 * thread; each worker's thread), of the creator child (its own figure), of the machine, of the
 * Postgres and Redis server processes (every client's: other work on the machine counts too);
 * and the store round trips per creation as the servers count them (`pg_stat_database`
 * transactions of the database, Redis `total_commands_processed`: machine-wide, so an upper
 * bound when other work uses them). `--cpu-profile file`: the platform's main thread over the
 * phase (the single loop; with `--workers` the workers are not profiled).
 */
async function startCreationProbe(profileAt: number, threads: (number | null)[]) {
  const pg = process.env.DATABASE_URL ? (await import('postgres')).default(process.env.DATABASE_URL, { max: 1, onnotice: () => {} }) : null;
  const redis = process.env.REDIS_URL ? new (await import('ioredis')).Redis(process.env.REDIS_URL) : null;
  const counters = async () => ({
    pgXacts: pg ? Number((await pg`select xact_commit + xact_rollback as n from pg_stat_database where datname = current_database()`)[0]!.n) : null,
    redisCommands: redis ? Number(/total_commands_processed:(\d+)/.exec(await redis.info('stats'))?.[1]) : null,
  });
  const profiler = profileAt > 0 ? new inspector.Session() : null;
  if (profiler) {
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.start');
  }
  const c0 = await counters();
  const servers0 = serverCpu();
  const main0 = procCpuSeconds([process.pid], `/proc/${process.pid}/task/${process.pid}/stat`);
  const machine0 = machineCpuSeconds();
  const cpu0 = process.cpuUsage();
  const workerStat = threads.map((tid) => (tid ? `/proc/${process.pid}/task/${tid}/stat` : null));
  const workers0 = workerStat.map((f) => (f ? procCpuSeconds([process.pid], f) : null));
  const t0 = performance.now();
  return {
    async stop(creation: CreationReport) {
      const wallS = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      const main1 = procCpuSeconds([process.pid], `/proc/${process.pid}/task/${process.pid}/stat`);
      const machine1 = machineCpuSeconds();
      const servers1 = serverCpu();
      const c1 = await counters();
      const workers1 = workerStat.map((f) => (f ? procCpuSeconds([process.pid], f) : null));
      if (profiler) {
        const { profile } = await profiler.post('Profiler.stop');
        await writeFile(process.argv[profileAt + 1]!, JSON.stringify(profile));
        profiler.disconnect();
      }
      await pg?.end();
      redis?.disconnect();
      const cores = (a: number | null, b: number | null) => (a === null || b === null ? null : round((b - a) / wallS, 3));
      const platformCoreS = (cpu.user + cpu.system) / 1e6;
      const per = (a: number | null, b: number | null) => (a === null || b === null || !creation.created ? null : round((b - a) / creation.created, 2));
      return {
        platform_cpu_cores: round(platformCoreS / wallS, 3),
        platform_main_thread_cores: cores(main0, main1),
        ...(threads.length ? { worker_thread_cpu_cores: workers1.map((c, i) => cores(workers0[i]!, c)) } : {}),
        platform_cpu_ms_per_creation: creation.created ? round((platformCoreS * 1000) / creation.created, 3) : null,
        creator_cpu_cores: round(creation.cpuS / (creation.ms / 1000), 3),
        postgres_cpu_cores: round(servers1.postgres(servers0) / wallS, 3),
        redis_cpu_cores: round(servers1.redis(servers0) / wallS, 3),
        machine_busy_cores: machine0 && machine1 ? round((machine1.busy - machine0.busy) / wallS, 3) : null,
        postgres_transactions_per_creation: per(c0.pgXacts, c1.pgXacts),
        redis_commands_per_creation: per(c0.redisCommands, c1.redisCommands),
        note: 'postgres_* and redis_* count every client of those servers (other work on the machine included); Postgres CPU sums the processes alive at the end',
      };
    },
  };
}

/**
 * CPU seconds of every Postgres and Redis server process now (Linux `/proc`; empty elsewhere);
 * `postgres(before)` / `redis(before)`: the seconds spent since, a process born since counted whole.
 */
function serverCpu() {
  const cpu = new Map<string, { kind: 'postgres' | 'redis'; s: number }>();
  let dirs: string[] = [];
  try { dirs = readdirSync('/proc').filter((d) => /^\d+$/.test(d)); } catch { /* not Linux */ }
  for (const d of dirs) {
    try {
      const comm = readFileSync(`/proc/${d}/comm`, 'utf8');
      const kind = comm.startsWith('postgres') ? 'postgres' : comm.startsWith('redis-server') ? 'redis' : null;
      if (kind) cpu.set(d, { kind, s: procCpuSeconds([Number(d)]) ?? 0 });
    } catch { /* gone */ }
  }
  const since = (kind: 'postgres' | 'redis') => (before: { cpu: Map<string, { s: number }> }) =>
    [...cpu].filter(([, v]) => v.kind === kind).reduce((sum, [pid, v]) => sum + Math.max(0, v.s - (before.cpu.get(pid)?.s ?? 0)), 0);
  return { cpu, postgres: since('postgres'), redis: since('redis') };
}

/** The creator child: session creations in a closed loop (autocannon, a light client), reported once. */
async function creator() {
  const { url, key, agent, seconds, inFlight } = JSON.parse(process.env.BENCH_CREATOR!) as { url: string; key: string; agent: string; seconds: number; inFlight: number };
  await new Promise((r) => { process.once('message', r); process.send!('ready'); });
  const cpu0 = process.cpuUsage();
  const r = await autocannon({
    url: `${url}/v1/agent/sessions`,
    method: 'POST',
    connections: inFlight,
    duration: seconds,
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ agent_id: agent }),
  });
  const cpu = process.cpuUsage(cpu0);
  process.send!({ created: r['2xx'], failed: r.non2xx + r.errors + r.timeouts, ms: r.duration * 1000, latencyMs: { p50: r.latency.p50, p99: r.latency.p99 }, cpuS: (cpu.user + cpu.system) / 1e6 } satisfies CreationReport, () => process.exit(0));
}

/**
 * The platform runs in this process, with the Node flags `npm start` gives it (V8's young
 * generation, D-SCALE-12): this process starts again with them unless it has them.
 * `--young-generation N` runs it with N MB semi-spaces instead, `default` with V8's own size
 * (before-and-after comparisons).
 */
function withPlatformFlags(): boolean {
  const i = process.argv.indexOf('--young-generation');
  const value = process.argv[i + 1] ?? '';
  if (i >= 0 && value !== 'default' && !/^[1-9]\d*$/.test(value)) throw new Error(`--young-generation takes "default" or a semi-space size in MB, not "${value}"`);
  const asked = i < 0 ? platformNodeFlags() : value === 'default' ? [] : [`--max-semi-space-size=${value}`];
  const has = process.execArgv.filter((a) => a.startsWith('--max-semi-space-size'));
  if (asked.join(' ') === has.join(' ')) return false;
  const rest = process.execArgv.filter((a) => !a.startsWith('--max-semi-space-size'));
  const r = spawnSync(process.execPath, [...asked, ...rest, ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

if (process.env.BENCH_ROLE === 'callers') void callers();
else if (process.env.BENCH_ROLE === 'creator') void creator();
else if (process.env.BENCH_ROLE === 'node') void secondNode();
else if (!withPlatformFlags()) void main();
