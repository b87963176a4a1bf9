/**
 * Draft configuration throughput: each operation is a PATCH of the config followed by a GET,
 * from `--concurrency` loops for `--seconds`, against the embedded store (PGlite) and, when
 * DATABASE_URL is set, real Postgres. Prints one JSON object.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/config.ts [--seconds 10] [--concurrency 16]
 */
import type { ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { percentile, round, startChild } from './lib.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, concurrency: { type: 'string', default: '16' } } });
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
const children: ChildProcess[] = [];
const key = 'pk_bench_config_0123456789abcdef0123456789abcdef';

async function scenario(store: 'pglite' | 'postgres') {
  const env: Record<string, string> = { PORT: '0', HOST: '127.0.0.1', PARLEY_BOOTSTRAP_KEY: key, PARLEY_NATIVE_BACKEND: 'false', LOG_LEVEL: 'warn', PARLEY_DATA_DIR: 'memory', DATABASE_URL: store === 'postgres' ? process.env.DATABASE_URL! : '' };
  const base = await startChild(['src/cli.ts', 'serve'], env, children);
  const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const agents: string[] = [];
  for (let i = 0; i < concurrency; i++) {
    const r = await fetch(`${base}/v1/agent/agents`, { method: 'POST', headers, body: JSON.stringify({ name: `bench ${i}` }) });
    agents.push(((await r.json()) as { agent_id: string }).agent_id);
  }
  const latencies: number[] = [];
  let errors = 0;
  const deadline = performance.now() + seconds * 1000;
  await Promise.all(
    agents.map(async (id, w) => {
      let n = 0;
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const p = await fetch(`${base}/v1/agent/agents/${id}/config`, {
          method: 'PATCH', headers,
          body: JSON.stringify({ prompt: { system_prompt: `You are agent ${w}, revision ${n++}. Be brief and kind.` }, conversation: { max_duration_seconds: 60 + (n % 3000) } }),
        });
        await p.arrayBuffer();
        const g = await fetch(`${base}/v1/agent/agents/${id}/config`, { headers });
        await g.arrayBuffer();
        if (p.status !== 200 || g.status !== 200) errors++;
        latencies.push(performance.now() - t0);
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  children.pop()!.kill('SIGTERM');
  return { store, operations: latencies.length, ops_per_second: round(latencies.length / seconds, 1), latency_ms: { p50: round(percentile(latencies, 50)), p99: round(percentile(latencies, 99)), max: round(latencies[latencies.length - 1] ?? NaN) }, errors };
}

try {
  const results = [await scenario('pglite')];
  if (process.env.DATABASE_URL) results.push(await scenario('postgres'));
  process.stdout.write(JSON.stringify({ benchmark: 'config', operation: 'PATCH config then GET config', seconds, concurrency, results }, null, 2) + '\n');
} finally {
  for (const c of children) c.kill('SIGTERM');
}
