/**
 * Long fuzz run over every route of /openapi.json (the generator of
 * test/reliability/fuzz.test.ts) plus random frames on every WebSocket endpoint. Prints one
 * JSON object: requests sent, statuses, 5xx, hangs, crashes. docs/reliability.md quotes it.
 *
 *   npx tsx bench/fuzz.ts                      # 10,000 requests, seed 1, 4 at a time
 *   FUZZ_COUNT=100000 FUZZ_SEED=7 npx tsx bench/fuzz.ts
 *
 * Uses DATABASE_URL / REDIS_URL when set (a fresh schema), else the embedded store.
 */
import { runFuzz } from '../test/helpers/fuzz.ts';
import { fuzzFixtures } from '../test/helpers/fuzz-fixtures.ts';
import { startTestServer } from '../test/helpers/server.ts';
import { fuzzSockets } from '../test/helpers/fuzz-ws.ts';

const count = Number(process.env.FUZZ_COUNT ?? 10_000);
const seed = Number(process.env.FUZZ_SEED ?? 1);
const concurrency = Number(process.env.FUZZ_CONCURRENCY ?? 4);
const wsCount = Number(process.env.FUZZ_WS_COUNT ?? Math.max(50, Math.floor(count / 100)));

const app = await startTestServer({ backend: 'synthetic' });
const started = performance.now();
const { doc, ids } = await fuzzFixtures(app);
const alive = async () => (await app.req('GET', '/health')).status === 200;
const http = await runFuzz({ baseUrl: app.url, doc, ids, auth: app.auth, seed, count, concurrency, alive });
const ws = await fuzzSockets(app, { seed, count: wsCount });
const stillAlive = await alive();
await app.close();
const fivexx = Object.entries(http.statuses).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0);
console.log(
  JSON.stringify({
    seed,
    requests: http.requests,
    statuses: http.statuses,
    fivexx,
    failures: http.failures.length,
    failureSamples: http.failures.slice(0, 20),
    hangs: http.failures.filter((f) => f.kind === 'hang').length,
    connectionErrors: http.connectionErrors,
    websocket: ws,
    crashes: stillAlive ? 0 : 1,
    seconds: Math.round((performance.now() - started) / 1000),
  }),
);
process.exit(0);
