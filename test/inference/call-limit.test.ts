// How many inference calls the platform keeps in flight per backend address. Every live session
// holds a transcription stream for its whole length, so a fixed limit below the node's session
// cap left turns waiting for a slot and failing `Inference backend busy` (bench/README.md).
import t from 'tap';
import { inferenceCallLimit, loadConfig } from '../../src/config.ts';
import { agentWith, createSession, rawSocket } from '../e2e/session-helpers.ts';
import { startTestServer } from '../helpers/server.ts';

t.test('PARLEY_INFERENCE_MAX_CALLS, else twice PARLEY_MAX_SESSIONS (at least 1,000)', async (t) => {
  t.equal(inferenceCallLimit(loadConfig({})), 4000, 'default: 2,000 sessions → 4,000 calls');
  t.equal(inferenceCallLimit(loadConfig({ PARLEY_MAX_SESSIONS: '3000' })), 6000);
  t.equal(inferenceCallLimit(loadConfig({ PARLEY_MAX_SESSIONS: '100' })), 1000);
  t.equal(inferenceCallLimit(loadConfig({ PARLEY_MAX_SESSIONS: '3000', PARLEY_INFERENCE_MAX_CALLS: '250' })), 250);
  t.throws(() => loadConfig({ PARLEY_INFERENCE_MAX_CALLS: '0' }), /PARLEY_INFERENCE_MAX_CALLS must be a positive integer/);
  t.throws(() => loadConfig({ PARLEY_INFERENCE_MAX_CALLS: '2.5' }), /PARLEY_INFERENCE_MAX_CALLS must be a positive integer/);
});

t.test('the limit reaches the inference client: a live session holds a call for its whole length', async (t) => {
  const app = await startTestServer({ backend: 'synthetic', config: { inferenceMaxCalls: 1 } });
  t.teardown(() => app.close());
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const session = await createSession(app, agent);
  const caller = rawSocket(`${session.websocket_url}?token=${session.token}`);
  t.ok(await caller.started(), 'the session started: its transcription stream took the one call');
  const busy = await app.req('POST', '/v1/tts', { text: 'Hello there.', format: 'wav' });
  t.equal(busy.status, 503);
  t.match(busy.text, /Inference backend busy/);
  caller.ws.send(JSON.stringify({ type: 'user.hangup' }));
  await caller.closed;
  let after = await app.req('POST', '/v1/tts', { text: 'Hello there.', format: 'wav' });
  for (let i = 0; i < 20 && after.status === 503; i++) after = await app.req('POST', '/v1/tts', { text: 'Hello there.', format: 'wav' });
  t.equal(after.status, 200, 'the ended session gave its call back');
});
