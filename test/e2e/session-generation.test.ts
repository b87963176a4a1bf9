// A conversation's generations over the backend's shared call (GenerateStreams, docs/inference.md
// "GenerateStreams: many generations on one call"): the turns of two sessions are answered, and
// the backend saw their generations as streams of one GenerateStreams call, each with its
// session's id as the request id and its team, as a Generate call of its own would carry.
import t from 'tap';
import type { CallInfo } from '../../native/service.ts';
import { startTestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { connect, createSession } from './session-helpers.ts';

t.test("two sessions' turns: every generation a stream of one shared call, with its session's metadata", async (t) => {
  const calls: CallInfo[] = [];
  const app = await startTestServer({ backend: 'synthetic', backendOptions: { onCall: (c) => calls.push(c) } });
  t.teardown(() => app.close());
  const agentId = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const sessions = await Promise.all([createSession(app, agentId), createSession(app, agentId)]);
  const callers = await Promise.all(sessions.map((s) => connect(s)));
  for (const [round, text] of ['hello', 'say "we are two"'].entries()) {
    for (const c of callers) c.convo.sendUserMessage(text);
    for (const c of callers) await c.waitFor(() => c.finals('agent').length > round, 15_000, `answer ${round + 1}`);
  }
  t.same(callers.map((c) => c.finals('agent').length), [2, 2], 'each session was answered twice');
  t.match(callers[0].finals('agent')[1], /we are two/, 'the second answer follows its question');

  const generations = calls.filter((c) => c.rpc === 'generate');
  t.equal(calls.filter((c) => c.rpc === 'generateStreams').length, 1, 'one GenerateStreams call carried the generations');
  t.same(
    generations.map((c) => c.requestId).sort(),
    sessions.flatMap((s) => [s.session_id, s.session_id]).sort(),
    "each turn's generation carried its session's id",
  );
  const teams = new Set(generations.map((c) => c.teamId));
  t.equal(teams.size, 1, 'and the team of the sessions');
  t.not([...teams][0], '', 'a team id, not empty');
  for (const c of callers) await c.convo.hangup();
});
