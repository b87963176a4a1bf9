/**
 * Custom LLM endpoints (docs/api/agents.md) in sessions: an agent with `llm.custom` is answered by an
 * OpenAI-compatible streaming endpoint (a real SSE server on loopback, allow-listed), and the
 * failure rules hold: one retry before the first token, a hold line on a failed turn, and the
 * third consecutive failure ends the session with `llm_endpoint_failure`.
 */
import t from 'tap';
import { holdLine, apologyLine } from '../../src/sessions/custom-llm.ts';
import { startTestServer } from '../helpers/server.ts';
import { agentWith, connect, createSession, sleep } from '../e2e/session-helpers.ts';
import { chunk, llmServer, reply, sse, status } from './llm-server.ts';

// ------------------------------------------------------------------------------------------
// Sessions end to end

const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'fast' } });
t.teardown(() => app.close());
const srv = await llmServer(t);
app.config.outboundAllow.push(srv.entry); // the runtime reads the platform's list

/** An agent on the custom endpoint; the write-time URL check reads PARLEY_OUTBOUND_ALLOW. */
async function customAgent(config: Record<string, unknown> = {}) {
  const saved = process.env.PARLEY_OUTBOUND_ALLOW;
  process.env.PARLEY_OUTBOUND_ALLOW = srv.entry;
  try {
    return await agentWith(app, { prompt: { first_message_mode: 'off', system_prompt: 'You are terse.' }, conversation: { eagerness: 'eager' }, llm: { custom: { base_url: `${srv.base}/chat/completions`, model: 'my-model', api_key: 'sk-secret-123' } }, ...config });
  } finally {
    if (saved === undefined) delete process.env.PARLEY_OUTBOUND_ALLOW;
    else process.env.PARLEY_OUTBOUND_ALLOW = saved;
  }
}

const record = async (id: string) => {
  for (let i = 0; i < 100; i++) {
    const r = await app.req('GET', `/v1/agent/sessions/${id}`);
    if (r.body.status === 'completed' || r.body.status === 'failed') return r.body;
    await sleep(50);
  }
  throw new Error('record did not settle');
};

t.test('plain http base_url only for an allow-listed endpoint (PARLEY_OUTBOUND_ALLOW); https otherwise', async (t) => {
  const saved = process.env.PARLEY_OUTBOUND_ALLOW;
  t.teardown(() => {
    if (saved === undefined) delete process.env.PARLEY_OUTBOUND_ALLOW;
    else process.env.PARLEY_OUTBOUND_ALLOW = saved;
  });
  process.env.PARLEY_OUTBOUND_ALLOW = srv.entry;
  const create = (base_url: string) => app.req('POST', '/v1/agent/agents', { name: 'x', config: { llm: { custom: { base_url, model: 'm', api_key: 'k' } } } });
  t.equal((await create(srv.base)).status, 201, 'the allow-listed loopback endpoint');
  const r = await create('http://llm.example.com/v1');
  t.equal(r.status, 422);
  t.match(JSON.stringify(r.body), /base_url must use https/);
  delete process.env.PARLEY_OUTBOUND_ALLOW;
  t.equal((await create(srv.base)).status, 422, 'not listed: refused');
});

t.test('the streamed reply is spoken; the request carries the key, the model, the context and the session', async (t) => {
  srv.script(reply('Hello from the custom model. How can I help?'));
  const agent = await customAgent();
  const session = await createSession(app, agent, { end_user_id: 'user-42' });
  const caller = await connect(session);
  caller.convo.sendUserMessage('Hi there');
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the reply');
  t.same(caller.finals('agent'), ['Hello from the custom model. How can I help?']);
  await caller.waitFor(() => caller.heard() === 'Hello from the custom model. How can I help?', 5_000, 'the audio');
  t.equal(srv.seen.length, 1);
  const [req] = srv.seen;
  t.equal(req.url, '/v1/chat/completions', 'the stored base_url had /chat/completions stripped; it is added back once');
  t.equal(req.headers.authorization, 'Bearer sk-secret-123', 'the key is opened only for the request');
  t.match(req.body, { model: 'my-model', stream: true, session_id: session.session_id, user_id: 'user-42' });
  t.equal(req.body.messages[0].role, 'system');
  t.match(req.body.messages[0].content, /^You are terse\./);
  t.same(req.body.messages.slice(1), [{ role: 'user', content: 'Hi there' }]);
  await caller.convo.hangup();
  const rec = await record(session.session_id);
  t.match(rec, { status: 'completed', ended_reason: 'user_hangup' });
  t.same(rec.items.map((i: any) => [i.role, i.content]), [['user', 'Hi there'], ['assistant', 'Hello from the custom model. How can I help?']]);
});

t.test('a streamed tool call maps to the session tool: hang_up_call ends the session', async (t) => {
  srv.script((_req, res) => {
    sse(res);
    res.write(chunk({ content: 'Goodbye!' }));
    res.write(chunk({ tool_calls: [{ index: 0, id: 'call_9', type: 'function', function: { name: 'hang_up_call', arguments: '' } }] }));
    res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"reason":' } }] }));
    res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: '"done"}' } }] }));
    res.write(chunk({}, 'tool_calls'));
    res.end('data: [DONE]\n\n');
  });
  const agent = await customAgent({ tools: { system_tools: { hang_up_call: true } } });
  const session = await createSession(app, agent);
  const caller = await connect(session);
  const events: string[] = [];
  caller.convo.on('toolCallStarted', (e) => events.push(`started ${e.callId} ${e.toolName} ${e.input}`));
  caller.convo.on('toolCallCompleted', (e) => events.push(`completed ${e.callId}`));
  caller.convo.sendUserMessage('Please hang up');
  t.equal((await caller.convo.ended).reason, 'agent_hangup');
  t.same(events, ['started call_9 hang_up_call {"reason":"done"}', 'completed call_9']);
  const tools = srv.seen[0].body.tools;
  t.match(tools, [{ type: 'function', function: { name: 'hang_up_call', parameters: { type: 'object' } } }], 'tools declared in function-calling format');
  const rec = await record(session.session_id);
  t.match(rec, { status: 'completed', ended_reason: 'agent_hangup' });
  t.match(rec.items.find((i: any) => i.type === 'tool_call'), { call_id: 'call_9', tool_name: 'hang_up_call', input: '{"reason":"done"}' });
});

t.test('a request that fails before its first token is retried once', async (t) => {
  srv.script(status(503), reply('Second time lucky.'));
  const agent = await customAgent();
  const session = await createSession(app, agent);
  const caller = await connect(session);
  const errors: string[] = [];
  caller.convo.on('error', (e) => errors.push(e.code));
  caller.convo.sendUserMessage('Hello', { audio: false });
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the reply');
  t.same(caller.finals('agent'), ['Second time lucky.']);
  t.equal(srv.seen.length, 2);
  t.same(errors, [], 'a turn saved by its retry is not a failure');
  await caller.convo.hangup();
});

t.test('three failed turns in a row: hold lines, then an apology and the end with llm_endpoint_failure', async (t) => {
  srv.script(status(500));
  const agent = await customAgent();
  const session = await createSession(app, agent);
  const caller = await connect(session);
  const errors: string[] = [];
  caller.convo.on('error', (e) => errors.push(e.code));
  for (let turn = 1; turn <= 2; turn++) {
    caller.convo.sendUserMessage(`Question ${turn}`, { audio: false });
    await caller.waitFor(() => caller.finals('agent').length === turn, 15_000, `hold line ${turn}`);
    await caller.waitFor(() => caller.convo.state === 'idle', 5_000, 'idle');
  }
  t.same(caller.finals('agent'), [holdLine('en'), holdLine('en')], 'a failed turn says the hold line and the call goes on');
  caller.convo.sendUserMessage('Question 3');
  const end = await caller.convo.ended;
  t.equal(end.reason, 'llm_endpoint_failure');
  t.same(caller.finals('agent'), [holdLine('en'), holdLine('en'), apologyLine('en')]);
  t.equal(caller.heard().includes('I am sorry, I am having technical difficulties'), true, 'the apology is spoken before the hang-up');
  t.same(errors, ['provider_error', 'provider_error', 'provider_error'], 'each failure tells the client');
  t.equal(srv.seen.length, 6, 'each turn: the request and one retry');
  const rec = await record(session.session_id);
  t.match(rec, { status: 'failed', ended_reason: 'llm_endpoint_failure' });
  const failures = rec.items.filter((i: any) => i.type === 'llm.endpoint_error');
  t.equal(failures.length, 3, 'each failure is an llm.endpoint_error item');
  t.match(failures[2], { reason: 'http_status', status: 500, attempts: 2, consecutive: 3, fatal: true });
  t.notMatch(JSON.stringify(rec), /sk-secret-123/, 'the key never reaches the record');
});
