/**
 * WebSocket connects per second against `parley serve` (embedded store): `--connections`
 * clients each open `/compat/elevenlabs/v1/text-to-speech/default/stream-input` (an upgrade the
 * route completes after an await, through `acceptUpgrade`), wait for the open, close 1000 and
 * go again, for `--seconds`. The server is its own process; the clients run here. `--root`
 * serves another checkout (the same bench against an older `src/`). Prints one JSON object.
 *
 *   npx tsx bench/ws-connect.ts [--seconds 10] [--connections 50] [--root DIR]
 */
import type { ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { percentile, round, startChild } from './lib.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' }, root: { type: 'string', default: resolve(import.meta.dirname, '..') } } });
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const children: ChildProcess[] = [];

try {
  const base = await startChild([resolve(values.root!, 'src/cli.ts'), 'serve'], { PORT: '0', HOST: '127.0.0.1', PARLEY_DATA_DIR: 'memory', DATABASE_URL: '', REDIS_URL: '', PARLEY_NATIVE_BACKEND: 'false', LOG_LEVEL: 'warn' }, children);
  const url = base.replace(/^http/, 'ws') + '/compat/elevenlabs/v1/text-to-speech/default/stream-input';
  const latencies: number[] = [];
  let failed = 0;
  const until = performance.now() + seconds * 1000;
  const one = () => new Promise<void>((done) => {
    const t0 = performance.now();
    const ws = new WebSocket(url);
    ws.once('open', () => {
      latencies.push(performance.now() - t0);
      ws.close(1000);
    });
    ws.once('error', () => failed++);
    ws.once('close', () => done());
  });
  await Promise.all(Array.from({ length: connections }, async () => {
    while (performance.now() < until) await one();
  }));
  latencies.sort((a, b) => a - b);
  console.log(JSON.stringify({
    bench: 'ws-connect', root: values.root, seconds, connections,
    connects_per_second: Math.round(latencies.length / seconds),
    open_latency_ms: { p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)), max: round(latencies.at(-1) ?? NaN) },
    failed,
  }));
} finally {
  for (const c of children) c.kill('SIGKILL');
}
