/**
 * The session actor's tool machinery with any `SessionTool` (the contract other engineers
 * supply tools through): the model is the fake backend answering by rules, the tools are
 * plain objects; the HTTP and client tools are covered end to end in the other files.
 */
import t from 'tap';
import { TestClock } from '../../actors/clock.ts';
import { startSession } from '../../actors/session.ts';
import type { ChatMessage, LlmEvent, SessionPlan, SessionTool, ToolOutcome } from '../../actors/types.ts';
import { createFakeBackend, createRecorder } from '../fixtures/session-backend.ts';

function plan(over: Partial<SessionPlan> = {}): SessionPlan {
  return {
    sessionId: 'sess_tools', systemPrompt: '', context: () => [], firstMessage: { mode: 'off' }, language: 'en', voiceId: '',
    decideMs: 0, interruptible: true, bargeInMs: 100, maxDurationMs: 600_000, hangUpTool: false, reengage: null, toolEvents: true, ...over,
  };
}

const text = (s: string): LlmEvent[] => [{ type: 'text', text: s }, { type: 'finish', reason: 'stop' }];
/** Calls `name` when the last message is the user's, else reads the last tool result aloud. */
const caller = (name: string, id = 'call_1') => (m: ChatMessage[]): LlmEvent[] => {
  const last = m[m.length - 1]!;
  if (last.role === 'tool') return text(`${last.name}: ${last.content}. `);
  if (last.role === 'user') return [{ type: 'tool_call', id, name, argumentsJson: '{}' }, { type: 'finish', reason: 'tool_calls' }];
  return text('ok. ');
};

/** A tool whose outcome the test decides; counts how often it was aborted. */
function manual(name: string, mode: SessionTool['mode'], source: SessionTool['source'] = 'webhook') {
  const pending: { resolve(o: ToolOutcome): void; signal: AbortSignal }[] = [];
  const tool: SessionTool = {
    spec: { name, description: '', parametersJsonSchema: '{"type":"object"}' },
    source,
    mode,
    execute: (_args, { signal }) => new Promise((resolve) => pending.push({ resolve, signal })),
  };
  return { tool, pending };
}

async function start(p: Partial<SessionPlan>, tools: SessionTool[], reply: (m: ChatMessage[]) => LlmEvent[]) {
  const clock = new TestClock();
  const fake = createFakeBackend({ reply, msPerChar: 5 });
  const rec = createRecorder();
  const handle = startSession(plan(p), { backend: fake, output: rec.output, record: rec.record, clock, tools });
  await clock.tick(10);
  return { clock, fake, rec, handle };
}

t.test('an interrupted turn cancels its blocking call: aborted, recorded as cancelled, one terminal event', async (t) => {
  const m = manual('lookup', 'blocking');
  const { clock, rec, handle } = await start({}, [m.tool], caller('lookup'));
  handle.send({ type: 'user.message', text: 'look it up' });
  await clock.tick(50);
  t.equal(m.pending.length, 1);
  handle.send({ type: 'user.interrupt' });
  await clock.tick(50);
  t.equal(m.pending[0]!.signal.aborted, true, 'the tool saw the abort');
  t.match(rec.items.filter((i) => i.type === 'tool_result').map((i) => i.payload), [{ status: 'cancelled', tool_source: 'webhook' }]);
  t.match(rec.messages.filter((x) => x.topic === 'agent-event'), [{ type: 'tool.started' }, { type: 'tool.failed' }]);
  m.pending[0]!.resolve({ status: 'completed', output: 'late', error: null, latencyMs: 1 });
  await clock.tick(50);
  t.equal(rec.items.filter((i) => i.type === 'tool_result').length, 1, 'a late answer changes nothing');
  handle.end('test');
  await handle.ended;
});

t.test('a system tool whose outcome ends the session (a cold transfer): spoken first, then the session ends with its reason', async (t) => {
  const transfer: SessionTool = {
    spec: { name: 'transfer_call', description: '', parametersJsonSchema: '{"type":"object"}' },
    source: 'system',
    mode: 'blocking',
    execute: async () => ({ status: 'completed', output: '{"transferred":true}', error: null, latencyMs: 3, endSession: 'transferred' }),
  };
  const reply = (m: ChatMessage[]): LlmEvent[] => [{ type: 'text', text: 'Connecting you now. ' }, { type: 'tool_call', id: 'c1', name: 'transfer_call', argumentsJson: '{}' }, { type: 'finish', reason: 'tool_calls' }];
  const { clock, fake, rec, handle } = await start({}, [transfer], reply);
  handle.send({ type: 'user.message', text: 'a human please' });
  await clock.tick(1000);
  t.match(await handle.ended, { status: 'completed', reason: 'transferred' });
  t.same(fake.spoken, ['Connecting you now. ']);
  t.equal(fake.requests.length, 1, 'the model is not called again after an ending outcome');
  t.match(rec.items.filter((i) => i.type !== 'message').map((i) => i.payload), [{ tool_source: 'builtin', tool_name: 'transfer_call' }, { status: 'completed', latency_ms: 3 }]);
});

t.test('call ids stay unique in a session even when the model repeats one', async (t) => {
  const a = manual('ping', 'blocking');
  const { clock, rec, handle } = await start({}, [a.tool], caller('ping', 'same'));
  for (let i = 0; i < 2; i++) {
    handle.send({ type: 'user.message', text: `ping ${i}`, audio: false });
    await clock.tick(20);
    a.pending[i]!.resolve({ status: 'completed', output: `pong${i}`, error: null, latencyMs: 1 });
    await clock.tick(200);
  }
  const ids = rec.items.filter((i) => i.type === 'tool_call').map((i) => i.payload.call_id);
  t.same(ids, ['same', 'same_2']);
  t.same(rec.finals(), ['agent: ping: pong0. ', 'agent: ping: pong1. ']);
  handle.end('test');
  await handle.ended;
});

t.test('an unknown tool fails at once and the model is told so', async (t) => {
  const { clock, rec, handle } = await start({}, [], caller('nonexistent'));
  handle.send({ type: 'user.message', text: 'go', audio: false });
  await clock.tick(200);
  t.same(rec.finals(), ['agent: nonexistent: {"error":"Unknown tool: nonexistent"}. ']);
  t.match(rec.items.filter((i) => i.type === 'tool_result').map((i) => i.payload), [{ status: 'failed', tool_source: 'unknown' }]);
  handle.end('test');
  await handle.ended;
});

t.test('background results wait while the caller speaks, then are announced once the agent is idle', async (t) => {
  const bg = manual('job', 'background');
  const { clock, fake, rec, handle } = await start({}, [bg.tool], caller('job'));
  handle.send({ type: 'user.message', text: 'start the job' });
  await clock.tick(1000);
  t.same(rec.finals(), ['agent: job: {"status":"running in background"}. ']);
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  await clock.tick(20);
  t.equal(handle.state, 'listening');
  bg.pending[0]!.resolve({ status: 'completed', output: '{"done":1}', error: null, latencyMs: 5 });
  await clock.tick(200);
  t.equal(rec.finals().length, 1, 'not while the caller speaks');
  fake.stt!.push({ type: 'speech_ended', atMs: 0 });
  await clock.tick(50);
  t.equal(handle.state === 'idle' || handle.state === 'thinking' || handle.state === 'speaking', true);
  await clock.tick(1000);
  t.same(rec.finals().slice(1), ['agent: job: {"done":1}. '], 'announced at the pause');
  const last = fake.requests[fake.requests.length - 1]!;
  t.match(last.slice(-2), [{ role: 'assistant', toolCalls: [{ name: 'job' }] }, { role: 'tool', content: '{"done":1}' }], 'the result reaches the model as a tool result');
  handle.end('test');
  await handle.ended;
});

t.test('a turn interrupted before it spoke (waiting on a tool) closes its unused synthesis stream', async (t) => {
  const m = manual('lookup', 'blocking');
  const clock = new TestClock();
  const fake = createFakeBackend({ reply: caller('lookup'), msPerChar: 5 });
  let opened = 0;
  let closed = 0;
  const synthesize = fake.synthesize.bind(fake);
  fake.synthesize = async (o) => {
    const s = await synthesize(o);
    opened++;
    const end = s.end.bind(s);
    return Object.assign(s, { end: () => { closed++; end(); } });
  };
  const rec = createRecorder();
  const handle = startSession(plan(), { backend: fake, output: rec.output, record: rec.record, clock, tools: [m.tool] });
  await clock.tick(10);
  handle.send({ type: 'user.message', text: 'look it up' });
  await clock.tick(50);
  handle.send({ type: 'user.interrupt' });
  await clock.tick(50);
  t.equal(opened, 1);
  t.equal(closed, 1, 'ended, so the backend finishes it and its slot is given back');
  handle.end('test');
  await handle.ended;
});

t.test('ending the session stops the calls still running: each sees the abort, is recorded as cancelled once, and a late answer changes nothing', async (t) => {
  const bg = manual('job', 'background');
  const ff = manual('notify', 'fire_and_forget');
  const both = (m: ChatMessage[]): LlmEvent[] => {
    const last = m[m.length - 1]!;
    if (last.role !== 'user') return text('Started. ');
    return [{ type: 'tool_call', id: 'c_bg', name: 'job', argumentsJson: '{}' }, { type: 'tool_call', id: 'c_ff', name: 'notify', argumentsJson: '{}' }, { type: 'finish', reason: 'tool_calls' }];
  };
  const { clock, rec, handle } = await start({}, [bg.tool, ff.tool], both);
  handle.send({ type: 'user.message', text: 'go', audio: false });
  await clock.tick(100);
  t.equal(bg.pending.length + ff.pending.length, 2, 'both calls run');
  t.notOk(bg.pending[0]!.signal.aborted || ff.pending[0]!.signal.aborted, 'and outlive their turn');
  handle.end('test');
  t.match(await handle.ended, { reason: 'test' });
  t.ok(bg.pending[0]!.signal.aborted && ff.pending[0]!.signal.aborted, 'both saw the abort');
  t.match(rec.items.filter((i) => i.type === 'tool_result').map((i) => i.payload), [
    { call_id: 'c_bg', status: 'cancelled', error: 'Cancelled: the conversation ended' },
    { call_id: 'c_ff', status: 'cancelled', error: 'Cancelled: the conversation ended' },
  ]);
  bg.pending[0]!.resolve({ status: 'completed', output: 'late', error: null, latencyMs: 1 });
  ff.pending[0]!.resolve({ status: 'completed', output: 'late', error: null, latencyMs: 1 });
  await clock.tick(50);
  t.equal(rec.items.filter((i) => i.type === 'tool_result').length, 2, 'one result each');
  t.same(rec.messages.filter((x) => x.topic === 'agent-event').map((x) => (x as { type: string }).type), ['tool.started', 'tool.started', 'tool.failed', 'tool.failed'], 'one terminal event each');
});
