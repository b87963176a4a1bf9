import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createLogger } from '../src/log.ts';
import { randomSchema, startPlatform, type Platform } from '../src/platform.ts';

/** Starts `parley serve` (or another tsx entry) as a child and resolves its base URL. */
export function startChild(args: string[], env: Record<string, string>, children: ChildProcess[]): Promise<string> {
  const child = spawn(process.execPath, ['--import=tsx', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/[^\s]+)/i.exec(out);
      if (m) resolve(m[1]!.replace('0.0.0.0', '127.0.0.1'));
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}`)));
  });
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const round = (n: number, d = 2) => Math.round(n * 10 ** d) / 10 ** d;

/** The codec benches' test signal: a tone, a sweep and noise (codecs cannot coast on silence). */
export function testSignal(sampleRateHz: number, seconds: number): Int16Array {
  const n = Math.round(sampleRateHz * seconds);
  const x = new Int16Array(n);
  let seed = 1;
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const t = i / sampleRateHz;
    const sweep = Math.sin(2 * Math.PI * (200 + 300 * (t % 4)) * t);
    x[i] = Math.round(6000 * Math.sin(2 * Math.PI * 1000 * t) + 4000 * sweep + (seed / 0x7fffffff - 0.5) * 2000);
  }
  return x;
}

/**
 * A platform in the bench's process over `backendAddress`: the embedded store, or a fresh
 * schema on `databaseUrl`; a bootstrap key; no per-team speech cap (the benches measure the
 * platform, not the cap); silent logs.
 */
export async function startBenchPlatform(o: { backendAddress: string; databaseUrl?: string }): Promise<{ platform: Platform; key: string }> {
  const key = `pk_bench_${randomBytes(16).toString('hex')}`;
  const platform = await startPlatform({
    env: { PARLEY_SPEECH_CONCURRENCY: '100000' },
    config: { host: '127.0.0.1', port: 0, dataDir: 'memory', databaseUrl: o.databaseUrl || undefined, bootstrapKey: key, logLevel: 'silent', startNativeBackend: false, backendAddress: o.backendAddress },
    dbSchema: o.databaseUrl ? randomSchema() : undefined,
    log: createLogger({ level: 'silent' }),
  });
  return { platform, key };
}
