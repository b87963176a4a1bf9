// A route's declared input (`RouteSpec.input`, docs/architecture.md): the HTTP layer parses the
// pagination, the query's own keys, the path and the body before the handler runs, answers the
// 422 list where they fail, hands the handler typed values, and documents the same declaration
// in OpenAPI. A bare HttpApp on port 0, no store.
import t from 'tap';
import { z } from 'zod';
import { HttpApp } from '../../src/http/app.ts';
import { buildOpenApi } from '../../src/http/openapi.ts';
import { createLogger } from '../../src/log.ts';
import { Metrics } from '../../src/telemetry/metrics.ts';

const principal = { teamId: 'team_1', keyId: 'key_1', betaAccess: false };
const http = new HttpApp({ log: createLogger({ level: 'silent' }), metrics: new Metrics(), authenticate: async () => principal });
const seen: unknown[] = [];
http.route({
  method: 'GET', path: '/things', auth: 'none',
  input: { query: z.strictObject({ colour: z.enum(['red', 'blue']).optional() }), page: 'created' },
  doc: { summary: 'List things' },
  handler: (ctx) => {
    seen.push({ query: ctx.input.query, page: ctx.input.page });
    return { status: 200, body: { colour: ctx.input.query.colour ?? null, page_size: ctx.input.page.pageSize } };
  },
});
http.route({
  method: 'POST', path: '/things/{thing_id}', auth: 'none', body: 'json', bodyOptional: true,
  input: { body: z.strictObject({ name: z.string().min(1).optional() }), params: z.strictObject({ thing_id: z.string().startsWith('th_') }) },
  doc: { summary: 'Rename a thing' },
  handler: (ctx) => ({ status: 200, body: { id: ctx.input.params.thing_id, name: ctx.input.body.name ?? null } }),
});
http.route({
  method: 'POST', path: '/beta-things', auth: 'required', beta: true, body: 'json',
  input: { body: z.strictObject({ name: z.string() }) },
  handler: () => ({ status: 201, body: {} }),
});
const port = await http.listen('127.0.0.1', 0);
t.teardown(() => http.close());
const url = `http://127.0.0.1:${port}`;
const send = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(`${url}${path}`, { method, headers: body === undefined ? headers : { 'Content-Type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: await res.json().catch(() => null) };
};

t.test('the handler gets the parsed query and page; unknown query keys are not read', async (t) => {
  t.same(await send('GET', '/things?colour=blue&page_size=5&other=1'), { status: 200, body: { colour: 'blue', page_size: 5 } });
  t.same(await send('GET', '/things'), { status: 200, body: { colour: null, page_size: 30 } }, 'defaults');
});

t.test('a bad query value is the 422 list at query, before the handler', async (t) => {
  const before = seen.length;
  const res = await send('GET', '/things?colour=green');
  t.equal(res.status, 422);
  t.match(res.body, [{ type: 'enum', loc: ['query', 'colour'] }]);
  t.equal(seen.length, before, 'the handler did not run');
});

t.test('pagination is read first, with its own rules', async (t) => {
  t.match(await send('GET', '/things?page=1&cursor=x&colour=green'), { status: 400, body: { message: 'page and cursor are mutually exclusive' } });
});

t.test('path and body: typed values; an absent optional body is {}', async (t) => {
  t.same(await send('POST', '/things/th_1', { name: 'Ada' }), { status: 200, body: { id: 'th_1', name: 'Ada' } });
  t.same(await send('POST', '/things/th_1'), { status: 200, body: { id: 'th_1', name: null } });
  t.match(await send('POST', '/things/zz_1', { name: 'Ada' }), { status: 422, body: [{ loc: ['path', 'thing_id'] }] });
  t.match(await send('POST', '/things/th_1', { name: '', extra: 1 }), { status: 422, body: [{ loc: ['body'] }, { loc: ['body'] }] });
});

t.test('beta: 403 before the body is judged', async (t) => {
  t.same(await send('POST', '/beta-things', { wrong: true }, { Authorization: 'Bearer pk_x' }), {
    status: 403,
    body: { status: 403, message: 'Agent platform is in private beta. Apply for access to enable agents for your team.' },
  });
});

t.test('OpenAPI documents the declaration: query parameters with pagination, the body, the 422', async (t) => {
  const doc = buildOpenApi(http.router.specs) as { paths: Record<string, Record<string, { parameters?: { name: string; in: string }[]; requestBody?: unknown; responses: Record<string, unknown> }>> };
  const list = doc.paths['/things']!.get!;
  t.same(list.parameters!.map((p) => `${p.in}:${p.name}`), ['query:colour', 'query:page', 'query:cursor', 'query:page_size', 'query:include_total']);
  const rename = doc.paths['/things/{thing_id}']!.post!;
  t.ok(rename.requestBody, 'the body schema');
  t.ok(rename.responses['422'], 'the 422 list');
});
