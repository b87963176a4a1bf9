/**
 * Custom LLM endpoints (docs/api/agents.md), the client on its own: SSE parsing, chunk → event
 * mapping, the OpenAI shapes, the first-token cap, the retry rule, the failure count and the
 * SSRF guard, against a real SSE server on loopback. Sessions end to end: sessions.test.ts.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { ChunkMapper, customLlmGenerate, holdLine, apologyLine, SseParser, toOpenAiMessages, LLM_MAX_CONSECUTIVE_FAILURES } from '../../src/sessions/custom-llm.ts';
import { createSecretBox } from '../../src/crypto/secrets.ts';
import type { LlmEvent } from '../../actors/types.ts';
import { chunk, llmServer, reply, sse, status } from './llm-server.ts';

// ------------------------------------------------------------------------------------------
// Pieces

t.test('SSE parsing: events across chunk boundaries, CRLF, comments, multi-line data', async (t) => {
  const p = new SseParser();
  const text = ': keep-alive\r\ndata: {"a":\r\ndata: 1}\r\n\r\nevent: x\ndata: two\n\ndata: [DONE]\n\n';
  const bytes = Buffer.from(text);
  const out: string[] = [];
  for (let i = 0; i < bytes.length; i += 3) out.push(...p.push(bytes.subarray(i, i + 3)));
  out.push(...p.end());
  t.same(out, ['{"a":\n1}', 'two', '[DONE]']);
  const utf8 = new SseParser();
  const e = Buffer.from('data: “héllo”\n\n');
  t.same([...utf8.push(e.subarray(0, 8)), ...utf8.push(e.subarray(8))], ['“héllo”'], 'a UTF-8 sequence cut by a chunk');
});

t.test('tool_calls deltas are assembled by index and emitted whole, then the finish', async (t) => {
  const m = new ChunkMapper();
  const ev: LlmEvent[] = [];
  const c = (delta: object, finish: string | null = null) => ({ choices: [{ index: 0, delta, finish_reason: finish }] });
  ev.push(...m.map(c({ content: 'Let me check. ' })));
  ev.push(...m.map(c({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'lookup', arguments: '' } }] })));
  ev.push(...m.map(c({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'hang_up_call', arguments: '{}' } }] })));
  ev.push(...m.map(c({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] })));
  ev.push(...m.map(c({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] })));
  ev.push(...m.map(c({}, 'tool_calls')));
  ev.push(...m.end());
  t.same(ev, [
    { type: 'text', text: 'Let me check. ' },
    { type: 'tool_call', id: 'call_a', name: 'lookup', argumentsJson: '{"city":"Oslo"}' },
    { type: 'tool_call', id: 'call_b', name: 'hang_up_call', argumentsJson: '{}' },
    { type: 'finish', reason: 'tool_calls' },
  ]);
  let thrown: unknown;
  try {
    new ChunkMapper().map({ error: { message: 'overloaded' } });
  } catch (err) {
    thrown = err;
  }
  t.match(thrown, { reason: 'stream_error' }, 'an error object in the stream is a failure');
});

t.test('messages go in the OpenAI shape, tool calls and results included', async (t) => {
  t.same(
    toOpenAiMessages([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Bye' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'hang_up_call', argumentsJson: '{}' }] },
      { role: 'tool', content: '{"ok":true}', toolCallId: 'c1', name: 'hang_up_call' },
    ]),
    [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Bye' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'hang_up_call', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: '{"ok":true}' },
    ],
  );
});

t.test('no first token within the cap: retried once, then the hold line; a broken stream after the first token is not retried', async (t) => {
  const srv = await llmServer(t);
  const box = createSecretBox(randomBytes(32));
  const failures: unknown[] = [];
  const gen = customLlmGenerate({
    custom: { base_url: srv.base, model: 'm', api_key: { sealed: box.seal('sk-test'), fingerprint: 'f' } },
    box,
    sessionId: 'sess_x',
    language: 'en',
    outbound: { allow: [srv.entry] },
    timeoutMs: 300,
    retryDelayMs: 10,
    onFailure: (f) => failures.push(f),
  });
  const run = async () => {
    const out: LlmEvent[] = [];
    for await (const e of gen({ messages: [{ role: 'user', content: 'hi' }], tools: [], signal: new AbortController().signal })) out.push(e);
    return out;
  };
  srv.script((_req, res) => {
    sse(res);
    res.write(': still thinking\n\n'); // a comment is not a token
  });
  t.same(await run(), [{ type: 'text', text: holdLine('en') }, { type: 'finish', reason: 'error' }]);
  t.equal(srv.seen.length, 2, 'one retry');
  t.match(failures, [{ reason: 'timeout', attempts: 2, consecutive: 1, fatal: false, afterFirstToken: false }]);

  srv.script((_req, res) => {
    sse(res);
    res.write(chunk({ content: 'Half a sen' }));
    setTimeout(() => res.destroy(), 30);
  });
  t.same(await run(), [{ type: 'text', text: 'Half a sen' }, { type: 'finish', reason: 'error' }], 'what was said stays; no hold line after the first token');
  t.equal(srv.seen.length, 1, 'not retried after the first token');
  t.match(failures[1], { reason: 'stream_error', attempts: 1, consecutive: 2, afterFirstToken: true });

  srv.script(status(401));
  const third = await run();
  t.same(third, [{ type: 'text', text: apologyLine('en') }, { type: 'finish', reason: 'error' }], `failure ${LLM_MAX_CONSECUTIVE_FAILURES} in a row: the apology`);
  t.equal(srv.seen.length, 1, 'a 401 is not retried');
  t.match(failures[2], { reason: 'http_status', status: 401, consecutive: 3, fatal: true });
});

t.test('a tool call whose arguments stream longer than the cap meets the first-token rule at its first fragment', async (t) => {
  const srv = await llmServer(t);
  const box = createSecretBox(randomBytes(32));
  const failures: unknown[] = [];
  const gen = customLlmGenerate({
    custom: { base_url: srv.base, model: 'm', api_key: { sealed: box.seal('k'), fingerprint: 'f' } },
    box, sessionId: 's', language: 'en', outbound: { allow: [srv.entry] }, timeoutMs: 1500, retryDelayMs: 10, onFailure: (f) => failures.push(f),
  });
  // Fragments every 600 ms (well inside the 1.5 s silence cap); the call completes after 2.4 s.
  srv.script((_req, res) => {
    sse(res);
    res.write(chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '' } }] }));
    const parts = ['{"q":', '"slow', ' args"}'];
    let i = 0;
    const timer = setInterval(() => {
      if (i < parts.length) return void res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: parts[i++] } }] }));
      clearInterval(timer);
      res.write(chunk({}, 'tool_calls'));
      res.end('data: [DONE]\n\n');
    }, 600);
  });
  const out: LlmEvent[] = [];
  for await (const e of gen({ messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 'lookup', description: 'd', parametersJsonSchema: '{}' }], signal: new AbortController().signal })) out.push(e);
  t.same(out, [{ type: 'tool_call', id: 'call_1', name: 'lookup', argumentsJson: '{"q":"slow args"}' }, { type: 'finish', reason: 'tool_calls' }]);
  t.same(failures, []);
  t.equal(srv.seen.length, 1);
  t.same(srv.seen[0].body.tools, [{ type: 'function', function: { name: 'lookup', description: 'd', parameters: {} } }]);
});

t.test('the SSRF guard applies: a loopback endpoint that is not allow-listed is never contacted', async (t) => {
  const srv = await llmServer(t);
  srv.script(reply('should not be reached'));
  const box = createSecretBox(randomBytes(32));
  const failures: any[] = [];
  const gen = customLlmGenerate({
    custom: { base_url: srv.base, model: 'm', api_key: { sealed: box.seal('k'), fingerprint: 'f' } },
    box, sessionId: 's', language: 'en', outbound: { allow: [] }, retryDelayMs: 10, onFailure: (f) => failures.push(f),
  });
  const out: LlmEvent[] = [];
  for await (const e of gen({ messages: [], tools: [], signal: new AbortController().signal })) out.push(e);
  t.equal(srv.seen.length, 0);
  t.match(failures, [{ reason: 'ssrf_blocked', attempts: 1 }]);
  t.same(out[0], { type: 'text', text: holdLine('en') });
});
