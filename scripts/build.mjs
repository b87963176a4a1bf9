#!/usr/bin/env node
// Builds what the platform serves to browsers into dist/ (git-ignored): the client SDK's browser
// bundle, and the web apps (the console) with content-hashed assets. Run by `npm install`
// (scripts/prepare.mjs) and by `npm start` with --if-stale (only when a source is newer than
// the last build), so the README's two commands need no build command of their own.
//
//   node scripts/build.mjs              build everything
//   node scripts/build.mjs --if-stale   build only when sources changed since the last build
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync, brotliCompressSync, constants as zlib } from 'node:zlib';
import * as esbuild from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');
const stamp = join(dist, '.build-stamp');
/** Folders whose files feed the build: a newer file there makes the build stale. */
const SOURCES = ['src/client', 'src/console', 'src/widget', 'scripts/build.mjs'];

/** Browser targets: ES2020 runs in every browser of the last few years. */
const BROWSER = { bundle: true, format: 'esm', platform: 'browser', target: 'es2020', minify: true, sourcemap: true, legalComments: 'linked', logLevel: 'warning' };

/** Single scripts served at a stable path (their URL is part of the public interface). */
const scripts = [
  // The client SDK for pages that load it with <script type="module"> or import it by URL.
  { entry: 'src/client/index.ts', out: 'sdk/parley-client.js' },
];

/**
 * Web apps: `entry` bundled with content-hashed names under `<dir>/assets/`, and `<dir>/index.html`
 * naming them (the only file served without a long cache).
 */
const apps = [
  { entry: 'src/console/main.tsx', dir: 'console', title: 'Parley console' },
];

function newestMtime(path) {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = st.mtimeMs;
  for (const name of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, name)));
  return newest;
}

function isStale() {
  if (!existsSync(stamp)) return true;
  const built = statSync(stamp).mtimeMs;
  return SOURCES.some((s) => newestMtime(join(root, s)) > built);
}

/** Writes `file` and its gzip and brotli forms (the server sends the smallest a client accepts). */
function writeCompressed(file, data) {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, data);
  if (/\.(js|css|html|svg|json|txt)$/.test(file)) {
    writeFileSync(`${file}.gz`, gzipSync(data, { level: 9 }));
    writeFileSync(`${file}.br`, brotliCompressSync(data, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11 } }));
  }
}

async function buildScript({ entry, out }) {
  const r = await esbuild.build({ ...BROWSER, entryPoints: [join(root, entry)], outfile: join(dist, out), write: false });
  for (const f of r.outputFiles) writeCompressed(f.path, Buffer.from(f.contents));
}

async function buildApp({ entry, dir, title }) {
  const outdir = join(dist, dir);
  rmSync(outdir, { recursive: true, force: true });
  const r = await esbuild.build({
    ...BROWSER,
    entryPoints: [join(root, entry)],
    outdir: join(outdir, 'assets'),
    entryNames: '[name]-[hash]',
    chunkNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    splitting: true,
    metafile: true,
    write: false,
    jsx: 'automatic',
    jsxImportSource: 'preact',
    loader: { '.svg': 'file', '.woff2': 'file', '.png': 'file' },
  });
  for (const f of r.outputFiles) writeCompressed(f.path, Buffer.from(f.contents));
  const [js, meta] = Object.entries(r.metafile.outputs).find(([, m]) => m.entryPoint)
    ?? (() => { throw new Error(`no entry output for ${entry}`); })();
  const css = meta.cssBundle;
  const url = (p) => `/${relative(outdir, join(root, p)).split('\\').join('/')}`;
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
${css ? `<link rel="stylesheet" href="${url(css)}">\n` : ''}<script type="module" src="${url(js)}"></script>
</head>
<body>
<div id="app"></div>
<noscript>The Parley console needs JavaScript.</noscript>
</body>
</html>
`;
  writeCompressed(join(outdir, 'index.html'), Buffer.from(html));
  // A list of the files and their hashes: the server reads it instead of walking the folder.
  const files = readdirSync(join(outdir, 'assets')).filter((n) => !/\.(gz|br)$/.test(n));
  writeFileSync(join(outdir, 'manifest.json'), JSON.stringify({ index: 'index.html', assets: files.map((n) => `assets/${n}`) }, null, 2));
}

const ifStale = process.argv.includes('--if-stale');
if (ifStale && !isStale()) process.exit(0);
const started = Date.now();
mkdirSync(dist, { recursive: true });
for (const s of scripts) if (existsSync(join(root, s.entry))) await buildScript(s);
for (const a of apps) if (existsSync(join(root, a.entry))) await buildApp(a);
writeFileSync(stamp, `${new Date().toISOString()}\n`);
if (!ifStale || process.env.PARLEY_BUILD_VERBOSE) console.error(`build: dist/ ready in ${Date.now() - started} ms`);
