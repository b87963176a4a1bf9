/**
 * The browser-facing files the platform serves (built into `dist/` by scripts/build.mjs at
 * install): read once at start into memory with their compressed forms and an ETag, so a
 * request costs a map lookup. Nothing here reads a path from a request: only files listed at
 * load time can be served.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative } from 'node:path';

export interface Asset {
  /** Content type with charset where it applies. */
  type: string;
  etag: string;
  body: Buffer;
  gzip?: Buffer;
  br?: Buffer;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.wav': 'audio/wav',
  '.txt': 'text/plain; charset=utf-8',
};

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

/** Every file under `dir` by its path relative to it (`assets/app-3F2A.js`), with `.gz`/`.br` siblings attached. */
export function loadAssets(dir: string): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!existsSync(dir)) return assets;
  const files = walk(dir).filter((p) => !/\.(gz|br)$/.test(p) && !p.endsWith('.build-stamp'));
  for (const file of files) {
    const body = readFileSync(file);
    const rel = relative(dir, file).split('\\').join('/');
    assets.set(rel, {
      type: TYPES[extname(file)] ?? 'application/octet-stream',
      etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`,
      body,
      gzip: existsSync(`${file}.gz`) ? readFileSync(`${file}.gz`) : undefined,
      br: existsSync(`${file}.br`) ? readFileSync(`${file}.br`) : undefined,
    });
  }
  return assets;
}

/** Content codings the client accepts (`Accept-Encoding`), without those it refuses with `q=0`. */
function acceptedCodings(header: string | undefined): Set<string> {
  const out = new Set<string>();
  for (const part of (header ?? '').split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (name && !(q && Number(q.slice(2)) === 0)) out.add(name);
  }
  return out;
}

/** The smallest encoding the client accepts (`br`, `gzip`, or the file as it is). */
export function pickEncoding(asset: Asset, acceptEncoding: string | undefined): { body: Buffer; encoding?: 'br' | 'gzip' } {
  const ok = acceptedCodings(acceptEncoding);
  if (asset.br && ok.has('br')) return { body: asset.br, encoding: 'br' };
  if (asset.gzip && ok.has('gzip')) return { body: asset.gzip, encoding: 'gzip' };
  return { body: asset.body };
}
