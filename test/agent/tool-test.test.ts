import t from 'tap';
import { ToolTestService } from '../../src/tools/test-service.ts';
import { OutboundError } from '../../src/net/index.ts';
import { openApiValidator } from '../helpers/openapi.ts';
import { startTestServer } from '../helpers/server.ts';
import { allowWrites, startReceiver } from '../webhooks/helpers.ts';

const rec = await startReceiver((r, res) => {
  if (r.url === '/big') {
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('a'.repeat(100_000));
    return true;
  }
  if (r.url === '/exact') {
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('b'.repeat(64 * 1024));
    return true;
  }
  if (r.url === '/slow') return true; // never answers
  res.writeHead(201, { 'Content-Type': 'application/json', 'X-Reply': 'yes' }).end('{"ok":true}');
  return true;
});
const outsider = await startReceiver(); // writable, but not on the platform's allow-list
allowWrites(t, `127.0.0.1:${rec.port}`, `127.0.0.1:${outsider.port}`);
const app = await startTestServer({ config: { outboundAllow: [`127.0.0.1:${rec.port}`] } });
t.teardown(async () => {
  await app.close();
  await rec.close();
  await outsider.close();
});

async function tool(body: Record<string, unknown>): Promise<string> {
  const r = await app.req('POST', '/v1/agent/tools', { name: 'Order lookup', tool_type: 'webhook', ...body });
  if (r.status !== 201) throw new Error(`tool: ${r.status} ${r.text}`);
  return r.body.tool_id;
}
const test = (id: string, body: unknown, auth?: Record<string, string>) => app.req('POST', `/v1/agent/tools/${id}/test`, body, auth);

t.test('renders arguments in url and body, sends method, content type and headers exactly as stored', async (t) => {
  const id = await tool({
    method: 'PUT',
    url: `${rec.url}/orders/{{order_id}}?q={{query}}&keep={{undeclared}}`,
    content_type: 'application/json; charset=utf-8',
    body_template: '{"order":"{{order_id}}","note":"{{ note }}","n":{{count}},"who":"{{system.caller}}","none":"{{system.unset}}"}',
    arguments: [{ name: 'order_id' }, { name: 'query' }, { name: 'note' }, { name: 'count' }],
    headers: [
      { name: 'X-Api-Key', value: 'key-123', kind: 'custom', secret: true },
      { name: 'Authorization', value: 'Bearer tok_live', kind: 'authorization_bearer' },
      { name: 'X-MiXeD-Case', value: 'Mixed  Value;q=1' },
    ],
  });
  rec.requests.length = 0;
  const r = await test(id, { arguments: { order_id: 'A 1/2', query: 'x&y', note: 'say "hi"\n', count: 3 }, system: { caller: '+15550100' } });
  t.equal(r.status, 200, r.text);
  t.match(r.body, { status_code: 201, body: '{"ok":true}', response_truncated: false, mock: null });
  t.type(r.body.latency_ms, 'number');
  t.equal(r.body.headers['x-reply'], 'yes');
  t.same(r.body.request, {
    method: 'PUT',
    url: `${rec.url}/orders/A%201%2F2?q=x%26y&keep={{undeclared}}`,
    headers: { 'X-Api-Key': null, Authorization: null, 'X-MiXeD-Case': 'Mixed  Value;q=1', 'Content-Type': 'application/json; charset=utf-8' },
    body: '{"order":"A 1/2","note":"say \\"hi\\"\\n","n":3,"who":"+15550100","none":""}',
  }, 'the request as sent, secret header values withheld');
  const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);
  t.same(oas.check('POST', '/v1/agent/tools/{tool_id}/test', 200, r.body), [], 'matches /openapi.json');
  t.equal(r.body.headers['content-type'], 'application/json');

  t.equal(rec.requests.length, 1);
  const got = rec.requests[0]!;
  t.equal(got.method, 'PUT');
  t.equal(got.url, '/orders/A%201%2F2?q=x%26y&keep={{undeclared}}');
  t.same(JSON.parse(got.body), { order: 'A 1/2', note: 'say "hi"\n', n: 3, who: '+15550100', none: '' });
  const raw: [string, string][] = [];
  for (let i = 0; i < got.rawHeaders.length; i += 2) raw.push([got.rawHeaders[i]!, got.rawHeaders[i + 1]!]);
  t.same(raw.find(([n]) => n === 'X-Api-Key'), ['X-Api-Key', 'key-123'], 'secret custom header decrypted, name case kept');
  t.same(raw.find(([n]) => n === 'Authorization'), ['Authorization', 'Bearer tok_live'], 'credential value exactly as stored');
  t.same(raw.find(([n]) => n === 'X-MiXeD-Case'), ['X-MiXeD-Case', 'Mixed  Value;q=1'], 'custom header exactly as stored');
  t.equal(got.headers['content-type'], 'application/json; charset=utf-8');

  const read = await app.req('GET', `/v1/agent/tools/${id}`);
  t.notOk(read.text.includes('key-123') || read.text.includes('tok_live'), 'credentials still never read back');
});

t.test('captures the first 64 KB and says when it cut', async (t) => {
  const big = await tool({ method: 'GET', url: `${rec.url}/big` });
  const r = await test(big, {});
  t.equal(r.status, 200);
  t.equal(r.body.body.length, 64 * 1024);
  t.equal(r.body.response_truncated, true);
  const exact = await tool({ method: 'GET', url: `${rec.url}/exact` });
  const e = await test(exact, { arguments: {} });
  t.equal(e.body.body.length, 64 * 1024);
  t.equal(e.body.response_truncated, false, 'exactly 64 KB is not cut');
});

t.test('times out at timeout_seconds', async (t) => {
  const id = await tool({ method: 'GET', url: `${rec.url}/slow`, timeout_seconds: 1 });
  const r = await test(id, {});
  t.equal(r.status, 504);
  t.match(r.body.message, /timed out/);
});

t.test('answers from a stored mock response without any request', async (t) => {
  const id = await tool({
    url: `${rec.url}/never`,
    mock_responses: [
      { name: 'found', status_code: 200, content_type: 'application/json', body: '{"status":"shipped"}' },
      { name: 'huge', status_code: 418, content_type: 'text/plain', body: 'z'.repeat(100_000) },
    ],
  });
  rec.requests.length = 0;
  const r = await test(id, { mock: 'found' });
  t.equal(r.status, 200);
  t.same(r.body, { status_code: 200, latency_ms: 0, headers: { 'content-type': 'application/json' }, body: '{"status":"shipped"}', response_truncated: false, mock: 'found', request: null });
  const h = await test(id, { mock: 'huge' });
  t.match(h.body, { status_code: 418, response_truncated: true, mock: 'huge' });
  t.equal(h.body.body.length, 64 * 1024);
  t.equal(rec.requests.length, 0, 'no request was made');
  const missing = await test(id, { mock: 'nope' });
  t.equal(missing.status, 422);
  t.same(missing.body[0].loc, ['body', 'mock']);
});

t.test('refuses what the SSRF guard refuses', async (t) => {
  const id = await tool({ url: `${outsider.url}/hook` });
  const r = await test(id, {});
  t.equal(r.status, 400);
  t.match(r.body.message, /blocked/);
  t.equal(outsider.requests.length, 0, 'nothing left the platform');

  // A public-looking name that resolves to loopback (test resolver), allow-list off.
  const svc = new ToolTestService({
    allow: [],
    lookup: async () => [{ address: '127.0.0.1', family: 4 }],
    resolveTool: async () => ({
      tool_id: 'tool_x', name: 'x', description: '', tool_type: 'webhook', arguments: [], method: 'GET', url: `http://hooks.example.com:${rec.port}/`,
      content_type: 'application/json', body_template: '', headers: [], timeout_seconds: 5, error_handling: 'passthrough', mock_responses: [],
      expects_response: true, execution_mode: 'blocking',
    }),
  });
  rec.requests.length = 0;
  const err = await svc.test({ teamId: 'team_x', keyId: 'k', betaAccess: true }, 'tool_x', { arguments: {} }).then(() => undefined, (e: unknown) => e);
  t.ok(err instanceof OutboundError && err.reason === 'ssrf_blocked' && err.status === 400, 'refused: the name resolves to loopback');
  t.equal(rec.requests.length, 0);
});

t.test('validation: unknown arguments, client tools, other teams', async (t) => {
  const id = await tool({ url: `${rec.url}/x`, arguments: [{ name: 'a' }] });
  const r = await test(id, { arguments: { b: 1 } });
  t.equal(r.status, 422);
  t.same(r.body[0].loc, ['body', 'arguments', 'b']);
  t.equal((await test(id, { arguments: {}, extra: 1 })).status, 422);
  const other = await app.newTeam();
  t.equal((await test(id, {}, other.auth)).status, 404);
  t.equal((await test('tool_missing', {})).status, 404);
  const client = await app.req('POST', '/v1/agent/tools', { name: 'pick_color', tool_type: 'client' });
  t.equal((await test(client.body.tool_id, {})).status, 400);
});
