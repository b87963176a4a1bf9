// A node whose caller audio waits to reach its inference backend refuses new sessions
// (docs/inference.md, "Send backlog"; PARLEY_MAX_INFERENCE_BACKLOG_MS): 503 with the wait and
// `Retry-After`, what `/metrics` shows meanwhile, and creations admitted again once the backend
// reads. The stalling backend stands in for a backend (or a connection) that falls behind: it
// takes the shared recognition call and reads nothing until released.
import { Writable } from 'node:stream';
import t from 'tap';
import { createLogger } from '../../src/log.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { createSession, sleep } from '../e2e/session-helpers.ts';
import { startTestServer } from '../helpers/server.ts';
import { caller } from '../scale/helpers.ts';
import { ClientError, createPublicSession } from '../../src/client/index.ts';
import { startStallingBackend } from '../fixtures/stalling-backend.ts';

const metric = (text: string, name: string, call: string) => Number(new RegExp(`^${name}\\{call="${call}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

t.test('caller audio waiting past the mark: new sessions 503 until it is sent', async (t) => {
  const stalling = await startStallingBackend();
  const lines: any[] = [];
  const destination = new Writable({ write(chunk, _e, cb) { for (const l of String(chunk).split('\n')) if (l) lines.push(JSON.parse(l)); cb(); } });
  const app = await startTestServer({ embedded: true, config: { backendAddress: stalling.address, maxInferenceBacklogMs: 200 }, log: createLogger({ level: 'info', destination }) });
  t.teardown(async () => {
    await app.close();
    await stalling.close();
  });
  // The first stream of a client goes on a call of its own while it asks the backend what it
  // offers; ask first so the session's stream takes the shared call.
  t.equal(await app.inference.backendFor('transcription').backend.multiplexKnown(), true, 'the backend lists TranscribeStreams');
  const ORIGIN = 'https://shop.example.com';
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } }, public_enabled: true, allowed_origins: [ORIGIN] });
  const fromPage: typeof fetch = (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), Origin: ORIGIN } });
  const s = await createSession(app, agent);
  const c = caller(`${s.websocket_url}?token=${s.token}`);
  t.teardown(() => c.ws.close());
  t.ok(await c.waitFor((m) => m.type === 'session.started'), 'the session started');
  t.equal((await app.req('POST', '/v1/agent/sessions', { agent_id: agent })).status, 200, 'a second session is admitted while nothing waits');

  // 2 s of caller audio at once (the most a caller may send ahead of real time: the rest would be
  // dropped), then a 20 ms frame every 20 ms: past the backend's 64 KB window, and more waiting
  // with every frame. A burst alone ends a few KB past the window, too close to count on.
  for (let i = 0; i < 100; i++) c.ws.send(Buffer.alloc(640));
  const talking = setInterval(() => c.ws.send(Buffer.alloc(640)), 20);
  t.teardown(() => clearInterval(talking));
  let refused: Awaited<ReturnType<typeof app.req>> | undefined;
  for (let i = 0; i < 100 && !refused; i++) {
    await sleep(50);
    const r = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
    if (r.status !== 200) refused = r;
  }
  if (!refused) return void t.fail('a creation was refused while audio waited');
  t.equal(refused.status, 503, 'refused with 503');
  t.match(refused.body?.message, /^This node is behind: Caller audio has waited \d+\.\d s to reach its inference backend\. Try again shortly$/, 'saying what waits and for how long');
  t.equal(refused.headers.get('retry-after'), '1', 'with Retry-After');
  // The client SDK: a visitor's page gets the refusal with when to try again.
  const visitor = await createPublicSession({ baseUrl: app.url, agentId: agent, fetch: fromPage }).then(() => null, (e) => e);
  t.ok(visitor instanceof ClientError, 'a public session from a page is refused too');
  t.match(visitor, { code: 'session_refused', status: 503, message: /^Session refused \(503\): This node is behind: Caller audio has waited/, retryAfterMs: 1000 }, 'as session_refused 503 with retryAfterMs');
  const during = (await app.req('GET', '/metrics')).text;
  t.ok(metric(during, 'parley_inference_send_backlog_bytes', 'recognition') > 0, `/metrics: the bytes waiting (${metric(during, 'parley_inference_send_backlog_bytes', 'recognition')})`);
  t.ok(metric(during, 'parley_inference_send_backlog_seconds', 'recognition') > 0.2, `/metrics: the oldest wait past the mark (${metric(during, 'parley_inference_send_backlog_seconds', 'recognition')} s)`);
  t.equal(metric(during, 'parley_inference_send_backlog_seconds', 'synthesis'), 0, '/metrics: nothing waits on synthesis');
  t.equal(c.messages.filter((m) => m.type === 'session.ended').length, 0, 'the live session goes on');
  t.match(lines.filter((l) => /inference backlog/.test(l.msg)), [{ level: 40, msg: 'inference backlog past its mark: new sessions refused (503)', call: 'recognition', maxMs: 200 }], 'one warning as the node starts refusing');

  clearInterval(talking);
  stalling.release();
  let admitted = 0;
  for (let i = 0; i < 100 && admitted !== 200; i++) {
    await sleep(50);
    admitted = (await app.req('POST', '/v1/agent/sessions', { agent_id: agent })).status;
  }
  t.equal(admitted, 200, 'admitted again once the backend reads');
  t.same(lines.filter((l) => /inference backlog/.test(l.msg)).map((l) => l.msg), ['inference backlog past its mark: new sessions refused (503)', 'inference backlog back under its mark: new sessions admitted'], 'and one line as it admits again');
  const after = (await app.req('GET', '/metrics')).text;
  t.equal(metric(after, 'parley_inference_send_backlog_bytes', 'recognition'), 0, '/metrics: nothing waits');
});
