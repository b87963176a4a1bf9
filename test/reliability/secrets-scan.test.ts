/**
 * Secrets never leave (docs/reliability.md): the secret values this file sets (a tool's
 * credential headers, webhook signing secrets, a custom LLM key, the API key itself) must
 * not appear in any response body or header, any log line (trace level), or any webhook
 * payload the platform sends. Only the tool's own endpoint may receive its credential.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import t from 'tap';
import { createLogger } from '../../src/log.ts';
import { randomSchema, startPlatform } from '../../src/platform.ts';
import { markSessionActive, markSessionEnded } from '../../src/sessions/store.ts';
import { allowWrites, startReceiver } from '../webhooks/helpers.ts';

const mark = (name: string) => `${name}_${randomBytes(12).toString('hex')}`;
const SECRETS = {
  toolBearer: mark('toolbearer'),
  toolHeader: mark('toolheader'),
  toolBasic: mark('toolbasic'),
  webhook: mark('whsec'),
  initWebhook: mark('initsec'),
  llmKey: mark('sk'),
};
const apiKey = `pk_test_${randomBytes(24).toString('base64url')}`;

const receiver = await startReceiver();
t.teardown(() => receiver.close());
allowWrites(t, `127.0.0.1:${receiver.port}`);

const logLines: string[] = [];
const sink = new Writable({
  write(chunk, _enc, cb) {
    logLines.push(chunk.toString());
    cb();
  },
});
const real = !!process.env.DATABASE_URL;
const app = await startPlatform({
  env: {},
  config: {
    host: '127.0.0.1',
    port: 0,
    dataDir: 'memory',
    databaseUrl: real ? process.env.DATABASE_URL : undefined,
    redisUrl: process.env.REDIS_URL || undefined,
    bootstrapKey: apiKey,
    logLevel: 'trace',
    startNativeBackend: false,
    outboundAllow: [`127.0.0.1:${receiver.port}`],
  },
  dbSchema: real ? randomSchema() : undefined,
  statePrefix: `test:${randomBytes(4).toString('hex')}:`,
  log: createLogger({ level: 'trace', destination: sink }),
});
t.teardown(() => app.close());

const responses: string[] = [];
async function req(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(app.url + path, { method, headers: { Authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  responses.push(`${method} ${path} ${res.status} ${[...res.headers].map(([k, v]) => `${k}: ${v}`).join('\n')}\n${text}`);
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

t.test('the fixtures run every path that handles a secret', async (t) => {
  const toolBody = {
    name: 'order_lookup',
    tool_type: 'webhook',
    description: 'finds orders',
    url: `${receiver.url}/tool`,
    method: 'POST',
    headers: [
      { name: 'Authorization', value: `Bearer ${SECRETS.toolBearer}`, kind: 'authorization_bearer' },
      { name: 'X-Api-Key', value: SECRETS.toolHeader, secret: true },
    ],
  };
  const tool = await req('POST', '/v1/agent/tools', toolBody);
  t.equal(tool.status, 201, JSON.stringify(tool.body));
  const toolId = tool.body.tool_id;
  await req('GET', `/v1/agent/tools/${toolId}`);
  await req('GET', '/v1/agent/tools');
  await req('PATCH', `/v1/agent/tools/${toolId}`, { headers: [{ name: 'Authorization', value: `user:${SECRETS.toolBasic}`, kind: 'authorization_basic' }, { name: 'X-Api-Key', value: SECRETS.toolHeader, secret: true }] });
  // Refused writes that carry the secrets: the 422 must not echo them.
  await req('PATCH', `/v1/agent/tools/${toolId}`, { headers: [{ name: 'bad name', value: SECRETS.toolHeader, secret: true }] });
  await req('POST', '/v1/agent/tools', { ...toolBody, timeout_seconds: 'x' });
  const tested = await req('POST', `/v1/agent/tools/${toolId}/test`, { arguments: {} });
  t.ok(tested.status < 500, `tool test ${tested.status}`);

  const config = {
    webhooks: { post_call: [{ url: `${receiver.url}/hook`, secret: SECRETS.webhook }], conversation_init: { url: `${receiver.url}/init`, secret: SECRETS.initWebhook } },
    llm: { custom: { base_url: 'https://llm.example.com/v1', model: 'm', api_key: SECRETS.llmKey } },
    tools: { tool_ids: [toolId] },
  };
  const agent = await req('POST', '/v1/agent/agents', { name: 'Secretive', config });
  t.equal(agent.status, 201, JSON.stringify(agent.body));
  const agentId = agent.body.agent_id;
  await req('GET', `/v1/agent/agents/${agentId}`);
  await req('GET', `/v1/agent/agents/${agentId}/config`);
  await req('PATCH', `/v1/agent/agents/${agentId}/config`, { llm: { custom: { base_url: 'https://llm.example.com/v1', model: 'm2', api_key: SECRETS.llmKey } } });
  await req('PATCH', `/v1/agent/agents/${agentId}/config`, { llm: { custom: { base_url: 'not a url', model: 'm', api_key: SECRETS.llmKey } } });
  t.equal((await req('POST', `/v1/agent/agents/${agentId}/publish`)).status, 200);
  await req('GET', `/v1/agent/agents/${agentId}/versions`);
  await req('GET', `/v1/agent/agents/${agentId}/versions/1`);
  await req('GET', '/v1/agent/agents');
  await req('GET', '/openapi.json');
  // The public-agent route, keyless, for a public agent: only its display config.
  await req('PATCH', `/v1/agent/agents/${agentId}`, { public_enabled: true, allowed_origins: ['https://shop.example.com'] });
  await req('POST', `/v1/agent/agents/${agentId}/publish`);
  const widget = await fetch(`${app.url}/v1/agent/agents/${agentId}/widget`, { headers: { Origin: 'https://shop.example.com' } });
  responses.push(`widget ${widget.status}\n${await widget.text()}`);
  t.equal(widget.status, 200, 'the widget config of a public agent');

  // A session that ends: its post-call webhook goes to the receiver.
  const s = await req('POST', '/v1/agent/sessions', { agent_id: agentId });
  t.ok(s.status < 500, `session ${s.status}`);
  if (s.status === 200) {
    await markSessionActive(app.db.sql, s.body.session_id, 'node-test');
    await markSessionEnded(app.db.sql, s.body.session_id, { status: 'completed', reason: 'hangup' });
    await req('GET', `/v1/agent/sessions/${s.body.session_id}`);
    for (;;) {
      const log = await req('GET', `/v1/agent/sessions/${s.body.session_id}/webhook-deliveries`);
      if (log.body.deliveries?.some((d: any) => d.status === 'delivered' || d.status === 'failed')) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    t.ok(receiver.requests.some((r) => r.url === '/hook'), 'the post-call webhook was delivered');
  }
});

t.test('no secret value in any response, log line or webhook payload', async (t) => {
  const webhooks = receiver.requests.filter((r) => r.url !== '/tool').map((r) => `${r.url}\n${r.rawHeaders.join('\n')}\n${r.body}`);
  t.ok(responses.length > 10 && logLines.length > 10, `${responses.length} responses, ${logLines.length} log lines, ${webhooks.length} webhook requests scanned`);
  for (const [name, secret] of [...Object.entries(SECRETS), ['apiKey', apiKey]] as const) {
    t.notOk(responses.find((r) => r.includes(secret)), `${name}: not in responses`);
    t.notOk(logLines.find((l) => l.includes(secret)), `${name}: not in logs`);
    t.notOk(webhooks.find((w) => w.includes(secret)), `${name}: not in webhook payloads`);
  }
  // Control: the tool's own endpoint did get its credential (the scan would see a leak).
  const toolCalls = receiver.requests.filter((r) => r.url === '/tool');
  if (toolCalls.length) t.ok(toolCalls.some((r) => r.rawHeaders.join('\n').includes(SECRETS.toolBasic)), 'the tool endpoint received its credential');
});
