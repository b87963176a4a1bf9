/**
 * What `npm start` spends before `/ready`, on the caller's clock: a first start on an empty data
 * folder (store created, migrations, first team), then restarts on that folder. Each run spawns
 * `npm start` exactly as the README says and polls `/ready`; the platform's own phases come from
 * its "parley ready" log line (`startup_ms`). Prints one JSON object.
 *
 *   npx tsx bench/startup.ts [--restarts 5] [--engine espeak|synthetic]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { restarts: { type: 'string', default: '5' }, engine: { type: 'string', default: 'espeak' } } });
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PATH = (process.env.PATH ?? '').split(':').filter((p) => !p.includes('node_modules')).join(':');

interface Run {
  ready_ms: number;
  listening_ms: number;
  /** The platform's phases, from its own start (after node, tsx and the imports). */
  phases: Record<string, number>;
}

async function once(dataDir: string): Promise<Run> {
  const began = performance.now();
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { PATH, HOME: process.env.HOME, PORT: '0', HOST: '127.0.0.1', PARLEY_DATA_DIR: dataDir, PARLEY_SPEECH_ENGINE: values.engine, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  let listening = 0;
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on http:\/\/[^\s:]+:(\d+)/.exec(out);
      if (m && !listening) {
        listening = performance.now() - began;
        resolve(Number(m[1]));
      }
    });
    child.stderr!.on('data', (d) => (out += d));
    child.once('exit', (code) => reject(new Error(`npm start exited with ${code}: ${out}`)));
  });
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/ready`).then((r) => r.status === 200, () => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const ready = performance.now() - began;
  await new Promise((r) => setTimeout(r, 100)); // the ready log line follows /ready by a tick
  const line = out.split('\n').find((l) => l.includes('"parley ready"'));
  const phases = line ? (JSON.parse(line) as { startup_ms: Record<string, number> }).startup_ms : {};
  const exited = new Promise((r) => child.once('exit', r));
  process.kill(-child.pid!, 'SIGTERM');
  await exited;
  return { ready_ms: Math.round(ready), listening_ms: Math.round(listening), phases };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)]! : 0;
};

const dir = mkdtempSync(join(os.tmpdir(), 'parley-startup-'));
try {
  const first = await once(dir);
  const restarts: Run[] = [];
  for (let i = 0; i < Number(values.restarts); i++) restarts.push(await once(dir));
  const phaseNames = Object.keys(restarts[0]?.phases ?? {});
  console.log(JSON.stringify({
    date: new Date().toISOString(),
    engine: values.engine,
    cores: os.cpus().length,
    load_average_1m: os.loadavg()[0],
    first_start: first,
    restart_ready_ms: { median: median(restarts.map((r) => r.ready_ms)), min: Math.min(...restarts.map((r) => r.ready_ms)), max: Math.max(...restarts.map((r) => r.ready_ms)), runs: restarts.map((r) => r.ready_ms) },
    restart_listening_ms_median: median(restarts.map((r) => r.listening_ms)),
    restart_phases_ms_median: Object.fromEntries(phaseNames.map((p) => [p, median(restarts.map((r) => r.phases[p] ?? 0))])),
  }, null, 2));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
