/**
 * Input the client controls never answers a 5xx (docs/reliability.md): NUL characters in
 * paths, queries and bodies, lone surrogates, JSON nested far too deep, and multipart parts
 * without a name each get a 4xx naming the problem.
 */
import { Writable } from 'node:stream';
import t from 'tap';
import { createLogger } from '../../src/log.ts';
import { startTestServer } from '../helpers/server.ts';

/** Log lines at `error` or above (pino level ≥ 50): none may come from bad input. */
const errors: string[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    for (const line of chunk.toString().split('\n')) if (line && JSON.parse(line).level >= 50) errors.push(line);
    cb();
  },
});
const app = await startTestServer({ backend: 'synthetic', log: createLogger({ level: 'warn', destination: sink }) });
t.teardown(() => app.close());

const doc = (await app.req('GET', '/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
const agent = (await app.req('POST', '/v1/agent/agents', { name: 'bad input' })).body;

/** Every operation of the document, with `%00` in each path parameter. */
t.test('a NUL in a path parameter is a 4xx on every {id} route', async (t) => {
  for (const [path, ops] of Object.entries(doc.paths)) {
    if (!path.includes('{')) continue;
    for (const method of Object.keys(ops)) {
      const url = path.replace(/\{[^}]+\}/g, 'x%00y');
      const res = await fetch(app.url + url, { method: method.toUpperCase(), headers: app.auth });
      await res.arrayBuffer();
      t.ok(res.status >= 400 && res.status < 500, `${method.toUpperCase()} ${path} → ${res.status}`);
    }
  }
});

t.test('a NUL in a query value is a 4xx on every GET route', async (t) => {
  for (const [path, ops] of Object.entries(doc.paths)) {
    if (!('get' in ops)) continue;
    const url = path.replace(/\{[^}]+\}/g, path.includes('agents/{agent_id}') ? agent.agent_id : 'x');
    for (const q of ['agent_id=a%00b', 'cursor=a%00b', 'status=a%00b', 'search=a%00', 'page_size=1%00', 'type=%00']) {
      const res = await fetch(`${app.url}${url}?${q}`, { headers: app.auth });
      await res.arrayBuffer();
      t.ok(res.status < 500, `GET ${path}?${q} → ${res.status}`);
    }
  }
  const res = await app.req('GET', '/v1/agent/sessions?agent_id=a%00b');
  t.equal(res.status, 400);
  t.match(res.body.message, /NUL/);
});

const json = (method: string, path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(app.url + path, { method, headers: { ...app.auth, 'Content-Type': 'application/json', ...headers }, body });

t.test('a NUL or a lone surrogate in a JSON body string is a 422 naming the field', async (t) => {
  const cases: [string, string, string][] = [
    ['POST', '/v1/agent/agents', '{"name":"a\\u0000b"}'],
    ['POST', '/v1/agent/agents', '{"name":"a\\ud800b"}'],
    ['PATCH', `/v1/agent/agents/${agent.agent_id}`, '{"name":"x\\udc00"}'],
    ['PATCH', `/v1/agent/agents/${agent.agent_id}/config`, '{"conversation_config":{"agent":{"first_message":"hi\\u0000"}}}'],
    ['POST', '/v1/agent/tools', '{"name":"t","tool_type":"webhook","description":"d\\u0000","url":"https://example.com/a"}'],
    ['POST', '/v1/agent/tools', '{"name":"t","tool_type":"client","arguments":[{"name":"a\\ud800","description":"x"}]}'],
    ['POST', '/v1/agent/tests', `{"agent_id":"${agent.agent_id}","name":"x","user_turns":["hi\\ud800"]}`],
    ['POST', '/v1/tts', '{"text":"hello\\u0000"}'],
  ];
  for (const [method, path, body] of cases) {
    const res = await json(method, path, body);
    const out = await res.json();
    t.equal(res.status, 422, `${method} ${path} ${body}`);
    t.match(out, [{ type: /^string_(nul|surrogate)$/, loc: ['body'] }], `${method} ${path}`);
  }
});

t.test('a NUL in the compat voice field is a 400 in the family envelope', async (t) => {
  const res = await json('POST', '/compat/v1/audio/speech', '{"model":"tts-1","input":"Hi.","voice":"a\\u0000b"}');
  t.equal(res.status, 400);
  const body = await res.json();
  t.match(body, { error: { message: /NUL/ } });
});

t.test('JSON nested 10,000 levels deep is a 400, not a stack overflow', async (t) => {
  const deep = '{"text":"hi","prosody":' + '['.repeat(10_000) + ']'.repeat(10_000) + '}';
  for (const path of ['/v1/tts', '/v1/tts/stream/with-timestamp', '/compat/v1/audio/speech', '/compat/elevenlabs/v1/text-to-speech/v/stream', '/v1/agent/agents']) {
    const res = await json('POST', path, deep);
    const text = await res.text();
    t.equal(res.status, 400, path);
    t.match(text, /nested/i, path);
  }
  // MessagePack too: 10,000 nested one-element arrays (0x91) around nil.
  const mp = Buffer.concat([Buffer.from([0x81, 0xa4, ...Buffer.from('text')]), Buffer.alloc(10_000, 0x91), Buffer.from([0xc0])]);
  const res = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/msgpack' }, body: mp });
  t.equal(res.status, 400);
  t.match(await res.text(), /nested|MessagePack/i);
});

t.test('a multipart part without a name is a 400 naming the problem', async (t) => {
  const nameless = 'Content-Disposition: form-data\r\n\r\nvalue\r\n';
  const nameless2 = 'Content-Disposition: form-data; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF\r\n';
  for (const [method, path] of [
    ['POST', '/v1/asr'],
    ['POST', '/v1/agent/knowledge-sources'],
    ['POST', '/compat/v1/audio/transcriptions'],
    ['POST', '/compat/elevenlabs/v1/speech-to-text'],
    ['POST', '/model'],
  ] as const) {
    for (const part of [nameless, nameless2]) {
      const headers = { ...app.auth, 'Content-Type': 'multipart/form-data; boundary=B' };
      const res = await fetch(app.url + path, { method, headers, body: `--B\r\n${part}--B--\r\n` });
      const text = await res.text();
      t.equal(res.status, 400, `${path} ${text}`);
      t.match(text, /without a name/, path);
    }
  }
});

t.test('a NUL in a multipart text field or file name is a 4xx', async (t) => {
  const res = await fetch(app.url + '/v1/agent/knowledge-sources', {
    method: 'POST',
    headers: { ...app.auth, 'Content-Type': 'multipart/form-data; boundary=B' },
    body: '--B\r\nContent-Disposition: form-data; name="type"\r\n\r\ntext\r\n--B\r\nContent-Disposition: form-data; name="name"\r\n\r\na\u0000b\r\n--B\r\nContent-Disposition: form-data; name="text"\r\n\r\nhello\r\n--B--\r\n',
  });
  const text = await res.text();
  t.ok(res.status >= 400 && res.status < 500, `${res.status} ${text}`);
});

t.test('nothing above was logged as an error', async (t) => {
  t.same(errors, []);
});
