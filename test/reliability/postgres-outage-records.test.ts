/**
 * What `bench/chaos.ts --fault postgres` found under load, reproduced on a few sessions
 * (docs/reliability.md, "Faults"): session records after a Postgres cut hold every turn the
 * callers heard, interrupted replies and replies cut by a hang-up included; and a token refused
 * `4503` during the outage connects once the store is back, also when the store had taken the
 * session's activation and only its answer was lost (the connection dropped just after the
 * commit); and items whose write committed with its answer lost are recorded once.
 */
import t from 'tap';
import { proxyInFront } from '../fixtures/tcp-proxy.ts';
import { startTestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { connect, createSession, rawSocket, sleep, type Caller } from '../e2e/session-helpers.ts';

const DATABASE_URL = process.env.DATABASE_URL;
if (!DATABASE_URL) {
  t.plan(0, 'needs DATABASE_URL: the outage is a proxy in front of a real Postgres');
  process.exit(0);
}

const { proxy, url: viaProxy } = await proxyInFront(DATABASE_URL, 5432);
const app = await startTestServer({ backend: 'synthetic', config: { databaseUrl: viaProxy } });
t.teardown(async () => {
  await proxy.restore();
  await app.close();
  await proxy.close();
});

/** Polls until `pred` holds; fails the test after `ms` (a bound, not a timing assertion). */
async function until(what: string, pred: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const row = async (id: string) => (await app.db.sql<{ status: string; node_id: string | null }[]>`select status, node_id from sessions where id = ${id}`)[0];

t.test('a connect whose activation the store took, its answer lost: 4503, and the same token connects after', async (t) => {
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const session = await createSession(app, agent);
  const url = `${session.websocket_url}?token=${encodeURIComponent(session.token)}`;
  // The activation (its bound values: the session id and this node's id) reaches Postgres and
  // commits; the connection is reset before its answer reaches the node.
  const lost = proxy.loseReplyTo(session.session_id, app.runtime.nodeId);
  const first = rawSocket(url);
  await lost;
  t.match(await first.closed, { code: 4503, reason: /database is unavailable/ }, 'told to try again');

  // The client tries again as told (a few times: `4503` again while the node sets things right).
  let retried = rawSocket(url);
  const startedOrClosed = async (s: typeof retried) => Boolean(await Promise.race([s.started(), s.closed.then(() => null)]));
  for (let i = 0; i < 10 && !(await startedOrClosed(retried)); i++) {
    const closed = await Promise.race([retried.closed, sleep(5000).then(() => null)]);
    if (closed?.code !== 4503) {
      t.fail(`the same token starts the session: closed ${JSON.stringify(closed)}; the session is ${JSON.stringify(await row(session.session_id))}`);
      return;
    }
    await sleep(250);
    retried = rawSocket(url);
  }
  t.ok(retried.messages.some((m) => m.type === 'session.started'), 'the same token starts the session');
  retried.ws.send(JSON.stringify({ type: 'user.message', text: 'hello', audio: false }));
  for (let i = 0; i < 300 && !retried.messages.some((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final); i++) await sleep(20);
  retried.ws.send(JSON.stringify({ type: 'user.hangup' }));
  await retried.closed;
  await until('the session to end', async () => (await row(session.session_id))?.status === 'completed');
  const rec = (await app.req('GET', `/v1/agent/sessions/${session.session_id}`)).body;
  t.equal(rec.status, 'completed');
  t.same(rec.items.filter((i: any) => i.type === 'message').map((i: any) => i.content), ['hello', 'You said: hello'], 'its record');
  t.equal((await rawSocket(url).closed).code, 4401, 'and the token is spent');
});

t.test('items whose write the store took, its answer lost, are recorded once', async (t) => {
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const session = await createSession(app, agent);
  const s = rawSocket(`${session.websocket_url}?token=${encodeURIComponent(session.token)}`);
  t.ok(await s.started(), 'the session started');
  // The insert of the caller's message (its bound values: the session id and the items' JSON)
  // commits; the connection is reset before the answer reaches the node, which writes again.
  const lost = proxy.loseReplyTo(session.session_id, 'lost-answer-probe');
  s.ws.send(JSON.stringify({ type: 'user.message', text: 'lost-answer-probe', audio: false }));
  await lost;
  for (let i = 0; i < 500 && !s.messages.some((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final); i++) await sleep(20);
  s.ws.send(JSON.stringify({ type: 'user.hangup' }));
  await s.closed;
  await until('the session to end', async () => (await row(session.session_id))?.status === 'completed');
  const rec = (await app.req('GET', `/v1/agent/sessions/${session.session_id}`)).body;
  t.same(rec.items.filter((i: any) => i.type === 'message').map((i: any) => i.content), ['lost-answer-probe', 'You said: lost-answer-probe'], 'each turn once, in order');
});

t.test('a token refused so and never presented again leaves its session pending, not active on no one', async (t) => {
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const session = await createSession(app, agent);
  const lost = proxy.loseReplyTo(session.session_id, app.runtime.nodeId);
  const first = rawSocket(`${session.websocket_url}?token=${encodeURIComponent(session.token)}`);
  await lost;
  t.equal((await first.closed).code, 4503);
  await until('the session to be pending again', async () => (await row(session.session_id))?.status === 'pending');
  t.same(await row(session.session_id), { status: 'pending', node_id: null }, 'pending, as nobody joined it');
});

t.test('records after a cut hold every turn the callers heard: interrupted replies and hang-ups mid-reply too', async (t) => {
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const sessions = await Promise.all([0, 1, 2, 3].map(() => createSession(app, agent)));
  const callers: Caller[] = await Promise.all(sessions.map((s) => connect(s)));
  const sent: string[][] = callers.map(() => []);
  const agentFinals = (c: Caller) => c.transcripts.filter((x) => x.role === 'agent' && x.final);
  const say = (i: number, text: string) => {
    sent[i]!.push(text);
    callers[i]!.convo.sendUserMessage(text);
  };
  const ask = async (i: number, text: string) => {
    const c = callers[i]!;
    const n = agentFinals(c).length;
    say(i, text);
    await c.waitFor(() => agentFinals(c).slice(n).some((x) => x.text.startsWith('You said: ')), 15_000, `the reply to ${text}`);
  };
  /** A second message once the caller has heard a word of the reply to the first: the first reply is cut short. */
  const interrupt = async (i: number, text: string) => {
    const c = callers[i]!;
    const n = c.transcripts.length;
    say(i, `${text}, a question long enough for its echo to be cut off before its end`);
    await c.waitFor(() => c.transcripts.slice(n).some((x) => x.role === 'agent' && !x.final && x.text), 15_000, 'a word of the reply');
    await ask(i, `${text} again`);
  };
  const talk = async (i: number, phase: string) => {
    await ask(i, `${phase} ${i}`);
    await interrupt(i, `${phase} ${i} cut`);
  };
  await Promise.all(callers.map((_, i) => talk(i, 'before')));
  await proxy.cut();
  t.teardown(() => proxy.restore());
  await Promise.all(callers.map((_, i) => talk(i, 'during')));
  // Two callers hang up while the agent is speaking, one while it thinks, one after its reply.
  await Promise.all(callers.map(async (c, i) => {
    const n = c.states.length;
    if (i < 3) say(i, `bye ${i}, said while a long answer is being read out to the caller`);
    if (i < 2) await c.waitFor(() => c.states.slice(n).includes('speaking'), 15_000, 'the agent to speak');
    await c.convo.hangup();
  }));
  await sleep(1000);
  await proxy.restore();

  for (const [i, s] of sessions.entries()) {
    const c = callers[i]!;
    let rec: any;
    await until(`the record of caller ${i}`, async () => {
      const r = await app.req('GET', `/v1/agent/sessions/${s.session_id}`);
      rec = r.body;
      return r.status === 200 && rec.status === 'completed';
    });
    const stored = (role: string) => rec.items.filter((x: any) => x.type === 'message' && x.role === role).map((x: any) => x.content);
    t.same(stored('user'), sent[i], `caller ${i}: every message the caller sent is in the record, in order`);
    // What the caller was told of each reply, in order; an agent final with no text says nothing was heard of that reply.
    const heard = agentFinals(c).map((x) => x.text).filter(Boolean);
    t.ok(heard.some((x) => !x.startsWith('You said: ')) || heard.some((x, k) => k > 0 && x.length < 20), `caller ${i}: some replies were cut short`);
    t.same(stored('assistant'), heard, `caller ${i}: every reply heard is in the record, as heard, in order`);
  }
});
