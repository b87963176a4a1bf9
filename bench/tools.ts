/**
 * Background tool calls under load: 1,000 concurrent background calls across 100 sessions
 * (10 each, the per-conversation limit) against a slow local endpoint, while other sessions
 * keep talking.
 *
 *   npx tsx bench/tools.ts [--sessions 100] [--calls 10] [--slow-ms 20000] [--probes 10]
 *
 * The platform runs in this process; the native backend (synthetic speech, scripted model,
 * fast pacing) runs as its own child process; the callers and the slow tool endpoint run in a
 * second child, so this process's CPU, memory and event loop are the platform's alone.
 * Each tool session sends typed turns ("Please slowjob.") until it has `--calls` background
 * calls in flight; the endpoint holds every request for `--slow-ms`, then answers, and the
 * agents announce the results. Probe sessions (no tools in use) ask for a long spoken reply
 * over and over; the callers measure the gaps between their agent audio frames (sent every
 * 20 ms in real time), so a stall of another session's audio shows as a large gap.
 *
 * Prints one JSON object: calls started / completed / failed, the endpoint's peak concurrent
 * requests, memory (RSS and heap) with the calls in flight against before, the event-loop
 * delay of the platform process while they are in flight, and the probe sessions' audio gaps.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { spawnNativeBackend } from '../src/inference/index.ts';
import { createLogger } from '../src/log.ts';
import { startPlatform } from '../src/platform.ts';
import { percentile, round } from './lib.ts';

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ------------------------------------------------------------------------------------------
// The child: the slow endpoint, the tool sessions and the probe sessions.

interface CallerConfig {
  url: string;
  key: string;
  toolAgent: string;
  probeAgent: string;
  sessions: number;
  calls: number;
  probes: number;
}

async function child() {
  // The slow endpoint: holds each request for slowMs, then answers.
  const slowMs = Number(process.env.BENCH_SLOW_MS);
  let open = 0;
  let peak = 0;
  let answered = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    open++;
    peak = Math.max(peak, open);
    const timer = setTimeout(() => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"done":true}'), slowMs);
    res.on('close', () => {
      clearTimeout(timer);
      open--;
      answered++;
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  process.send!({ type: 'endpoint', port: (server.address() as AddressInfo).port });
  const cfg = await new Promise<CallerConfig>((r) => process.once('message', (m: any) => r(m.cfg)));

  const join = async (agent: string) => {
    const r = await fetch(`${cfg.url}/v1/agent/sessions`, { method: 'POST', headers: { Authorization: `Bearer ${cfg.key}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ agent_id: agent }) });
    if (r.status !== 200) throw new Error(`session ${r.status}`);
    const s = (await r.json()) as { websocket_url: string; token: string };
    const ws = new WebSocket(`${s.websocket_url.replace('localhost', '127.0.0.1')}?token=${s.token}`);
    ws.on('error', () => {});
    await new Promise<void>((res, rej) => { ws.once('open', () => res()); ws.once('close', () => rej(new Error('closed'))); });
    return ws;
  };

  let started = 0;
  let completed = 0;
  let failed = 0;
  let announced = 0;
  const toolSockets: WebSocket[] = [];
  const joined = await Promise.all(Array.from({ length: cfg.sessions }, async (_, i) => {
    await sleep((i * 2000) / cfg.sessions);
    return join(cfg.toolAgent);
  }));
  toolSockets.push(...joined);
  const probeSockets = await Promise.all(Array.from({ length: cfg.probes }, () => join(cfg.probeAgent)));
  process.send!({ type: 'connected' });
  await new Promise((r) => process.once('message', r));
  const t0 = performance.now();
  const tools = joined.map(async (ws) => {
    let mine = 0;
    let wake: (() => void) | null = null;
    ws.on('message', (d, bin) => {
      if (bin) return;
      const m = JSON.parse(String(d));
      if (m.type === 'tool.started') { started++; mine++; wake?.(); }
      else if (m.type === 'tool.completed') {
        if (completed++ === 0) {
          phase = 'settle';
          process.send!({ type: 'first-result' });
        }
      }
      else if (m.type === 'tool.failed') failed++;
      else if (m.topic === 'lk.transcription' && m.role === 'agent' && m.final && String(m.text).includes('{"done":true}')) announced++;
    });
    for (let k = 0; k < cfg.calls; k++) {
      const seen = mine;
      ws.send(JSON.stringify({ type: 'user.message', text: 'Please slowjob.' }));
      await new Promise<void>((r) => {
        const t = setTimeout(r, 10_000);
        wake = () => { if (mine > seen) { clearTimeout(t); r(); } };
      });
    }
  });

  // Probes: long spoken replies, asked again as soon as one ends; gaps between audio frames.
  // Gaps by phase, as in the platform's lag figures: ramp, plateau (every call in flight), settle.
  const gaps: Record<'ramp' | 'plateau' | 'settle', number[]> = { ramp: [], plateau: [], settle: [] };
  let phase: keyof typeof gaps = 'ramp';
  let probeAudioS = 0;
  let measuring = false;
  const long = 'Please say "' + Array.from({ length: 30 }, (_, i) => `word${i}`).join(' ') + '."';
  const probes = probeSockets.map(async (ws) => {
    let last = 0;
    ws.on('message', (d, bin) => {
      if (bin) {
        const now = performance.now();
        if (measuring && last) gaps[phase].push(now - last);
        last = now;
        probeAudioS += (d as Buffer).length / 32_000;
        return;
      }
      const m = JSON.parse(String(d));
      if (m.topic === 'lk.transcription' && m.role === 'agent' && m.final) {
        last = 0; // the next reply's first frame is not a gap
        ws.send(JSON.stringify({ type: 'user.message', text: long }));
      }
    });
    ws.send(JSON.stringify({ type: 'user.message', text: long }));
  });

  await Promise.all(probes);
  measuring = true;
  await Promise.all(tools);
  if (phase === 'ramp') phase = 'plateau';
  process.send!({ type: 'in-flight', started, open, peak, rampMs: performance.now() - t0 });
  // Wait for every call to settle and be announced (or give up after slowMs + 30 s).
  const deadline = Date.now() + slowMs + 30_000;
  while (Date.now() < deadline && (completed + failed < started || announced < cfg.sessions)) await sleep(200);
  measuring = false;
  const gapStats = (v: number[]) => {
    v.sort((a, b) => a - b);
    return { frames: v.length, p50: round(percentile(v, 50)), p99: round(percentile(v, 99)), max: round(v[v.length - 1] ?? 0), over_100ms: v.filter((g) => g > 100).length, over_250ms: v.filter((g) => g > 250).length };
  };
  const report = {
    type: 'done', started, completed, failed, announcements: announced, endpoint_peak_concurrent: peak, endpoint_answered: answered,
    probe_audio_seconds: round(probeAudioS, 1),
    probe_audio_frame_gaps_ms: { ramp: gapStats(gaps.ramp), plateau: gapStats(gaps.plateau), settle: gapStats(gaps.settle) },
  };
  for (const ws of [...toolSockets, ...probeSockets]) ws.send(JSON.stringify({ type: 'user.hangup' }));
  await sleep(500);
  for (const ws of [...toolSockets, ...probeSockets]) ws.terminate();
  server.closeAllConnections();
  server.close();
  process.send!(report);
  process.exit(0);
}

// ------------------------------------------------------------------------------------------
// The platform side.

async function main() {
  const sessions = arg('sessions', 100);
  const calls = arg('calls', 10);
  const slowMs = arg('slow-ms', 20_000);
  const probesN = arg('probes', 10);
  const key = `pk_bench_${randomBytes(16).toString('hex')}`;
  const kid = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, BENCH_ROLE: 'child', BENCH_SLOW_MS: String(slowMs) }, execArgv: ['--import=tsx'] });
  const next = (type: string) => new Promise<any>((r) => kid.on('message', (m: any) => { if (m.type === type) r(m); }));
  const { port } = await next('endpoint');
  const allow = [`127.0.0.1:${port}`];
  process.env.PARLEY_OUTBOUND_ALLOW = allow.join(','); // the write-time URL check of the tool

  const backend = await spawnNativeBackend({ address: '127.0.0.1:0', engine: 'synthetic', env: { PARLEY_SYNTHETIC_PACING: 'fast' } });
  const platform = await startPlatform({
    env: { ...process.env },
    config: {
      host: '127.0.0.1', port: 0, dataDir: 'memory', bootstrapKey: key, logLevel: 'error',
      startNativeBackend: false, speechEngine: 'synthetic', backendAddress: backend.address,
      maxSessions: 100_000, outboundAllow: allow, databaseUrl: process.env.DATABASE_URL, redisUrl: process.env.REDIS_URL,
    },
    dbSchema: process.env.DATABASE_URL ? `bench_${randomBytes(4).toString('hex')}` : undefined,
    log: createLogger({ level: 'error' }),
  });
  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const post = async (path: string, body?: unknown) => {
    const r = await fetch(platform.url + path, { method: 'POST', headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, body: (await r.json().catch(() => null)) as any };
  };
  await platform.db.sql`update teams set credit_micros = 1000000000000`;
  const tool = await post('/v1/agent/tools', { name: 'Slowjob', description: 'A slow job', url: `http://127.0.0.1:${port}/job`, execution_mode: 'background', timeout_seconds: 300 });
  if (tool.status !== 201) throw new Error(`tool: ${tool.status} ${JSON.stringify(tool.body)}`);
  const agentOf = async (config: unknown) => {
    const a = await post('/v1/agent/agents', { name: 'bench', config });
    await post(`/v1/agent/agents/${a.body.agent_id}/publish`);
    return a.body.agent_id as string;
  };
  // Recording is off: this measures tool calls, not the recorder's disk writes.
  const base = { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager', record_audio: false } };
  const toolAgent = await agentOf({ ...base, tools: { tool_ids: [tool.body.tool_id] } });
  const probeAgent = await agentOf(base);

  global.gc?.();
  await sleep(500);
  kid.send({ cfg: { url: platform.url, key, toolAgent, probeAgent, sessions, calls, probes: probesN } satisfies CallerConfig });
  await next('connected');
  await sleep(1000);
  global.gc?.();
  const memBefore = process.memoryUsage();
  // Event-loop lag: how late a 10 ms timer fires, sampled for the whole call phase.
  // Phases: ramp (the typed turns that start the calls), plateau (every call in flight, only
  // the probes talking), settle (results arriving and announced).
  const lags: Record<'ramp' | 'plateau' | 'settle', number[]> = { ramp: [], plateau: [], settle: [] };
  let phase: keyof typeof lags = 'ramp';
  let expected = performance.now() + 10;
  const sampler = setInterval(() => {
    const now = performance.now();
    lags[phase].push(Math.max(0, now - expected));
    expected = now + 10;
  }, 10);
  kid.on('message', (m: any) => { if (m.type === 'first-result') phase = 'settle'; });
  kid.send({ type: 'go' });
  const inFlight = await next('in-flight');
  if (phase === 'ramp') phase = 'plateau';
  const memInFlight = process.memoryUsage();
  const done = await next('done');
  clearInterval(sampler);
  const lag = (v: number[]) => {
    v.sort((a, b) => a - b);
    return { samples: v.length, p50: round(percentile(v, 50)), p99: round(percentile(v, 99)), max: round(v[v.length - 1] ?? 0) };
  };
  const { type: _t, ...result } = done;
  console.log(JSON.stringify({
    command: `npx tsx bench/tools.ts --sessions ${sessions} --calls ${calls} --slow-ms ${slowMs} --probes ${probesN}`,
    store: platform.db.kind,
    tool_sessions: sessions,
    calls_per_session: calls,
    probe_sessions: probesN,
    endpoint_open_after_ramp: inFlight.open,
    ramp_ms: round(inFlight.rampMs),
    ...result,
    memory_in_flight_mb: { rss_delta: round((memInFlight.rss - memBefore.rss) / 2 ** 20, 1), heap_delta: round((memInFlight.heapUsed - memBefore.heapUsed) / 2 ** 20, 1), rss: round(memInFlight.rss / 2 ** 20, 1) },
    heap_per_call_kb: inFlight.open ? round((memInFlight.heapUsed - memBefore.heapUsed) / inFlight.open / 1024, 1) : null,
    event_loop_lag_ms: { ramp: lag(lags.ramp), plateau: lag(lags.plateau), settle: lag(lags.settle) },
    notes: 'memory: every session connected, before the calls vs with the calls in flight (includes the turns that made them and the probe traffic). event-loop lag (how late a 10 ms timer fires) of the platform process: ramp = the typed turns starting the calls, plateau = all calls in flight, settle = results arriving and being announced',
  }));
  await platform.close();
  await backend.stop();
  process.exit(0);
}

if (process.env.BENCH_ROLE === 'child') void child();
else void main();
