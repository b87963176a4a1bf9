import t from 'tap';
import client from 'prom-client';
import { TestClock } from '../../actors/clock.ts';
import { Supervisor } from '../../actors/supervisor.ts';
import type { SessionEnd, SessionPlan, ToolOutcome } from '../../actors/types.ts';
import { createFakeBackend, createRecorder } from '../fixtures/session-backend.ts';

const plan = (id: string): SessionPlan => ({
  sessionId: id,
  systemPrompt: '',
  context: () => [],
  firstMessage: { mode: 'off' },
  language: 'en',
  voiceId: '',
  decideMs: 0,
  interruptible: true,
  bargeInMs: 0,
  maxDurationMs: 60_000,
  hangUpTool: false,
  reengage: null,
  toolEvents: true,
});

function setup(maxSessions = 2) {
  const clock = new TestClock();
  const registry = new client.Registry();
  const sup = new Supervisor({ maxSessions, clock, registry });
  const ends: Record<string, SessionEnd> = {};
  const launch = (id: string, output = createRecorder().output) => {
    const fake = createFakeBackend();
    const rec = createRecorder();
    const handle = sup.start(plan(id), { backend: fake, output, record: rec.record }, (e) => { ends[id] = e; });
    return { handle, fake, rec };
  };
  return { clock, sup, registry, ends, launch };
}

t.test('the cap on live sessions: hasCapacity, reservations', async (t) => {
  const { sup, launch, clock } = setup(2);
  t.ok(sup.hasCapacity());
  launch('a');
  const release = sup.reserve();
  t.ok(release);
  t.notOk(sup.hasCapacity(), 'one live plus one connecting');
  t.equal(sup.reserve(), null);
  release!();
  t.ok(sup.hasCapacity());
  launch('b');
  t.notOk(sup.hasCapacity());
  sup.end('a', 'test');
  await clock.tick(20);
  t.ok(sup.hasCapacity(), 'an ended session frees its place');
  t.equal(sup.size, 1);
  sup.end('b', 'test');
  await clock.tick(20);
});

t.test('control messages end the session this node holds; others are ignored', async (t) => {
  const { sup, launch, clock, ends } = setup();
  launch('a');
  sup.control('not json');
  sup.control(JSON.stringify({ session_id: 'elsewhere', action: 'end', reason: 'api' }));
  sup.control(JSON.stringify({ session_id: 'a', action: 'end', reason: 'api' }));
  await clock.tick(20);
  t.match(ends.a, { status: 'completed', reason: 'ended_by_api' });
});

t.test('a session that throws ends alone; the others go on', async (t) => {
  const { sup, launch, clock, ends } = setup();
  const bad = createRecorder();
  const throwing = { ...bad.output, message: (m: { topic: string; state?: string }) => { if (m.topic === 'lk.agent.state' && m.state === 'listening') throw new Error('boom'); } };
  const a = launch('a', throwing as never);
  const b = launch('b');
  await clock.tick(20);
  a.fake.say('hello');
  b.fake.say('hello');
  await clock.tick(2000);
  t.match(ends.a, { status: 'failed', reason: 'error' });
  t.equal(b.handle.state, 'idle', 'the other session answered and goes on');
  t.equal(sup.size, 1);
  t.match(await registry(sup), /parley_sessions_ended_total\{status="failed",reason="error"\} 1/);
  sup.end('b', 'test');
  await clock.tick(20);
});

t.test('drain ends every session and stops taking new ones', async (t) => {
  const { sup, launch, clock, ends, registry: reg } = setup(5);
  launch('a');
  launch('b');
  await clock.tick(20);
  const drained = sup.drain('shutdown', 5000);
  await clock.tick(20);
  await drained;
  t.match(ends, { a: { reason: 'shutdown' }, b: { reason: 'shutdown' } });
  t.notOk(sup.hasCapacity(), 'no new sessions while draining');
  t.match(await reg.metrics(), /parley_sessions_live 0/);
});

async function registry(sup: Supervisor) {
  return (sup.options.registry as client.Registry).metrics();
}

t.test('watchTurns: every session’s turns reach the watchers; a watcher that throws fails no turn, and unwatching stops them', async (t) => {
  const { sup, launch, clock } = setup(4);
  const seen: string[] = [];
  const unwatch = sup.watchTurns((tl, m) => { seen.push(`${tl.sessionId}:${tl.turnId}:${m.total_ms === tl.firstAudioAt! - tl.speechEndedAt!}`); });
  sup.watchTurns(() => { throw new Error('a broken probe'); });
  const a = launch('a');
  const b = launch('b');
  await clock.tick(10);
  a.fake.say('Hello');
  b.fake.say('Hi there');
  await clock.tick(2000);
  t.same(seen.sort(), ['a:1:true', 'b:1:true']);
  t.same(a.rec.items.map((i) => i.payload.role), ['user', 'assistant'], 'the turn went on: both sides recorded');
  unwatch();
  a.fake.say('Again');
  await clock.tick(2000);
  t.equal(seen.length, 2, 'no more after unwatching');
  sup.end('a', 'test');
  sup.end('b', 'test');
  await clock.tick(20);
});

t.test('ending one session stops its tool calls (the abort reaches them); a call of another session goes on', async (t) => {
  const clock = new TestClock();
  const sup = new Supervisor({ maxSessions: 4, clock, registry: new client.Registry() });
  const signals: Record<string, AbortSignal> = {};
  const finish: Record<string, () => void> = {};
  const tool = {
    spec: { name: 'job', description: '', parametersJsonSchema: '{"type":"object"}' },
    source: 'webhook' as const,
    mode: 'background' as const,
    execute: (_args: string, o: { callId: string; signal: AbortSignal }) => new Promise<ToolOutcome>((resolve) => {
      signals[o.callId] = o.signal;
      finish[o.callId] = () => resolve({ status: 'completed', output: '{"done":true}', error: null, latencyMs: 1 });
    }),
  };
  const launch = (id: string) => {
    const fake = createFakeBackend({ reply: (m) => (m[m.length - 1]!.role === 'user' ? [{ type: 'tool_call', id: `call_${id}`, name: 'job', argumentsJson: '{}' }, { type: 'finish', reason: 'tool_calls' }] : [{ type: 'text', text: 'Noted. ' }, { type: 'finish', reason: 'stop' }]) });
    const rec = createRecorder();
    const handle = sup.start(plan(id), { backend: fake, output: rec.output, record: rec.record, tools: [tool] }, () => {});
    return { handle, rec };
  };
  const a = launch('a');
  const b = launch('b');
  await clock.tick(10);
  a.handle.send({ type: 'user.message', text: 'start' });
  b.handle.send({ type: 'user.message', text: 'start' });
  await clock.tick(100);
  t.same(Object.keys(signals).sort(), ['call_a', 'call_b'], 'each session started its call');
  sup.end('a', 'test');
  await a.handle.ended;
  t.equal(signals.call_a!.aborted, true, 'the ended session’s call was stopped with it');
  t.equal(signals.call_b!.aborted, false, 'the other session’s call runs on');
  finish.call_b!();
  await clock.tick(500);
  t.match(b.rec.items.filter((i) => i.type === 'tool_result').map((i) => i.payload), [{ call_id: 'call_b', status: 'completed' }]);
  t.equal(b.rec.finals().filter((f) => f === 'agent: Noted. ').length, 2, 'its result was announced: a second agent turn');
  sup.end('b', 'test');
  await b.handle.ended;
});
