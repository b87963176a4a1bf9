import t from 'tap';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());

t.test('GET /health reports liveness and each component', async (t) => {
  const res = await app.req('GET', '/health');
  t.equal(res.status, 200);
  t.equal(res.body.status, 'ok');
  t.equal(res.body.components.http.status, 'ok', 'the native uWebSockets.js binding loaded');
  t.equal(res.body.components.database.status, 'ok');
  t.equal(res.body.components.shared_state.status, 'ok');
  t.equal(res.body.components.inference.status, 'ok', 'the inference backend answers over gRPC');
});

t.test('GET /ready is 200 once migrations ran and dependencies answer', async (t) => {
  const res = await app.req('GET', '/ready');
  t.equal(res.status, 200);
  t.equal(res.body.status, 'ready');
});

t.test('GET /metrics is Prometheus text with requests by route and status, latency and process metrics', async (t) => {
  await app.req('GET', '/v1/agent/agents');
  await app.req('GET', '/v1/agent/agents/agent_000000000000000000000000');
  const res = await fetch(`${app.url}/metrics`);
  t.match(res.headers.get('content-type'), /^text\/plain/);
  const text = await res.text();
  t.match(text, /parley_http_requests_total\{method="GET",route="\/v1\/agent\/agents",status="200"\} \d+/);
  t.match(text, /parley_http_requests_total\{method="GET",route="\/v1\/agent\/agents\/\{agent_id\}",status="404"\} 1/, 'labelled by route template, not raw path');
  t.match(text, /parley_http_request_duration_seconds_bucket\{le="0.005",method="GET",route="\/v1\/agent\/agents",status="200"\}/);
  t.match(text, /parley_process_cpu_seconds_total/);
  t.match(text, /parley_nodejs_eventloop_lag_seconds/);
});

t.test('GET /openapi.json is OpenAPI 3.1 version 1 and describes the agents endpoints from their schemas', async (t) => {
  const res = await app.req('GET', '/openapi.json');
  t.equal(res.status, 200);
  t.equal(res.body.openapi, '3.1.0');
  t.equal(res.body.info.version, '1');
  const create = res.body.paths['/v1/agent/agents'].post;
  t.same(create.requestBody.content['application/json'].schema.required, ['name']);
  t.equal(create.requestBody.content['application/json'].schema.additionalProperties, false, 'unknown fields are refused, and documented so');
  t.equal(create.requestBody.content['application/json'].schema.properties.name.maxLength, 120);
  t.ok(res.body.paths['/v1/agent/agents/{agent_id}'].patch);
  t.ok(res.body.paths['/v1/agent/agents'].get.parameters.some((p: { name: string }) => p.name === 'page_size'));
});
