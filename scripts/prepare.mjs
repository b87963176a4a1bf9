#!/usr/bin/env node
// Runs on every `npm install` / `npm ci` of this repository (the "prepare" script), so the two
// commands of the README need nothing else:
// - the build (scripts/build.mjs: the console, the SDK's browser bundle, the parley/client
//   package) is made; `npm pack` runs this too, so a tarball ships a built dist/;
// - tap's runner is rebuilt for our plugin set ("!@tapjs/typescript" in package.json "tap"): a
//   fresh install ships a runner that still loads tap's TypeScript plugin, which crashes with
//   TypeScript 7 (every test file fails with `ts.sys` undefined).
// tap is a development dependency: an install without it (--omit=dev) skips that step.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tapBin = fileURLToPath(new URL('../node_modules/tap/dist/esm/run.mjs', import.meta.url));

function run(what, args) {
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    console.error(`prepare: ${what} failed (exit ${r.status ?? r.signal})`);
    process.exit(r.status || 1);
  }
}

run('the browser build', [fileURLToPath(new URL('./build.mjs', import.meta.url))]);
if (existsSync(tapBin)) run('tap build', [tapBin, 'build']);
