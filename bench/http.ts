/**
 * Requests per second of Parley's HTTP layer beside a bare uWebSockets.js hello-world, in
 * one run. Each server is its own process; autocannon runs here. Prints one JSON object.
 *
 *   npx tsx bench/http.ts [--seconds 10] [--connections 50] [--pipelining 1] [--workers N]
 *
 * Parley uses the embedded store unless DATABASE_URL is set. `--workers` sets PARLEY_WORKERS
 * (above 1 needs DATABASE_URL and REDIS_URL); unset, the platform's default (one worker on the
 * embedded store, the cores with Postgres and Redis). The bare server is always one loop.
 */
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { startChild } from './lib.ts';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' }, pipelining: { type: 'string', default: '1' }, workers: { type: 'string' } } });
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const pipelining = Number(values.pipelining);
const children: ChildProcess[] = [];

const start = (args: string[], env: Record<string, string>) => startChild(args, env, children);

async function run(name: string, url: string, headers: Record<string, string> = {}) {
  const r = await autocannon({ url, connections, pipelining, duration: seconds, headers });
  return {
    name,
    requests_per_second: Math.round(r.requests.average),
    latency_ms: { p50: r.latency.p50, p99: r.latency.p99, max: r.latency.max },
    non_2xx: r.non2xx,
    errors: r.errors,
  };
}

try {
  const key = 'pk_bench_http_0123456789abcdef0123456789abcdef';
  const bare = await start(['bench/uws-hello.ts'], { PORT: '0' });
  const workerEnv: Record<string, string> = values.workers ? { PARLEY_WORKERS: values.workers } : {};
  const parley = await start(['src/cli.ts', 'serve'], { PORT: '0', HOST: '127.0.0.1', PARLEY_DATA_DIR: 'memory', PARLEY_BOOTSTRAP_KEY: key, PARLEY_NATIVE_BACKEND: 'false', LOG_LEVEL: 'warn', ...workerEnv });
  const workers = Number(/"(\d+) workers? \(/.exec(await fetch(`${parley}/health`).then((r) => r.text()).catch(() => ''))?.[1] ?? NaN) || null;
  const auth = { Authorization: `Bearer ${key}` };
  const created = await fetch(`${parley}/v1/agent/agents`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'bench' }) }).then((r) => r.json());
  const results = [];
  results.push(await run('bare uWebSockets.js hello-world', `${bare}/`));
  results.push(await run('parley GET /health', `${parley}/health`));
  results.push(await run('parley GET /v1/agent/agents/{id}', `${parley}/v1/agent/agents/${created.agent_id}`, auth));
  const baseline = results[0]!.requests_per_second;
  process.stdout.write(
    JSON.stringify(
      {
        benchmark: 'http',
        store: process.env.DATABASE_URL ? 'postgres' : 'pglite',
        seconds, connections, pipelining,
        workers,
        results: results.map((r) => ({ ...r, ratio_to_bare: +(r.requests_per_second / baseline).toFixed(3) })),
      },
      null,
      2,
    ) + '\n',
  );
} finally {
  for (const c of children) c.kill('SIGTERM');
}
