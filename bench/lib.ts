import { spawn, type ChildProcess } from 'node:child_process';

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
