// Post-call analysis (docs/api/analysis.md): summary, data fields, criteria from the scripted model in
// structured mode; stored on the session, shown in the detail, sent in call.analyzed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { startBackend } from '../../native/server.ts';
import { randomSchema } from '../../src/platform.ts';
import { openApiValidator } from '../helpers/openapi.ts';
import { allowWrites, startReceiver } from '../webhooks/helpers.ts';
import { conversation, publishedAgent, settledAnalysis, startAnalysisPlatform, testKey } from './helpers.ts';

const ANALYSIS = {
  summary: { enabled: true, language: 'en' },
  data_fields: [
    { name: 'order_id', type: 'text', description: 'The order the caller asks about' },
    { name: 'age', type: 'number', description: 'Caller age' },
    { name: 'wants_refund', type: 'boolean', description: 'Whether the caller wants a refund' },
    { name: 'plan', type: 'enum', description: 'Subscription plan', enum_options: ['basic', 'pro'] },
    { name: 'email', type: 'text', description: 'Caller email' },
  ],
  criteria: [
    { name: 'issue_resolved', description: 'The agent resolved the issue' },
    { name: 'polite', description: 'The agent was polite' },
  ],
};

t.test('analysis: completed entity on the session and in call.analyzed, after call.ended', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  const receiver = await startReceiver();
  const allow = [`127.0.0.1:${receiver.port}`];
  allowWrites(t, ...allow);
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-analysis-'));
  const app = await startAnalysisPlatform({ dataDir, schema: randomSchema(), key: testKey(), backendAddress: backend.address, allow });
  t.teardown(async () => {
    await app.close();
    await backend.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const agentId = await publishedAgent(app, { analysis: ANALYSIS, webhooks: { post_call: [{ url: `${receiver.url}/hook` }] } });
  const sessionId = await conversation(app, agentId, [
    { role: 'assistant', content: 'Hello! How can I help?' },
    { role: 'user', content: 'My order id is A-17, age: 42, wants refund: yes and plan is Pro.' },
    { role: 'assistant', content: 'Done, your refund is on its way.' },
    { role: 'user', content: 'Thanks, issue resolved: success. Bye.' },
  ]);

  const a = await settledAnalysis(app, sessionId);
  t.equal(a.status, 'completed');
  t.equal(a.summary, '2 user turns. The user said: My order id is A-17, age: 42, wants refund: yes and plan is Pro. / Thanks, issue resolved: success. Bye.');
  t.same(a.data.map((d: any) => [d.name, d.type, d.value]), [
    ['order_id', 'text', 'A-17'],
    ['age', 'number', 42],
    ['wants_refund', 'boolean', true],
    ['plan', 'enum', 'pro'],
    ['email', 'text', null],
  ], 'each field typed; a value the call lacks is null');
  t.match(a.data[4].rationale, /does not mention email/, 'a null value carries a rationale');
  t.same(a.criteria_results.map((c: any) => [c.name, c.result]), [['issue_resolved', 'success'], ['polite', 'unknown']], 'success, or unknown without evidence');
  t.type(a.finished_at, 'string');
  const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);
  t.same(oas.check('GET', '/v1/agent/sessions/{session_id}', 200, (await app.req('GET', `/v1/agent/sessions/${sessionId}`)).body), [], 'the detail matches the OpenAPI document');

  const got = await receiver.waitFor(2);
  const bodies = got.map((r) => JSON.parse(r.body));
  t.same(bodies.map((b) => b.event), ['call.ended', 'call.analyzed'], 'call.ended first, then call.analyzed');
  const analyzed = bodies[1];
  t.equal(analyzed.session.id, sessionId);
  t.equal(analyzed.error, null);
  t.equal(analyzed.finished_at, a.finished_at, 'finished_at matches the detail');
  t.same(analyzed.analysis, { status: 'completed', summary: a.summary, data: a.data, criteria_results: a.criteria_results }, 'the webhook carries the stored analysis');
  t.notOk('transcript' in analyzed && analyzed.transcript, 'no transcript in webhooks');
});

t.test('analysis: skipped at once when disabled or when the caller said nothing (no model call)', async (t) => {
  // No backend listens here: a model call could never succeed, so `skipped` proves none was made.
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-analysis-'));
  const app = await startAnalysisPlatform({ dataDir, schema: randomSchema(), key: testKey(), backendAddress: '127.0.0.1:1' });
  t.teardown(async () => {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const disabled = await publishedAgent(app, { analysis: { summary: { enabled: false }, data_fields: [], criteria: [] } });
  const s1 = await conversation(app, disabled, [{ role: 'user', content: 'Hello there' }]);
  const d1 = await app.req('GET', `/v1/agent/sessions/${s1}`);
  t.same({ ...d1.body.analysis, finished_at: undefined }, { status: 'skipped', summary: null, data: [], criteria_results: [], finished_at: undefined }, 'disabled: skipped, settled with the end');

  const enabled = await publishedAgent(app, { analysis: ANALYSIS });
  const s2 = await conversation(app, enabled, [{ role: 'assistant', content: 'Hello! How can I help?' }]);
  const d2 = await app.req('GET', `/v1/agent/sessions/${s2}`);
  t.equal(d2.body.analysis.status, 'skipped', 'no user message: skipped');
  t.same(d2.body.analysis.data, []);

  // A session nobody joined has no analysis at all.
  const pending = await app.req('POST', '/v1/agent/sessions', { agent_id: enabled });
  await app.req('POST', `/v1/agent/sessions/${pending.body.session_id}/end`);
  const d3 = await app.req('GET', `/v1/agent/sessions/${pending.body.session_id}`);
  t.equal(d3.body.analysis, null, 'never joined: analysis stays null');
});

t.test('analysis: a job cut off by a restart runs on the next node; a backend that stays down settles it as error', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'parley-analysis-'));
  const receiver = await startReceiver();
  const allow = [`127.0.0.1:${receiver.port}`];
  allowWrites(t, ...allow);
  const base = { dataDir, schema: randomSchema(), key: testKey(), allow };
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  t.teardown(async () => {
    await backend.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  // Node 1 has no reachable backend: its attempt is cut off when it stops.
  const first = await startAnalysisPlatform({ ...base, backendAddress: '127.0.0.1:1', env: { PARLEY_ANALYSIS_BACKOFF_MS: '60000' } });
  let sessionId: string;
  let agentId: string;
  try {
    agentId = await publishedAgent(first, { analysis: ANALYSIS, webhooks: { post_call: [{ url: `${receiver.url}/hook` }] } });
    sessionId = await conversation(first, agentId, [{ role: 'user', content: 'age: 30' }]);
    for (;;) {
      const [row] = await first.db.sql<{ analysis_status: string }[]>`select analysis_status from sessions where id = ${sessionId}`;
      if (row!.analysis_status === 'running') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    // `call.ended` is delivered at least once: a node stopped between the receiver's answer and
    // its delivery row would leave the next node to send it again. This test is about the
    // analysis job, so node 1 stops only once its delivery is recorded.
    for (;;) {
      const rows = await first.db.sql<{ status: string }[]>`select status from webhook_deliveries where session_id = ${sessionId} and event = 'call.ended'`;
      if (rows[0]?.status === 'delivered') break;
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await first.close();
  }

  const second = await startAnalysisPlatform({ ...base, backendAddress: backend.address });
  try {
    const a = await settledAnalysis(second, sessionId);
    t.equal(a.status, 'completed', 'the next node runs the queued analysis');
    t.equal(a.data.find((d: any) => d.name === 'age').value, 30);
    const got = await receiver.waitFor(2);
    t.same(got.map((r) => JSON.parse(r.body).event), ['call.ended', 'call.analyzed']);
  } finally {
    await second.close();
  }

  // Backend down for good: 3 attempts, then `error` with empty results, and call.analyzed says so.
  const third = await startAnalysisPlatform({ ...base, backendAddress: '127.0.0.1:1', env: { PARLEY_ANALYSIS_BACKOFF_MS: '0' } });
  t.teardown(() => third.close());
  const failed = await conversation(third, agentId!, [{ role: 'user', content: 'age: 31' }]);
  const a = await settledAnalysis(third, failed);
  t.same({ ...a, finished_at: undefined }, { status: 'error', summary: null, data: [], criteria_results: [], finished_at: undefined });
  const [row] = await third.db.sql<{ analysis_attempts: number }[]>`select analysis_attempts from sessions where id = ${failed}`;
  t.equal(row!.analysis_attempts, 3, '3 attempts in all');
  let analyzed: any;
  while (!analyzed) {
    analyzed = receiver.requests.map((r) => JSON.parse(r.body)).find((b) => b.session.id === failed && b.event === 'call.analyzed');
    await new Promise((r) => setTimeout(r, 50));
  }
  t.equal(analyzed.analysis.status, 'error');
  t.equal(analyzed.error, 'Analysis failed');
});
