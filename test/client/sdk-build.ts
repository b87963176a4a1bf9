/**
 * The built SDK (scripts/build.mjs → dist/sdk/, dist/client/) for the tests that use it as a
 * consumer does. `npm test` rebuilds it when a source changed; a single test file run by hand
 * after an edit finds it stale and says how to rebuild, rather than testing old code.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const DIST = join(ROOT, 'dist');

function newest(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  return Math.max(st.mtimeMs, ...readdirSync(path).map((n) => newest(join(path, n))));
}

/** Throws unless dist/ holds a build at least as new as src/client and the build script. */
export function assertBuilt(): void {
  const files = ['sdk/parley-client.js', 'sdk/parley-audio-worklet.js', 'client/index.js', 'client/index.d.ts', 'client/parley-audio-worklet.js'];
  const missing = files.filter((f) => !existsSync(join(DIST, f)));
  if (missing.length) throw new Error(`dist/ lacks ${missing.join(', ')}: run npm install (or node scripts/build.mjs)`);
  const built = Math.min(...files.map((f) => statSync(join(DIST, f)).mtimeMs));
  const source = Math.max(newest(join(ROOT, 'src/client')), newest(join(ROOT, 'scripts/build.mjs')));
  if (source > built) throw new Error('dist/ is older than src/client: run node scripts/build.mjs (npm test does)');
}
