// The `turn.metrics` agent event: each turn's latency split reaches the client as the agent
// starts answering (the SDK's `turnMetrics`), the same figures the record keeps.
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { connect, createSession, sessionRecord } from './session-helpers.ts';
import type { TurnMetrics } from '../../src/client/index.ts';

t.test('a typed turn: turnMetrics arrives live and matches the record', async (t) => {
  const app = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => app.close());
  const agentId = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const session = await createSession(app, agentId);
  const caller = await connect(session);
  const seen: TurnMetrics[] = [];
  caller.convo.on('turnMetrics', (m) => seen.push(m));
  caller.convo.sendUserMessage('hello');
  await caller.waitFor(() => seen.length > 0, 15_000, 'turn metrics');
  const m = seen[0]!;
  t.equal(typeof m.totalMs, 'number');
  t.equal(typeof m.modelMs, 'number');
  t.equal(typeof m.synthesisMs, 'number');
  t.equal(m.recognitionMs, null, 'a typed turn has no recognition');
  await caller.waitFor(() => caller.finals('agent').length > 0, 15_000, 'the answer');
  await caller.convo.hangup();
  const record = await sessionRecord(app, session.session_id);
  const stored = record.metrics.turns.find((x: any) => x.turn_id === m.turnId);
  t.ok(stored, 'the record has the same turn');
  t.same([m.totalMs, m.modelMs, m.synthesisMs, m.platformMs], [stored.total_ms, stored.model_ms, stored.synthesis_ms, stored.platform_ms]);
});
