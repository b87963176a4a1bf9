// The browser-facing files (src/web/): the console's page and hashed assets, the SDK bundle.
// Served from a dist folder this test writes, so it is about serving, not building.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import t, { type Test } from 'tap';
import { createLogger } from '../../src/log.ts';
import { startPlatform, type Platform } from '../../src/platform.ts';

async function start(t: Test, files: Record<string, string>): Promise<Platform> {
  const dir = mkdtempSync(join(os.tmpdir(), 'parley-web-'));
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), body);
    if (name.endsWith('.js')) writeFileSync(join(dir, `${name}.gz`), gzipSync(body));
  }
  const app = await startPlatform({
    env: {}, webDir: dir, log: createLogger({ level: 'silent' }),
    config: { host: '127.0.0.1', port: 0, dataDir: 'memory', startNativeBackend: false, logLevel: 'silent', bootstrapKey: 'pk_test_web_0123456789abcdefghijklmnop' },
  });
  t.teardown(async () => {
    await app.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return app;
}

const PAGE = '<!doctype html><title>Parley console</title><script type="module" src="/assets/main-AB12CD.js"></script>';

t.test('the console page: at /, and for page paths a browser asks for; never cached; strict CSP', async (t) => {
  const app = await start(t, { 'console/index.html': PAGE, 'console/assets/main-AB12CD.js': 'console.log(1)' });
  for (const path of ['/', '/agents', '/sessions/sess_1']) {
    const r = await fetch(app.url + path, { headers: { Accept: 'text/html,application/xhtml+xml' } });
    t.equal(r.status, 200, path);
    t.equal(r.headers.get('content-type'), 'text/html; charset=utf-8');
    t.equal(r.headers.get('cache-control'), 'no-cache');
    const csp = r.headers.get('content-security-policy') ?? '';
    t.match(csp, /default-src 'self'/);
    t.match(csp, /script-src 'self'(;|$)/, 'no inline or remote script');
    t.equal(await r.text(), PAGE);
  }
  const api = await fetch(app.url + '/agents', { headers: { Accept: 'application/json' } });
  t.equal(api.status, 404, 'an API client asking for an unknown path still gets the JSON 404');
  t.same(await api.json(), { status: 404, message: 'Not found' });
  const apiRoute = await fetch(app.url + '/v1/agent/agents', { headers: { Accept: 'text/html' } });
  t.equal(apiRoute.status, 401, 'API routes stay API routes for browsers too');
});

t.test('hashed assets: long immutable cache, ETag revalidation, gzip when accepted', async (t) => {
  const app = await start(t, { 'console/index.html': PAGE, 'console/assets/main-AB12CD.js': 'console.log("hello")' });
  const r = await fetch(app.url + '/assets/main-AB12CD.js', { headers: { 'Accept-Encoding': 'identity' } });
  t.equal(r.status, 200);
  t.equal(r.headers.get('content-type'), 'text/javascript; charset=utf-8');
  t.equal(r.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  t.equal(await r.text(), 'console.log("hello")');
  const etag = r.headers.get('etag')!;
  t.ok(etag);
  const again = await fetch(app.url + '/assets/main-AB12CD.js', { headers: { 'If-None-Match': etag } });
  t.equal(again.status, 304);
  // fetch() always accepts gzip and decodes it: the header says what went over the wire.
  const zipped = await fetch(app.url + '/assets/main-AB12CD.js', { headers: { 'Accept-Encoding': 'gzip' } });
  t.equal(zipped.headers.get('content-encoding'), 'gzip');
  t.equal(await zipped.text(), 'console.log("hello")');
  t.equal((await fetch(app.url + '/assets/missing-000.js')).status, 404);
  t.equal((await fetch(app.url + '/assets/..%2Fconsole%2Findex.html')).status, 404, 'only listed files are served');
});

t.test('the SDK bundle at /sdk/parley-client.js: revalidated, readable from other origins', async (t) => {
  const app = await start(t, { 'sdk/parley-client.js': 'export const start = 1;' });
  const r = await fetch(app.url + '/sdk/parley-client.js', { headers: { Origin: 'https://shop.example.com' } });
  t.equal(r.status, 200);
  t.equal(r.headers.get('cache-control'), 'no-cache');
  t.equal(r.headers.get('access-control-allow-origin'), '*');
  t.equal(await r.text(), 'export const start = 1;');
});

t.test('without a build, / says how to build the console', async (t) => {
  const app = await start(t, {});
  const r = await fetch(app.url + '/', { headers: { Accept: 'text/html' } });
  t.equal(r.status, 404);
  t.match((await r.json()).message, /console is not built: run npm install/);
});
