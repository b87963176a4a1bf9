#!/usr/bin/env node
// Builds what the platform serves to browsers into dist/ (git-ignored): the client SDK's browser
// bundle, and the web apps (the console) with content-hashed assets; and the client SDK as the
// package's `parley/client` (dist/client/: ES module, types, worklet). Run by `npm install`
// (scripts/prepare.mjs) and by `npm start` with --if-stale (only when a source is newer than
// the last build), so the README's two commands need no build command of their own.
//
//   node scripts/build.mjs              build everything
//   node scripts/build.mjs --if-stale   build only when sources changed since the last build
//   node scripts/build.mjs --out DIR    build what the platform serves (sdk/, console/) into DIR
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync, brotliCompressSync, constants as zlib } from 'node:zlib';
import * as esbuild from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
// `--out DIR` builds into another folder (browser tests build their own copy, so parallel test
// files never read a dist/ another one is rewriting).
const outArg = process.argv.indexOf('--out');
const dist = outArg > 0 && process.argv[outArg + 1] ? process.argv[outArg + 1] : join(root, 'dist');
const stamp = join(dist, '.build-stamp');
/** Folders whose files feed the build: a newer file there makes the build stale. */
const SOURCES = ['src/client', 'src/console', 'src/widget', 'scripts/build.mjs'];

/** Browser targets: ES2020 runs in every browser of the last few years. */
const BROWSER = { bundle: true, format: 'esm', platform: 'browser', target: 'es2020', minify: true, sourcemap: true, legalComments: 'linked', logLevel: 'warning' };

/**
 * Single scripts served at a stable path (their URL is part of the public interface). `split`:
 * code loaded by dynamic import() goes to hashed chunks beside the script, fetched only when used.
 */
const scripts = [
  // The client SDK for pages that load it with <script type="module"> or import it by URL; the
  // livekit-client package becomes a chunk that only a livekit session loads.
  { entry: 'src/client/index.ts', out: 'sdk/parley-client.js', split: true },
  // The SDK's AudioWorklet module (browser audio helpers), loaded from beside the SDK.
  { entry: 'src/client/audio-worklet.ts', out: 'sdk/parley-audio-worklet.js' },
  // The embeddable widget, served at /widget.js: one classic script (works as a module too),
  // everything inside, no source map beside it (docs/widget.md). It always names the worklet's
  // URL, so the SDK's import.meta.url default is never used.
  { entry: 'src/widget/embed.ts', out: 'embed/widget.js', options: { format: 'iife', sourcemap: false, legalComments: 'eof', define: { 'import.meta.url': '""' } } },
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

async function buildScript({ entry, out, split, options }) {
  const where = split
    ? { outdir: join(dist, dirname(out)), entryNames: basename(out, '.js'), chunkNames: '[name]-[hash]', splitting: true }
    : { outfile: join(dist, out) };
  const r = await esbuild.build({ ...BROWSER, entryPoints: [join(root, entry)], ...where, ...options, write: false });
  for (const f of r.outputFiles) writeCompressed(f.path, Buffer.from(f.contents));
}

/**
 * `parley/client` as the package exports it (package.json "exports"): dist/client/index.js, an
 * ES module for Node 20 and bundlers, with `ws` (Node's WebSocket) and `livekit-client` left as
 * imports of the package's dependencies; its worklet beside it; and its types (index.d.ts and
 * the files it names), emitted by the TypeScript compiler when it is installed (a development
 * dependency: every install that runs this build has it).
 */
async function buildPackage() {
  const out = join(dist, 'client');
  rmSync(out, { recursive: true, force: true });
  const common = { bundle: true, format: 'esm', target: 'es2022', sourcemap: true, legalComments: 'inline', logLevel: 'warning' };
  await esbuild.build({ ...common, platform: 'neutral', entryPoints: [join(root, 'src/client/index.ts')], outfile: join(out, 'index.js'), external: ['ws', 'livekit-client'] });
  await esbuild.build({ ...common, platform: 'browser', entryPoints: [join(root, 'src/client/audio-worklet.ts')], outfile: join(out, 'parley-audio-worklet.js') });
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  if (!existsSync(tsc)) {
    console.error('build: typescript is not installed; dist/client has no type declarations');
    return;
  }
  const r = spawnSync(process.execPath, [tsc, '--ignoreConfig', '--declaration', '--emitDeclarationOnly', '--strict', '--skipLibCheck',
    '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--lib', 'es2023,dom', '--types', 'node',
    '--allowImportingTsExtensions', '--rootDir', join(root, 'src/client'), '--outDir', out, join(root, 'src/client/index.ts')], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`tsc could not emit the declarations of src/client (exit ${r.status ?? r.signal})`);
  // The sources import each other as './x.ts'; the declarations sit beside './x.js'.
  for (const name of readdirSync(out).filter((n) => n.endsWith('.d.ts'))) {
    const file = join(out, name);
    writeFileSync(file, readFileSync(file, 'utf8').replace(/((?:from|import)\s*\(?\s*['"])(\.\.?\/[^'"]+)\.ts(['"])/g, '$1$2.js$3'));
  }
}

/**
 * `parley/widget` as the package exports it: dist/widget/index.js, an ES module for bundlers
 * that registers `<parley-agent>` on import, and its types under dist/widget/types/ (the
 * element's and the client SDK's it names; they need the DOM library).
 */
async function buildWidgetPackage() {
  const out = join(dist, 'widget');
  rmSync(out, { recursive: true, force: true });
  await esbuild.build({ bundle: true, format: 'esm', target: 'es2022', sourcemap: true, legalComments: 'inline', logLevel: 'warning', platform: 'browser', entryPoints: [join(root, 'src/widget/index.ts')], outfile: join(out, 'index.js') });
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  if (!existsSync(tsc)) return;
  const types = join(out, 'types');
  const r = spawnSync(process.execPath, [tsc, '--ignoreConfig', '--declaration', '--emitDeclarationOnly', '--strict', '--skipLibCheck',
    '--target', 'es2022', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--lib', 'es2023,dom', '--types', 'node',
    '--allowImportingTsExtensions', '--rootDir', join(root, 'src'), '--outDir', types, join(root, 'src/widget/index.ts')], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`tsc could not emit the declarations of src/widget (exit ${r.status ?? r.signal})`);
  const fix = (dir) => {
    for (const name of readdirSync(dir)) {
      const file = join(dir, name);
      if (statSync(file).isDirectory()) fix(file);
      else if (name.endsWith('.d.ts')) writeFileSync(file, readFileSync(file, 'utf8').replace(/((?:from|import)\s*\(?\s*['"])(\.\.?\/[^'"]+)\.ts(['"])/g, '$1$2.js$3'));
    }
  };
  fix(types);
}

async function buildApp({ entry, dir, title }) {
  const outdir = join(dist, dir);
  rmSync(outdir, { recursive: true, force: true });
  const r = await esbuild.build({
    ...BROWSER,
    absWorkingDir: root, // metafile paths (and `entry` below) relative to the repository
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
  // The app's own entry: with code splitting, every lazily imported page is an entry point too.
  const [js, meta] = Object.entries(r.metafile.outputs).find(([, m]) => m.entryPoint === entry)
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
rmSync(join(dist, 'sdk'), { recursive: true, force: true }); // no chunk of an older build stays behind
for (const s of scripts) if (existsSync(join(root, s.entry))) await buildScript(s);
// The package builds (dist/client, dist/widget) belong in the repository's dist/ only; they
// also run tsc, which a test runner's child-process hooks break.
if (outArg < 0) {
  await buildPackage();
  await buildWidgetPackage();
}
for (const a of apps) if (existsSync(join(root, a.entry))) await buildApp(a);
writeFileSync(stamp, `${new Date().toISOString()}\n`);
if (!ifStale || process.env.PARLEY_BUILD_VERBOSE) console.error(`build: dist/ ready in ${Date.now() - started} ms`);
