// The text-only run of agent tests: each turn has a time limit; a turn that does not finish
// stops the run with an error (and the model call is cancelled).
import t from 'tap';
import { runTextConversation, TEST_TURN_TIMEOUT_MS } from '../../src/agent-tests/runner.ts';
import type { SessionPlan } from '../../actors/types.ts';
import { hangingChat } from '../fixtures/hanging-chat.ts';
import { createFakeBackend } from '../fixtures/session-backend.ts';

const plan: SessionPlan = {
  sessionId: 'test_run', systemPrompt: '', context: () => [], firstMessage: { mode: 'fixed', text: 'Hello.' }, language: 'en', voiceId: '',
  decideMs: 0, interruptible: true, bargeInMs: 100, maxDurationMs: 60_000, hangUpTool: false, reengage: null, toolEvents: true,
};

t.test('a turn that does not finish within the turn limit is an error; its model call is cancelled', async (t) => {
  t.equal(TEST_TURN_TIMEOUT_MS, 120_000, 'the default limit per turn');
  const chat = hangingChat();
  const r = await runTextConversation({ plan, backend: chat, userTurns: ['one', 'two'], turnTimeoutMs: 200 });
  t.equal(r.error, 'The agent did not answer in time');
  t.same(r.transcript, [{ role: 'assistant', content: 'Hello.' }, { role: 'user', content: 'one' }], 'the run stopped at the stuck turn');
  t.equal(chat.calls, 1);
  t.equal(chat.aborted, 1, 'the stuck call was cancelled');
});

t.test('every user turn is answered in order, as text', async (t) => {
  const r = await runTextConversation({ plan, backend: createFakeBackend(), userTurns: ['one', 'two'] });
  t.equal(r.error, null);
  t.same(r.transcript.map((m) => `${m.role}: ${m.content}`), ['assistant: Hello.', 'user: one', 'assistant: You said: one', 'user: two', 'assistant: You said: two']);
});
