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
import { spawn, spawnSync } from 'node:child_process';
import os from 'node:os';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import { spawnNativeBackend } from '../src/inference/index.ts';
import { round, startBenchPlatform } from './lib.ts';

const { values } = parseArgs({
  options: {
    sockets: { type: 'string', default: '10000' },
    phases: { type: 'string', default: 'ws,headers,body' },
    'probe-ms': { type: 'string', default: '3000' },
  },
});
const SOCKETS = Number(values.sockets);
const PROBE_MS = Number(values['probe-ms']);

// This process holds every connection's server side: raise its descriptor limit by re-running
// itself under `ulimit -n 65536` (or the hard limit, when that is lower) when it is short.
const RAISE = 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"';
const limit = Number(spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout.trim());
if (limit < SOCKETS + 1000 && !process.env.IDLE_SOCKETS_REEXEC) {
  const r = spawnSync('sh', ['-c', `${RAISE}; exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env: { ...process.env, IDLE_SOCKETS_REEXEC: '1' } });
  process.exit(r.status ?? 1);
}

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const memory = () => {
  gc();
  gc();
  const m = process.memoryUsage();
  return { rss: m.rss, heapExternal: m.heapUsed + m.external };
};

const backend = await spawnNativeBackend({ engine: 'synthetic', env: { PARLEY_SYNTHETIC_TTFA_MS: '0', PARLEY_SYNTHETIC_PACING: 'fast' }, stderr: 'ignore' });
const { platform, key } = await startBenchPlatform({ backendAddress: backend.address });
const port = new URL(platform.url).port;
const startTimeoutMs = platform.config.wsStartTimeoutMs;

// The children: one script, a mode each. `load` opens the connections and reports `held`
// once all are open, then `done` with each one's time from its opening to its close.
const CHILD = `
const net = require('node:net');
const http = require('node:http');
const WebSocket = require('ws');
const o = JSON.parse(process.env.IDLE_BENCH);
const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))] : null; };
if (o.mode === 'probe') {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const req = (method, path, body) => new Promise((resolve) => {
    const t0 = performance.now();
    const r = http.request({ host: '127.0.0.1', port: o.port, method, path, agent, headers: body ? { 'Content-Type': 'application/json', Authorization: 'Bearer ' + o.key } : {} }, (res) => {
      res.resume();
      res.on('end', () => resolve({ ms: performance.now() - t0, status: res.statusCode }));
    });
    r.on('error', () => resolve({ ms: performance.now() - t0, status: 0 }));
    r.end(body);
  });
  (async () => {
    const health = [], tts = [], bad = [];
    const until = performance.now() + o.ms;
    while (performance.now() < until) {
      const h = await req('GET', '/health');
      if (h.status === 200) health.push(h.ms); else bad.push(h.status);
      const t = await req('POST', '/v1/tts', JSON.stringify({ text: 'Probe.', format: 'wav' }));
      if (t.status === 200) tts.push(t.ms); else bad.push(t.status);
    }
    const r1 = (x) => (x === null ? null : Math.round(x * 10) / 10);
    const sum = (a) => ({ n: a.length, p50: r1(pct(a, 50)), p99: r1(pct(a, 99)), max: r1(pct(a, 100)) });
    process.send({ health: sum(health), tts: sum(tts), failed: bad.length });
    process.exit(0);
  })();
} else {
  const opened = [], lifetimes = [], outcomes = {};
  let held = 0, failed = 0, ended = 0;
  const count = (k) => (outcomes[k] = (outcomes[k] || 0) + 1);
  const end = (at, what) => {
    lifetimes.push(performance.now() - at);
    count(what);
    if (++ended === o.n) {
      const s = [...lifetimes].sort((a, b) => a - b);
      process.send({ type: 'done', held: opened.length, failed, closedMs: { p50: pct(s, 50), p99: pct(s, 99), max: pct(s, 100), min: s[0] }, outcomes });
      setTimeout(() => process.exit(0), 100);
    }
  };
  const ready = () => { if (opened.length + failed === o.n) process.send({ type: 'held', held: opened.length, failed }); };
  function one() {
    return new Promise((resolve) => {
      if (o.mode === 'ws') {
        const ws = new WebSocket('ws://127.0.0.1:' + o.port + '/compat/elevenlabs/v1/text-to-speech/default/stream-input');
        let at = 0;
        ws.on('open', () => { at = performance.now(); opened.push(at); resolve(); ready(); });
        ws.on('error', () => {});
        ws.on('unexpected-response', (_q, res) => { res.resume(); failed++; ended++; resolve(); ready(); });
        ws.on('close', (code, reason) => { if (at) end(at, code + ' ' + reason); else if (!ws._req) {} });
        return;
      }
      const s = net.connect(Number(o.port), '127.0.0.1');
      let at = 0, timer, got = '';
      s.on('connect', () => {
        at = performance.now(); opened.push(at); resolve(); ready();
        if (o.mode === 'headers') s.write('GET /health HTTP/1.1\\r\\nHost: x\\r\\nX-Slow: ');
        else s.write('POST /v1/tts HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer ' + o.key + '\\r\\nContent-Type: application/json\\r\\nContent-Length: 100000\\r\\n\\r\\n{"text":"');
        timer = setInterval(() => s.write('a'), 2000);
      });
      s.on('data', (d) => (got += d.toString('latin1')));
      s.on('error', () => {});
      s.on('close', () => {
        clearInterval(timer);
        if (!at) { failed++; ended++; resolve(); ready(); return; }
        const m = /^HTTP\\/1\\.1 (\\d{3})/.exec(got);
        end(at, m ? 'status ' + m[1] : 'closed without an answer');
      });
    });
  }
  (async () => {
    // Open in waves of 500 so the listen backlog never overflows.
    for (let i = 0; i < o.n; i += 500) await Promise.all(Array.from({ length: Math.min(500, o.n - i) }, one));
  })();
}
`;

function child(opts: Record<string, unknown>): { proc: ReturnType<typeof spawn>; next: () => Promise<any> } {
  const proc = spawn('sh', ['-c', `${RAISE}; exec "$0" -e "$1"`, process.execPath, CHILD], {
    cwd: process.cwd(),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, IDLE_BENCH: JSON.stringify({ port, key, ...opts }) },
  });
  const queue: any[] = [];
  const waiters: ((m: any) => void)[] = [];
  proc.on('message', (m) => (waiters.length ? waiters.shift()!(m) : queue.push(m)));
  return { proc, next: () => (queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiters.push(r))) };
}
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
