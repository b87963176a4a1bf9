// The session actor's retrieval hook (SessionDeps.retrieve): passages for the caller's latest
// text go into the turn's system message; a failed retrieval never fails the turn.
import t from 'tap';
import { TestClock } from '../../actors/clock.ts';
import { startSession } from '../../actors/session.ts';
import type { SessionPlan } from '../../actors/types.ts';
import { createFakeBackend, createRecorder } from '../fixtures/session-backend.ts';

const plan = (over: Partial<SessionPlan> = {}): SessionPlan => ({
  sessionId: 'sess_knowledge', systemPrompt: 'You are a test agent.', context: () => [], firstMessage: { mode: 'off' }, language: 'en', voiceId: '',
  decideMs: 0, interruptible: true, bargeInMs: 100, maxDurationMs: 60_000, hangUpTool: false, reengage: null, toolEvents: true, ...over,
});

async function run(retrieve: (q: string, s: AbortSignal) => Promise<string[]>, over: Partial<SessionPlan> = {}) {
  const clock = new TestClock();
  const fake = createFakeBackend();
  const rec = createRecorder();
  const queries: string[] = [];
  const handle = startSession(plan(over), { backend: fake, output: rec.output, record: rec.record, clock, retrieve: (q, s) => (queries.push(q), retrieve(q, s)) });
  await clock.tick(10);
  return { clock, fake, rec, handle, queries };
}

t.test('passages for the latest caller text are added to the system message', async (t) => {
  const { clock, fake, rec, handle, queries } = await run(async () => ['Shipping takes five days.', 'Returns: thirty days.']);
  handle.send({ type: 'user.message', text: 'How long is shipping?', audio: false });
  for (let i = 0; i < 20 && rec.finals().length < 1; i++) await clock.tick(10);
  t.same(queries, ['How long is shipping?'], 'queried with the caller\'s text');
  const system = fake.requests[0]![0]!;
  t.equal(system.role, 'system');
  t.equal(system.content, "You are a test agent.\n\nKnowledge passages (from the agent's knowledge sources; answer from them when they are relevant):\n<passage>\nShipping takes five days.\n</passage>\n<passage>\nReturns: thirty days.\n</passage>");
  t.same(rec.finals(), ['agent: You said: How long is shipping?']);
  handle.end('test');
  await handle.ended;
});

t.test('a failed retrieval leaves the turn as it was', async (t) => {
  const { clock, fake, rec, handle } = await run(async () => { throw new Error('search down'); });
  handle.send({ type: 'user.message', text: 'Hello', audio: false });
  for (let i = 0; i < 20 && rec.finals().length < 1; i++) await clock.tick(10);
  t.equal(fake.requests[0]![0]!.content, 'You are a test agent.', 'no passages');
  t.same(rec.finals(), ['agent: You said: Hello'], 'the agent still answers');
  handle.end('test');
  await handle.ended;
});

t.test('the generated opener does not retrieve (its instructions are not caller text)', async (t) => {
  const { clock, rec, handle, queries } = await run(async () => ['x'], { firstMessage: { mode: 'prompt', prompt: 'Greet the caller.' } });
  for (let i = 0; i < 50 && rec.finals().length < 1; i++) await clock.tick(20);
  t.equal(rec.finals().length, 1, 'the opener was said');
  t.same(queries, [], 'no retrieval for it');
  handle.end('test');
  await handle.ended;
});
