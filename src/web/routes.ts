/**
 * What the platform serves to browsers, from `dist/` (scripts/build.mjs):
 * - `/` and every page path a browser asks for (`Accept: text/html`, no API route): the
 *   console's `index.html`, never cached, with a strict Content-Security-Policy;
 * - `/assets/{file}`: the console's content-hashed files, cached for a year (`immutable`);
 * - `/sdk/{file}`: the client SDK's browser bundle at a stable address, revalidated by ETag;
 * - `/widget.js`: the embeddable `<parley-agent>` element (docs/widget.md), revalidated by ETag.
 * Files are sent compressed (brotli or gzip) when the client accepts it.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HttpApp } from '../http/app.ts';
import type { Reply } from '../http/reply.ts';
import { loadAssets, pickEncoding, type Asset } from './assets.ts';

/** Where scripts/build.mjs writes (the package's own dist/, wherever the process runs from). */
export const DIST_DIR = fileURLToPath(new URL('../../dist', import.meta.url));

/**
 * The console page's policy: everything from this server only (no CDN, no inline script or
 * style), media and workers also from `blob:` (recorded and synthesized audio). The SDK's audio
 * worklet is a script of this server (`/sdk/parley-audio-worklet.js`, under `script-src 'self'`).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "media-src 'self' blob: data:",
  "connect-src 'self' ws: wss:",
  "worker-src 'self' blob:",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const IMMUTABLE = 'public, max-age=31536000, immutable';
const REVALIDATE = 'no-cache';

/** Sends `asset` (304 when the client's copy is current), or a 404 naming what is missing. */
export function sendAsset(reply: Reply, headers: Record<string, string>, asset: Asset | undefined, cache: string, extra: Record<string, string> = {}): void {
  if (!asset) {
    reply.json(404, { status: 404, message: 'Not found' });
    return;
  }
  const common = { ETag: asset.etag, 'Cache-Control': cache, Vary: 'Accept-Encoding', 'X-Content-Type-Options': 'nosniff', ...extra };
  if (headers['if-none-match'] === asset.etag) {
    reply.send(304, null, common);
    return;
  }
  const { body, encoding } = pickEncoding(asset, headers['accept-encoding']);
  reply.send(200, body, { 'Content-Type': asset.type, ...(encoding ? { 'Content-Encoding': encoding } : {}), ...common });
}

export interface WebOptions {
  /** Default: the package's dist/. */
  distDir?: string;
}

export function mountWeb(http: HttpApp, opts: WebOptions = {}): void {
  const dist = opts.distDir ?? DIST_DIR;
  const sdk = loadAssets(join(dist, 'sdk'));
  const site = loadAssets(join(dist, 'console'));
  const embed = loadAssets(join(dist, 'embed'));
  const page = site.get('index.html');
  const pageHeaders = { 'Content-Security-Policy': CONSOLE_CSP, 'Referrer-Policy': 'no-referrer' };
  const sendPage = (reply: Reply, headers: Record<string, string>) => {
    if (!page) reply.json(404, { status: 404, message: 'The console is not built: run npm install (or node scripts/build.mjs)' });
    else sendAsset(reply, headers, page, REVALIDATE, pageHeaders);
  };

  http.route({ method: 'GET', path: '/', auth: 'none', handler: (ctx) => sendPage(ctx.reply, ctx.headers) });
  http.route({
    method: 'GET', path: '/assets/{file}', auth: 'none',
    handler: (ctx) => sendAsset(ctx.reply, ctx.headers, site.get(`assets/${ctx.params.file}`), IMMUTABLE),
  });
  http.route({
    method: 'GET', path: '/sdk/{file}', auth: 'none',
    handler: (ctx) => sendAsset(ctx.reply, ctx.headers, sdk.get(ctx.params.file!), REVALIDATE),
  });
  http.route({ method: 'GET', path: '/widget.js', auth: 'none', handler: (ctx) => sendAsset(ctx.reply, ctx.headers, embed.get('widget.js'), REVALIDATE) });
  http.pageFallback = sendPage;
}
