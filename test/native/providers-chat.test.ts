// The `openai` chat engine of the native backend against an OpenAI-compatible chat server (a
// fixture answering by the scripted rules): the contract kit's Generate checks with the
// scripted expectations, what the server is sent, structured output by json_schema and by
// instruction with one retry, and Health/Capabilities naming the provider.
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { Metadata } from '@grpc/grpc-js';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { CapabilitiesRequestSchema, GenerateRequestSchema, HealthRequestSchema, Role, type CapabilitiesResponse, type GenerateResponse, type HealthResponse } from '../../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient } from '../../src/inference/grpc-service.ts';
import { startBackend } from '../../native/server.ts';
import { startChatProvider } from '../fixtures/chat-provider.ts';
import { runKit } from '../contract/kit.ts';
import { readSseBatches } from '../../native/providers/sse.ts';

const KEY = 'sk-test-secret-4242';
const chat = await startChatProvider();
let logs = '';
const logger = pino({ level: 'debug' }, new Writable({ write(c, _e, cb) { logs += c.toString(); cb(); } }));
const backend = await startBackend({
  address: '127.0.0.1:0',
  engine: 'synthetic',
  providers: { llm: { kind: 'openai', baseUrl: chat.base, apiKey: KEY, model: 'fixture' }, firstByteTimeoutMs: 5000 },
  logger,
});
const client = createGrpcClient(backend.address);
t.teardown(async () => {
  client.close();
  await backend.close();
  await chat.close();
});

async function generate(req: Parameters<typeof create<typeof GenerateRequestSchema>>[1]) {
  const out: GenerateResponse[] = [];
  for await (const m of client.generate(create(GenerateRequestSchema, req))) out.push(m as GenerateResponse);
  return out;
}
const textOf = (msgs: GenerateResponse[]) => msgs.flatMap((m) => (m.event.case === 'textDelta' ? [m.event.value] : [])).join('');

t.test('the contract kit: Generate through the provider follows the scripted rules of the server behind it', async (t) => {
  const results = (await runKit(backend.address, { scriptedChat: true })).filter((r) => r.name.startsWith('Generate') || r.name.startsWith('Capabilities') || r.name.startsWith('Health'));
  t.equal(results.length, 7, 'Capabilities, Health, the four Generate checks and GenerateStreams ran');
  for (const r of results) t.ok(r.ok, r.name, { error: r.error });
});

t.test('what the server is sent: model, key, stream with usage, tools and tool results in the OpenAI shape', async (t) => {
  chat.requests.length = 0;
  const tools = [{ name: 'weather', description: 'The forecast', parametersJsonSchema: JSON.stringify({ type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }) }];
  const first = await generate({ model: 'llm-medium', messages: [{ role: Role.SYSTEM, content: 'Be brief.' }, { role: Role.USER, content: 'Weather please, city is Lyon.' }], tools, temperature: 0.2 });
  const call = first.find((m) => m.event.case === 'toolCall')!.event.value as { id: string; name: string; argumentsJson: string };
  t.same({ name: call.name, args: JSON.parse(call.argumentsJson) }, { name: 'weather', args: { city: 'Lyon' } }, 'one whole tool call, its arguments joined from pieces');
  t.match(first[first.length - 1]!.event, { case: 'finish', value: { reason: 2, usage: { inputTokens: Number, outputTokens: Number } } }, 'TOOL_CALLS with usage');
  const req = chat.requests[0]!;
  t.equal(req.url, '/v1/chat/completions');
  t.equal(req.headers.authorization, `Bearer ${KEY}`, 'the key goes in the Authorization header');
  t.match(req.body, { model: 'fixture', stream: true, stream_options: { include_usage: true }, temperature: 0.2, tool_choice: 'auto', tools: [{ type: 'function', function: { name: 'weather', parameters: { required: ['city'] } } }] });
  t.same(req.body.messages, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Weather please, city is Lyon.' }]);

  const second = await generate({
    messages: [
      { role: Role.USER, content: 'Weather please, city is Lyon.' },
      { role: Role.ASSISTANT, content: '', toolCalls: [call] },
      { role: Role.TOOL, toolCallId: call.id, name: 'weather', content: '{"forecast":"sunny"}' },
    ],
    tools,
  });
  t.equal(textOf(second), 'weather returned: {"forecast":"sunny"}', 'the tool result reached the model');
  t.same(chat.requests[1]!.body.messages.slice(1), [
    { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: { name: 'weather', arguments: call.argumentsJson } }] },
    { role: 'tool', tool_call_id: call.id, content: '{"forecast":"sunny"}' },
  ]);
  t.match(second[second.length - 1]!.event, { case: 'finish', value: { reason: 1 } }, 'STOP');

  const forced = await generate({ messages: [{ role: Role.USER, content: 'Hi, city is Nice' }], tools, toolChoice: 'weather' });
  t.same(chat.requests[2]!.body.tool_choice, { type: 'function', function: { name: 'weather' } }, 'a forced tool');
  t.ok(forced.some((m) => m.event.case === 'toolCall'));
  await generate({ messages: [{ role: Role.USER, content: 'Hi' }], tools, toolChoice: 'none' });
  t.notOk('tools' in chat.requests[3]!.body, 'tool_choice none sends no tools');
  const cut = await generate({ messages: [{ role: Role.USER, content: 'say "one two three four five six seven eight nine ten"' }], maxTokens: 3 });
  t.equal(chat.requests[4]!.body.max_tokens, 3);
  t.match(cut[cut.length - 1]!.event, { case: 'finish', value: { reason: 3 } }, 'LENGTH');
});

t.test('structured output: json_schema when the server takes it; else by instruction, checked, with one retry', async (t) => {
  const schema = { type: 'object', properties: { city: { type: ['string', 'null'] }, greeted: { enum: ['success', 'failure', 'unknown'] } }, required: ['city', 'greeted'] };
  const req = { messages: [{ role: Role.USER, content: 'my city is Lyon and greeted: success' }], structured: { name: 'analysis', jsonSchema: JSON.stringify(schema) } };
  chat.requests.length = 0;
  t.same(JSON.parse(textOf(await generate(req))), { city: 'Lyon', greeted: 'success' });
  t.match(chat.requests[0]!.body, { stream: false, response_format: { type: 'json_schema', json_schema: { name: 'analysis', schema } } });

  chat.refuseJsonSchema = true;
  chat.proseFirst = true;
  chat.requests.length = 0;
  const out = await generate(req);
  t.same(JSON.parse(textOf(out)), { city: 'Lyon', greeted: 'success' }, 'the same document');
  t.equal(chat.requests.length, 3, 'refused json_schema, then the instruction, then one retry after prose');
  t.match(chat.requests[1]!.body.messages[0], { role: 'system', content: /JSON Schema/ });
  t.notOk('response_format' in chat.requests[1]!.body);
  t.match(chat.requests[2]!.body.messages.at(-1), { role: 'user', content: /not valid: the reply is not JSON/ });
  const usage = out.at(-1)!.event;
  t.ok(usage.case === 'finish' && (usage.value.usage?.inputTokens ?? 0) > 0, 'usage adds up the attempts');

  chat.requests.length = 0;
  await generate(req);
  t.notOk(chat.requests.some((r) => r.body.response_format), 'the refusal is remembered');
  chat.refuseJsonSchema = false;
  chat.proseFirst = false;
});

t.test('server-sent events: split across pieces anywhere (CRLF, CR, LF), comments skipped, data lines joined; the events a piece completes come together', async (t) => {
  const pieces = ['data: {"a":1}\r', '\n\r\n: comment\ndata: x\ndata:y\n\nevent: e\rdata: z\r\r', 'data: [DO', 'NE]\n\n', 'data: tail'];
  async function* body() {
    for (const p of pieces) yield new TextEncoder().encode(p);
  }
  const batches = [];
  for await (const b of readSseBatches(body())) batches.push(b);
  t.same(batches, [
    [{ event: '', data: '{"a":1}' }, { event: '', data: 'x\ny' }],
    // A piece ending in CR: the line ends there, but whether an LF follows is known with the next piece.
    [{ event: 'e', data: 'z' }],
    [{ event: '', data: '[DONE]' }],
    [{ event: '', data: 'tail' }],
  ]);
});

t.test('answers one after another: the text whole, and one connection to the server for all of them', async (t) => {
  chat.requests.length = 0;
  for (let i = 0; i < 4; i++) {
    const out = await generate({ messages: [{ role: Role.USER, content: 'say "one two three four five six"' }] });
    t.equal(textOf(out), 'one two three four five six', `answer ${i + 1}: every word, in order`);
    t.match(out.at(-1)!.event, { case: 'finish', value: { reason: 1 } });
  }
  t.equal(chat.requests.length, 4);
  t.equal(new Set(chat.requests.map((r) => r.connection)).size, 1, 'the answers came on one kept-alive connection');
});

t.test('Capabilities and Health name the provider and say it answers; the key is in no log line', async (t) => {
  const caps = await new Promise<CapabilitiesResponse>((resolve, reject) => client.capabilities(create(CapabilitiesRequestSchema), new Metadata(), {}, (e, r) => (e ? reject(e) : resolve(r!))));
  const tier = caps.models.find((m) => m.name === 'llm-medium')!;
  t.match(tier.description, new RegExp(`served by the openai provider at 127\\.0\\.0\\.1:${chat.port} \\(model fixture\\); answering`));
  t.ok(caps.models.some((m) => m.name === 'scripted'), 'scripted stays reachable by name');
  const h = await new Promise<HealthResponse>((resolve, reject) => client.health(create(HealthRequestSchema), new Metadata(), {}, (e, r) => (e ? reject(e) : resolve(r!))));
  t.match(h.engines.find((e) => e.name.startsWith('llm:')), { ok: true, detail: /answering/ });
  t.notOk(logs.includes(KEY), 'no log line carries the key');
});
