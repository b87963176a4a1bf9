// parley/client as a consumer gets it: this repository packed (`npm pack`) and installed as a
// dependency of a temporary project, then imported with plain `node` (no tsx, no loader) for a
// conversation with a real platform, required from CommonJS, type-checked by TypeScript against
// the shipped declarations, and bundled for a browser page by esbuild.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import { join } from 'node:path';
import * as esbuild from 'esbuild';
import t from 'tap';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { startTestServer } from '../helpers/server.ts';
import { assertBuilt, ROOT } from './sdk-build.ts';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The environment of a fresh shell: without what `npm test` and tap put there for their own
 * children (npm_package_*, npm_lifecycle_*, NODE_OPTIONS with their loaders), keeping the npm
 * settings a machine may need (registry, cache, user config).
 */
function shellEnv(): NodeJS.ProcessEnv {
  const keep = new Set(['npm_config_registry', 'npm_config_cache', 'npm_config_userconfig']);
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(npm_|_?tap)/i.test(k) || keep.has(k.toLowerCase())) env[k] = v;
  return env;
}

/**
 * Runs `cmd` as from a fresh shell. Through `env -u NODE_OPTIONS`: tap's process tracking puts
 * its own `--import` into NODE_OPTIONS of every child it sees spawned, whatever env is given;
 * `env` drops it again just before `cmd` starts, so a node started here runs with no loader.
 */
function run(cmd: string, args: string[], cwd: string, timeoutMs = 240_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', cmd, ...args], { cwd, env: shellEnv(), stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** npm's ways of saying the registry could not be reached (the install needs it for metadata). */
const OFFLINE = /ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTCACHED|ENETUNREACH|network/i;

assertBuilt();
const tmp = mkdtempSync(join(os.tmpdir(), 'parley-consumer-'));
t.teardown(() => rmSync(tmp, { recursive: true, force: true }));
const app = join(tmp, 'shop');

const packed = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', tmp], ROOT);
if (packed.code !== 0) throw new Error(`npm pack failed: ${packed.stderr}`);
const [pack] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
writeFileSync(join(tmp, 'package.json'), '{}'); // keeps npm from looking above tmp for a project
mkdirSync(app);
writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'shop', private: true, type: 'module' }));
// As a user installs a tarball. The dependencies come from npm's cache when it has them (every
// machine that ran `npm ci` here does); their metadata may need the registry.
const installed = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', join(tmp, pack!.filename)], app);
const installSkip = installed.code !== 0 && OFFLINE.test(installed.stderr) ? `npm install could not reach the registry: ${installed.stderr.split('\n').find((l) => OFFLINE.test(l))}` : false;
if (installed.code !== 0 && !installSkip) throw new Error(`npm install of the packed repository failed: ${installed.stderr}`);

t.test('the tarball holds the built SDK, its types and worklet, and no tests or local data', async (t) => {
  const files = new Set(pack!.files.map((f) => f.path));
  for (const f of ['package.json', 'dist/widget/index.js', 'dist/widget/types/widget/index.d.ts', 'dist/embed/widget.js', 'dist/client/index.js', 'dist/client/index.d.ts', 'dist/client/types.d.ts', 'dist/client/parley-audio-worklet.js', 'dist/sdk/parley-client.js', 'dist/sdk/parley-audio-worklet.js', 'src/cli.ts', 'bin/parley.js']) {
    t.ok(files.has(f), f);
  }
  t.notOk([...files].some((f) => /^(test|bench|data|node_modules|\.ci)\//.test(f) || f === '.env'), 'no tests, benches, data folder or secrets');
});

t.test('as an installed dependency', { skip: installSkip }, async (t) => {
  const server = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => server.close());

  t.test('plain node imports parley/client and holds a typed conversation with a real platform', async (t) => {
    const agentId = await makeAgent(server, { config: { prompt: { first_message_mode: 'off' } } });
    writeFileSync(join(app, 'backend.mjs'), `
import { start, ClientError } from 'parley/client';
const [url, key, agentId] = process.argv.slice(2);
const created = await fetch(url + '/v1/agent/sessions', { method: 'POST', headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' }, body: JSON.stringify({ agent_id: agentId }) });
const convo = await start(await created.json());
const replies = [];
convo.on('transcript', (x) => { if (x.role === 'agent' && x.final) replies.push(x.text); });
convo.sendUserMessage('Hello from a Node backend', { audio: false });
for (let i = 0; i < 500 && replies.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
const end = await convo.hangup();
let refused;
try { await start({ transport: 'carrier-pigeon' }); } catch (e) { refused = { isClientError: e instanceof ClientError, code: e.code }; }
console.log(JSON.stringify({ plain: [process.execArgv, process.env.NODE_OPTIONS ?? null], resolved: import.meta.resolve('parley/client'), sessionId: convo.sessionId, replies, end, refused }));
`);
    const r = await run(process.execPath, ['backend.mjs', server.url, server.key, agentId], app, 60_000);
    t.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    t.same(out.plain, [[], null], 'node ran with no loader and no options');
    t.equal(out.resolved, `file://${join(app, 'node_modules/parley/dist/client/index.js')}`, 'the installed package, not this checkout');
    t.same(out.replies, ['You said: Hello from a Node backend']);
    t.same(out.end, { reason: 'user_hangup' });
    t.same(out.refused, { isClientError: true, code: 'unsupported_transport' });
    const rec = await server.req('GET', `/v1/agent/sessions/${out.sessionId}`);
    t.same(rec.body.items.filter((i: { type: string }) => i.type === 'message').map((i: { role: string; content: string }) => [i.role, i.content]), [['user', 'Hello from a Node backend'], ['assistant', 'You said: Hello from a Node backend']]);
  });

  t.test("require('parley/client') loads the same ES module (Node's require of ES modules)", async (t) => {
    const r = await run(process.execPath, ['-e', "const c = require('parley/client'); console.log(JSON.stringify([typeof c.start, typeof c.startPublic, typeof c.browserMicrophone, typeof c.ClientError, require.resolve('parley/client')]))"], app, 30_000);
    t.equal(r.code, 0, r.stderr);
    t.same(JSON.parse(r.stdout), ['function', 'function', 'function', 'function', join(app, 'node_modules/parley/dist/client/index.js')]);
    t.equal(r.stderr, '', 'no warning');
  });

  t.test('TypeScript finds the declarations (nodenext and bundler resolution; with and without the DOM library)', async (t) => {
    writeFileSync(join(app, 'typed.ts'), `
import { start, startPublic, browserMicrophone, browserSpeaker, ClientError, type Conversation, type SessionResponse } from 'parley/client';
export async function talk(session: SessionResponse): Promise<string> {
  const audioContext = new AudioContext();
  const convo: Conversation = await start(session, { speaker: browserSpeaker({ audioContext }), microphone: browserMicrophone({ audioContext, frameMs: 40, constraints: { echoCancellation: false } }) });
  convo.on('transcript', (x) => console.log(x.role, x.text.toUpperCase(), x.final));
  try {
    await startPublic({ baseUrl: 'https://voice.example.com', agentId: 'agent_1', overrides: { language: 'fr' } });
  } catch (e) {
    if (e instanceof ClientError && e.code === 'session_refused') return String(e.status);
  }
  return (await convo.hangup()).reason;
}
`);
    // A Node backend's program: Node's types, no DOM library.
    writeFileSync(join(app, 'backend.ts'), `
import { start, type SessionResponse } from 'parley/client';
export async function ask(session: SessionResponse): Promise<string[]> {
  const convo = await start(session);
  const said: string[] = [];
  convo.on('transcript', (x) => { if (x.final) said.push(x.text); });
  convo.sendUserMessage('Hello', { audio: false });
  await convo.hangup();
  return said;
}
`);
    writeFileSync(join(app, 'wrong.ts'), `
import { start, ClientError } from 'parley/client';
export const e = new ClientError('no_such_code', 'x');
export const p = start({ session_id: 1, transport: 'websocket', token: 't' });
`);
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    const flags = ['--ignoreConfig', '--noEmit', '--strict', '--types', '', '--lib', 'es2022,dom'];
    for (const resolution of [['--module', 'nodenext', '--moduleResolution', 'nodenext'], ['--module', 'esnext', '--moduleResolution', 'bundler']]) {
      const ok = await run(process.execPath, [tsc, ...flags, ...resolution, 'typed.ts'], app, 60_000);
      t.equal(ok.code, 0, `typed.ts compiles with ${resolution[3]}: ${ok.stdout}${ok.stderr}`);
      const node = await run(process.execPath, [tsc, '--ignoreConfig', '--noEmit', '--strict', '--lib', 'es2022', '--typeRoots', join(ROOT, 'node_modules/@types'), '--types', 'node', ...resolution, 'backend.ts'], app, 60_000);
      t.equal(node.code, 0, `a Node program without the DOM library compiles against them too: ${node.stdout}${node.stderr}`);
      const bad = await run(process.execPath, [tsc, ...flags, ...resolution, 'wrong.ts'], app, 60_000);
      t.not(bad.code, 0, 'wrong.ts does not');
      t.match(bad.stdout, /'"no_such_code"' is not assignable to parameter of type 'ClientErrorCode'/);
      t.match(bad.stdout, /Type 'number' is not assignable to type 'string'/);
    }
  });

  t.test('a bundler builds it for a browser page: no Node built-ins, livekit-client only in a lazy chunk', async (t) => {
    writeFileSync(join(app, 'page.mjs'), `
import { startPublic, browserMicrophone, browserSpeaker } from 'parley/client';
document.querySelector('button').onclick = () => startPublic({ baseUrl: 'https://voice.example.com', agentId: 'agent_1' }, { microphone: browserMicrophone(), speaker: browserSpeaker() });
`);
    const out = join(tmp, 'bundle');
    const r = await esbuild.build({ absWorkingDir: app, entryPoints: ['page.mjs'], bundle: true, platform: 'browser', format: 'esm', splitting: true, outdir: out, metafile: true, write: true, logLevel: 'silent' });
    t.same(r.errors, []);
    const outputs = Object.values(r.metafile.outputs);
    const entry = outputs.find((o) => o.entryPoint === 'page.mjs')!;
    const entryInputs = Object.keys(entry.inputs);
    t.ok(entryInputs.includes('node_modules/parley/dist/client/index.js'), 'the entry holds the SDK');
    t.notOk(entryInputs.some((i) => i.includes('livekit-client')), 'and not livekit-client');
    t.ok(outputs.some((o) => o !== entry && Object.keys(o.inputs).some((i) => i.includes('node_modules/livekit-client/'))), 'livekit-client is a chunk of its own, loaded on demand');
    t.notOk(outputs.some((o) => o.imports.some((i) => i.external)), 'nothing is left for a Node runtime to provide');
    const worklet = createRequire(join(app, 'package.json')).resolve('parley/client/audio-worklet.js');
    t.ok(existsSync(worklet), 'the audio worklet is exported for the app to serve (parley/client/audio-worklet.js)');
  });

  t.test('parley/widget: a bundler builds the <parley-agent> element, TypeScript finds its types', async (t) => {
    writeFileSync(join(app, 'widget-page.ts'), `
import { ParleyAgentElement, type WidgetEventMap } from 'parley/widget';
const el = document.querySelector('parley-agent');
if (!(el instanceof ParleyAgentElement)) throw new Error('importing parley/widget registers <parley-agent>');
el.sessionTokenProvider = async () => (await fetch('/my-session')).json();
el.clientTools = { showProduct: (params) => ({ shown: params.sku }) };
el.addEventListener('parley:message', (e) => {
  const d = (e as CustomEvent<WidgetEventMap['parley:message']>).detail;
  console.log(d.role, d.text.toUpperCase());
});
`);
    const r = await esbuild.build({ absWorkingDir: app, entryPoints: ['widget-page.ts'], bundle: true, platform: 'browser', format: 'esm', outdir: join(tmp, 'widget-bundle'), metafile: true, write: true, logLevel: 'silent' });
    t.same(r.errors, []);
    const inputs = Object.keys(Object.values(r.metafile.outputs)[0]!.inputs);
    t.ok(inputs.includes('node_modules/parley/dist/widget/index.js'), 'the bundle holds the element');
    t.notOk(inputs.some((i) => i.includes('livekit-client')), 'and no livekit-client (a livekit session loads the platform\'s SDK)');
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    for (const resolution of [['--module', 'nodenext', '--moduleResolution', 'nodenext'], ['--module', 'esnext', '--moduleResolution', 'bundler']]) {
      const ok = await run(process.execPath, [tsc, '--ignoreConfig', '--noEmit', '--strict', '--types', '', '--lib', 'es2022,dom', ...resolution, 'widget-page.ts'], app, 60_000);
      t.equal(ok.code, 0, `widget-page.ts compiles with ${resolution[3]}: ${ok.stdout}${ok.stderr}`);
    }
  });
});
