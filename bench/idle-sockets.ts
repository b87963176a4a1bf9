// Idle and slow clients against one platform (docs/reliability.md, "Slow clients"), one run:
// 1. `ws`: `--sockets` (default 10,000) WebSocket connections that upgrade without a key and
//    never send their first message (`…/stream-input`, whose key may come in that message):
//    how many were held at once, the platform's memory per socket, when and how each was
//    closed (the platform's `PARLEY_WS_START_TIMEOUT_MS`, 10 s by default: 4408).
// 2. `headers`: as many plain TCP connections that send half a request's headers, then one
//    byte every 2 s (slowloris): held, memory, when uWS closed them.
// 3. `body`: as many requests (`POST /v1/tts`, a valid key) whose headers are complete and whose
//    body comes one byte every 2 s: held, memory, when and how they ended.
// Beside each phase a prober (its own process) times `GET /health` and `POST /v1/tts` (a short
// wav) one after the other: before the load, and while the load's connections are all held.
// The platform runs in this process (its memory is read here, after a forced GC); the load and
// the prober each in a child process, under `ulimit -n 65536`. Prints one JSON object.
//
//   npx tsx bench/idle-sockets.ts [--sockets 10000] [--phases ws,headers,body] [--probe-ms 3000]
import os from 'node:os';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { spawnNativeBackend } from '../src/inference/index.ts';
import { benchChild, ensureFdLimit, memoryAfterGc as memory, openCrowd, percentile, round, startBenchPlatform, type CrowdMode } from './lib.ts';

// The children: this script again, a mode each (`IDLE_BENCH`). `probe` times requests for `ms`
// and reports; a crowd's mode opens the connections (bench/lib.ts `openCrowd`), reports `held`
// once all are open, then `done` with each one's time from its opening to its close.
if (process.env.IDLE_BENCH) {
  const o = JSON.parse(process.env.IDLE_BENCH) as { mode: 'probe' | CrowdMode; port: string; key: string; n: number; ms: number };
  if (o.mode === 'probe') await probeChild(o);
  else {
    const crowd = openCrowd({ mode: o.mode, n: o.n, port: o.port, key: o.key });
    process.send!({ type: 'held', ...(await crowd.held) });
    const done = await crowd.done;
    process.send!({ type: 'done', held: done.opened, failed: done.failed, closedMs: done.closedMs, outcomes: done.outcomes }, () => process.exit(0));
  }
} else await main();

async function probeChild(o: { port: string; key: string; ms: number }) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const req = (method: string, path: string, body?: string) => new Promise<{ ms: number; status: number }>((resolve) => {
    const t0 = performance.now();
    const r = http.request({ host: '127.0.0.1', port: o.port, method, path, agent, headers: body ? { 'Content-Type': 'application/json', Authorization: `Bearer ${o.key}` } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve({ ms: performance.now() - t0, status: res.statusCode! }));
    });
    r.on('error', () => resolve({ ms: performance.now() - t0, status: 0 }));
    r.end(body);
  });
  const health: number[] = [], tts: number[] = [], bad: number[] = [];
  const until = performance.now() + o.ms;
  while (performance.now() < until) {
    const h = await req('GET', '/health');
    if (h.status === 200) health.push(h.ms); else bad.push(h.status);
    const t = await req('POST', '/v1/tts', JSON.stringify({ text: 'Probe.', format: 'wav' }));
    if (t.status === 200) tts.push(t.ms); else bad.push(t.status);
  }
  const r1 = (x: number) => (Number.isNaN(x) ? null : Math.round(x * 10) / 10);
  const sum = (a: number[]) => {
    const s = a.sort((x, y) => x - y);
    return { n: s.length, p50: r1(percentile(s, 50)), p99: r1(percentile(s, 99)), max: r1(percentile(s, 100)) };
  };
  process.send!({ health: sum(health), tts: sum(tts), failed: bad.length }, () => process.exit(0));
}

async function main() {
  const { values } = parseArgs({
    options: {
      sockets: { type: 'string', default: '10000' },
      phases: { type: 'string', default: 'ws,headers,body' },
      'probe-ms': { type: 'string', default: '3000' },
    },
  });
  const SOCKETS = Number(values.sockets);
  const PROBE_MS = Number(values['probe-ms']);

  // This process holds every connection's server side: it re-runs itself under a raised
  // descriptor limit when it is short.
  ensureFdLimit(SOCKETS + 1000);

  const backend = await spawnNativeBackend({ engine: 'synthetic', env: { PARLEY_SYNTHETIC_TTFA_MS: '0', PARLEY_SYNTHETIC_PACING: 'fast' }, stderr: 'ignore' });
  const { platform, key } = await startBenchPlatform({ backendAddress: backend.address });
  const port = new URL(platform.url).port;
  const startTimeoutMs = platform.config.wsStartTimeoutMs;

  const child = (opts: Record<string, unknown>) => benchChild(fileURLToPath(import.meta.url), { IDLE_BENCH: JSON.stringify({ port, key, ...opts }) });
  const probe = (ms: number) => child({ mode: 'probe', ms }).next();

  const load1 = os.loadavg()[0];
  const before = await probe(PROBE_MS);
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, loadavg1_start: round(load1, 2) },
    sockets: SOCKETS,
    startTimeoutMs,
    probe_before: before,
  };

  for (const mode of values.phases!.split(',')) {
    const base = memory();
    const t0 = performance.now();
    const load = child({ mode, n: SOCKETS });
    const held = await load.next();
    const openMs = performance.now() - t0;
    const mem = memory();
    // Probe while every connection is held (the first ones close `startTimeoutMs` after opening).
    const during = await probe(Math.max(500, Math.min(PROBE_MS, startTimeoutMs - openMs - 1500)));
    const done = await load.next();
    const after = memory();
    report[mode] = {
      held: held.held,
      failed_to_open: held.failed,
      open_all_ms: Math.round(openMs),
      per_socket_bytes: {
        rss: Math.round((mem.rss - base.rss) / Math.max(1, held.held)),
        heap_plus_external: Math.round((mem.heapExternal - base.heapExternal) / Math.max(1, held.held)),
      },
      after_close_vs_before_bytes: { rss: after.rss - base.rss, heap_plus_external: after.heapExternal - base.heapExternal },
      closed_after_ms: Object.fromEntries(Object.entries(done.closedMs as Record<string, number>).map(([k, v]) => [k, Math.round(v)])),
      outcomes: done.outcomes,
      probe_during: during,
    };
  }
  report.loadavg1_end = round(os.loadavg()[0], 2);
  console.log(JSON.stringify(report, null, 2));
  await platform.close();
  await backend.stop();
  process.exit(0);
}
