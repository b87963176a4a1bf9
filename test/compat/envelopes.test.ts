// Errors the HTTP layer answers itself under /compat (404 unknown path, 405, 413 over the
// body limits of docs/api/compat.md "Limits") come in each family's envelope; the X-Service- rule is the same in
// both families (an unknown native parameter header → 400).
import t from 'tap';
import { request } from 'node:http';
import OpenAI from 'openai';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const MiB = 1024 * 1024;

let app: TestServer;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
});
t.teardown(() => app.close());

/** A request that declares `length` body bytes and sends none: the answer comes from the headers alone. */
function declared(method: string, path: string, length: number, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(`${app.url}${path}`, { method, headers: { ...app.auth, 'xi-api-key': app.key, 'Content-Type': 'application/json', 'Content-Length': String(length), ...headers } });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') });
      });
    });
    req.on('error', reject);
    req.flushHeaders();
  });
}

/** A chunked upload (no declared length) of `size` bytes: the limit is found while reading. */
function chunked(path: string, size: number): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(`${app.url}${path}`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' } });
    let done = false;
    req.on('response', (res) => {
      done = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()) });
      });
    });
    req.on('error', (e) => (done ? undefined : reject(e)));
    const piece = Buffer.alloc(MiB, 0x20);
    let sent = 0;
    const pump = () => {
      while (!done && sent < size) {
        sent += piece.length;
        if (!req.write(piece)) return void req.once('drain', pump);
      }
      if (!done) req.end();
    };
    pump();
  });
}

const OPENAI_BASES = ['/compat/v1', '/compat/api/v1', '/compat/openai/v1'];

t.test('unknown paths under /compat: 404 in the family envelope', async (t) => {
  for (const base of [...OPENAI_BASES, '/compat']) {
    const r = await app.req('GET', `${base}/nope/here`);
    t.equal(r.status, 404, `${base}: 404`);
    t.match(r.body, { error: { code: 404, type: 'invalid_request_error', message: String } }, `${base}: OpenAI-style envelope`);
  }
  const viaClient = await new OpenAI({ apiKey: app.key, baseURL: `${app.url}/compat/v1`, maxRetries: 0 }).get('/no/such/path').then(() => null, (e) => e);
  t.ok(viaClient instanceof OpenAI.NotFoundError, 'the openai client raises NotFoundError');
  t.equal(viaClient?.error?.type, 'invalid_request_error', 'and reads the envelope');
  const c = await app.req('POST', '/compat/elevenlabs/v1/nope', {});
  t.equal(c.status, 404);
  t.same(c.body, { detail: { status: 'not_found', message: 'Not found' } }, 'family C: {detail:{status:not_found}}');
  const native = await app.req('GET', '/v1/nope');
  t.same(native.body, { status: 404, message: 'Not found' }, 'native paths keep the native envelope');
});

t.test('wrong method under /compat: 405 with Allow, in the family envelope', async (t) => {
  for (const base of OPENAI_BASES) {
    for (const path of ['/audio/speech', '/chat/completions', '/audio/transcriptions']) {
      const r = await app.req('GET', `${base}${path}`);
      t.equal(r.status, 405, `${base}${path}`);
      t.equal(r.headers.get('allow'), 'POST');
      t.match(r.body, { error: { code: 405, type: 'invalid_request_error' } });
    }
  }
  const c = await app.req('GET', '/compat/elevenlabs/v1/speech-to-text');
  t.equal(c.status, 405);
  t.equal(c.headers.get('allow'), 'POST');
  t.match(c.body, { detail: { status: 'invalid_request', message: String } }, 'family C');
});

t.test('body limits: over the limit → 413 in the family envelope; at the limit the body is read', async (t) => {
  const cases: [string, number, (b: any) => boolean][] = [
    ['/compat/v1/audio/speech', 32 * MiB, (b) => b.error?.code === 413],
    ['/compat/v1/chat/completions', 32 * MiB, (b) => b.error?.code === 413],
    ['/compat/api/v1/chat/completions', 32 * MiB, (b) => b.error?.code === 413],
    ['/compat/openai/v1/audio/speech', 32 * MiB, (b) => b.error?.code === 413],
    ['/compat/v1/audio/transcriptions', 140 * MiB, (b) => b.error?.code === 413],
    ['/compat/elevenlabs/v1/text-to-speech/default', 140 * MiB, (b) => b.detail?.status === 'payload_too_large'],
    ['/compat/elevenlabs/v1/speech-to-text', 140 * MiB, (b) => b.detail?.status === 'payload_too_large'],
  ];
  for (const [path, limit, envelope] of cases) {
    const over = await declared('POST', path, limit + 1);
    t.equal(over.status, 413, `${path}: ${limit / MiB} MiB + 1 byte → 413`);
    t.ok(envelope(over.body), `${path}: family envelope ${JSON.stringify(over.body)}`);
    if (path.startsWith('/compat/v1') || path.startsWith('/compat/openai')) t.equal(over.body.error.type, 'invalid_request_error');
  }
  // Found while reading (no declared length): the same answer.
  const streamed = await chunked('/compat/v1/chat/completions', 33 * MiB);
  t.equal(streamed.status, 413, 'chunked body over 32 MiB → 413');
  t.match(streamed.body, { error: { code: 413, type: 'invalid_request_error' } });
  // Under the limit the body is read and judged by the route (here: not JSON → 400, not 413).
  const under = await app.req('POST', '/compat/v1/chat/completions', '{'.padEnd(2 * MiB, ' '));
  t.equal(under.status, 400, 'a 2 MiB body is under the chat limit (the native JSON limit is 1 MiB)');
});

t.test('X-Service- rule: an unknown native parameter header is 400 in both families; listed ones are applied', async (t) => {
  const speech = { model: 'tts-1', voice: '', input: 'hello', response_format: 'wav' };
  const openai = await app.req('POST', '/compat/v1/audio/speech', speech, { 'X-Service-Temprature': '0.3' });
  t.equal(openai.status, 400, 'family A: unknown X-Service- header → 400');
  t.match(openai.body, { error: { code: 400, type: 'invalid_request_error', param: 'x-service-temprature', message: /Unknown native parameter header/ } });
  const el = await app.req('POST', '/compat/elevenlabs/v1/text-to-speech/default?output_format=pcm_16000', { text: 'hello', model_id: 'eleven_multilingual_v2' }, { 'xi-api-key': app.key, 'X-Service-Temprature': '0.3' });
  t.equal(el.status, 400, 'family C: unknown X-Service- header → 400');
  t.match(el.body, { detail: { status: 'invalid_request', message: /Unknown native parameter header x-service-temprature/ } });
  for (const h of ['X-Service-Temperature', 'X-Service-Max-New-Tokens']) {
    const a = await fetch(`${app.url}/compat/v1/audio/speech`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', [h]: h.endsWith('Tokens') ? '512' : '0.3' }, body: JSON.stringify(speech) });
    t.equal(a.status, 200, `family A accepts ${h}`);
    await a.arrayBuffer();
    const c = await fetch(`${app.url}/compat/elevenlabs/v1/text-to-speech/default?output_format=pcm_16000`, { method: 'POST', headers: { 'xi-api-key': app.key, 'Content-Type': 'application/json', [h]: h.endsWith('Tokens') ? '512' : '0.3' }, body: JSON.stringify({ text: 'hello', model_id: 'eleven_multilingual_v2' }) });
    t.equal(c.status, 200, `family C accepts ${h}`);
    await c.arrayBuffer();
  }
  const options = await app.req('POST', '/compat/api/v1/audio/speech', { ...speech, provider: { options: { service: { temprature: 0.3 } } } });
  t.equal(options.status, 400, 'an unknown key in provider.options.service → 400 (same closed set)');
  t.match(options.body, { error: { param: 'provider.options.service.temprature' } });
  const stt = await app.req('POST', '/compat/v1/audio/transcriptions', { model: 'whisper-1', input_audio: { data: 'AAAA' } }, { 'X-Service-Anything': '1' });
  t.equal(stt.status, 400, 'any X-Service- header on transcription → 400');
});
