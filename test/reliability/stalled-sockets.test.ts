/**
 * Stalled readers on the sockets `slow-clients.test.ts` does not cover (docs/reliability.md,
 * "Slow clients"): the OpenAI-style realtime socket, a session socket whose JSON backs up while
 * no audio flows, and a sandbox phone. Each client pauses its socket (ws `pause()`: it sends on,
 * reads nothing); the platform must close it 4008 once what waits for it passes the route's
 * mark and nothing is taken for `PARLEY_WS_STALL_TIMEOUT_MS` (0.3 s here), cancel its work and
 * free what it held, and go on serving others. The kernel's socket buffers (a few MB on Linux
 * loopback) fill first, so each client is made to owe more than that; nothing here is timed.
 */
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { createLogger } from '../../src/log.ts';
import type { ClientLink } from '../../src/sessions/runtime.ts';
import { startTestServer } from '../helpers/server.ts';
import { useTestClock } from '../e2e/session-helpers.ts';
import { boundAgent, sessionOf as callOf } from '../telephony/calls-helpers.ts';

const warnings: { msg: string; [k: string]: unknown }[] = [];
const app = await startTestServer({
  backend: 'synthetic',
  log: createLogger({ level: 'warn', destination: { write: (s: string) => void warnings.push(JSON.parse(s)) } }),
  // One speech slot per team: a socket that holds it shuts every other synthesis out (429).
  config: { wsStallTimeoutMs: 300, speechConcurrency: 1 },
});
t.teardown(() => app.close());
const wsBase = app.url.replace(/^http/, 'ws');
const STALLED = { code: 4008, reason: 'Client not reading: nothing taken for 0.3 s' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * What a stalled client finds when it reads again: the close frame waits behind everything it
 * did not read, and uWS ends a connection whose close frame it cannot send within its own
 * timeout, so the client reads either `4008` or an end without a frame (`1006`;
 * docs/reliability.md "Slow clients"). That the node closed it for the stall is the warning.
 */
function foundClosed(t: Test, c: { code: number; reason: string }, what: string): void {
  if (c.code === 1006) t.pass(`${what}: the connection ended without a close frame (1006)`);
  else t.same(c, STALLED, `${what}: 4008`);
}

interface Sock {
  sock: WebSocket;
  texts: string[];
  binary: number;
  closed: Promise<{ code: number; reason: string }>;
}

function open(url: string, headers: Record<string, string> = {}): Promise<Sock> {
  return new Promise((resolve, reject) => {
    const sock = new WebSocket(url, { headers, maxPayload: 64 * 1024 * 1024 });
    const s: Sock = { sock, texts: [], binary: 0, closed: new Promise((r) => sock.on('close', (code, reason) => r({ code, reason: reason.toString() }))) };
    sock.on('message', (d, binary) => {
      if (binary) s.binary++;
      else s.texts.push(d.toString());
    });
    sock.on('error', () => {});
    sock.once('open', () => resolve(s));
    sock.once('unexpected-response', (_q, res) => {
      res.resume();
      reject(new Error(`upgrade refused: ${res.statusCode}`));
    });
  });
}

/** Waits (bounded by tries, not by a time) until `pred` holds. */
async function until(pred: () => boolean | Promise<boolean>, what: string, tries = 1200): Promise<void> {
  for (let i = 0; !(await pred()); i++) {
    if (i >= tries) throw new Error(`never happened: ${what}`);
    await sleep(50);
  }
}

const warned = (msg: string, extra: (w: Record<string, unknown>) => boolean = () => true) => warnings.some((w) => w.msg === msg && extra(w));

t.test('a realtime client that stops reading is closed 4008; its response is cancelled and its slot freed', async (t) => {
  const stalled = await open(`${wsBase}/compat/v1/realtime?model=gpt-realtime`, app.auth);
  // Far more audio than the kernel's buffers and the 1 MiB mark hold (base64 PCM at 24 kHz).
  stalled.sock.send(JSON.stringify({ type: 'response.create', response: { instructions: 'A long answer the client never reads. '.repeat(200) } }));
  // The client stops reading once its response's audio flows, so that the response holds the
  // team's only speech slot before the first synthesis below asks for it (sent earlier, that
  // request could reach the node first, take the slot and leave the response refused).
  await until(() => stalled.texts.some((x) => JSON.parse(x).type === 'response.output_audio.delta'), 'the response audio began');
  stalled.sock.pause();
  // While the response holds the team's only speech slot, synthesis is refused; once the
  // stalled socket is closed the slot is free and another client is served.
  const refused = new Set<number>();
  await until(async () => {
    const r = await app.req('POST', '/v1/tts', { text: 'Still serving.', format: 'wav' });
    if (r.status !== 200) refused.add(r.status);
    return r.status === 200;
  }, 'a synthesis served');
  t.ok([...refused].every((s) => s === 429), `synthesis refused only for the held slot (${[...refused]})`);
  t.ok(warned('realtime client not reading: closed 4008'), 'the node closed the stalled reader');
  if (!warned('realtime client not reading: closed 4008')) return void stalled.sock.terminate();
  stalled.sock.resume();
  const c = await stalled.closed;
  foundClosed(t, c, 'reading again, the client finds the close');
  const types = stalled.texts.map((x) => JSON.parse(x).type);
  t.equal(types[0], 'session.created');
  t.ok(types.includes('response.output_audio.delta'), 'it had begun to receive audio');
  t.notOk(types.includes('response.done'), 'its response never ran to the end');
  // Another realtime client speaks a response to its end.
  const other = await open(`${wsBase}/compat/v1/realtime?model=gpt-realtime`, app.auth);
  other.sock.send(JSON.stringify({ type: 'response.create', response: { instructions: 'Short.' } }));
  await until(() => other.texts.some((x) => JSON.parse(x).type === 'response.done'), 'the other response done');
  t.match(JSON.parse(other.texts.find((x) => JSON.parse(x).type === 'response.done')!), { response: { status: 'completed' } });
  other.sock.close(1000);
});

t.test('a session caller whose JSON backs up while no audio flows is closed 4008 and resumes', async (t) => {
  // A session sends JSON alone while its agent is silent (transcripts, events, text-only
  // replies), but the few MB the kernel's buffers take would need minutes of real turns (each
  // turn's model call carries the whole history). So the session's own client link, the one
  // the transport hands it, sends ~40 KB transcript messages straight away: the socket, uWS's
  // buffering and the stall close are the node's; no audio is ever sent.
  let link: ClientLink | undefined;
  const runtime = app.runtime;
  const connect = runtime.connect;
  runtime.connect = async function (token: string) {
    const live = await connect.call(this, token);
    const attach = live.attach;
    live.attach = (l) => {
      link = l;
      attach.call(live, l);
    };
    return live;
  };
  t.teardown(() => void (runtime.connect = connect));
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'json only', config: { prompt: { first_message_mode: 'off' } } })).body;
  t.equal((await app.req('POST', `/v1/agent/agents/${agent.agent_id}/publish`)).status, 200);
  const created = (await app.req('POST', '/v1/agent/sessions', { agent_id: agent.agent_id })).body;
  const url = created.websocket_url.replace('localhost', '127.0.0.1');
  const stalled = await open(`${url}?token=${created.token}`);
  await until(() => stalled.texts.length >= 2, 'the greeting');
  stalled.sock.pause();
  runtime.connect = connect;
  const closedForStall = () => warned('websocket client not reading: closed 4008, resume allowed', (w) => w.sessionId === created.session_id);
  const text = 'x'.repeat(40_000);
  let sent = 0;
  // At most 64 MB: far beyond the kernel's buffers, and finite if they were larger still.
  await until(() => {
    for (let i = 0; i < 20 && !closedForStall() && sent < 1600; i++, sent++) link!.message({ topic: 'lk.transcription', role: 'agent', segmentId: `agent-${sent}`, text, final: true });
    return closedForStall() || sent >= 1600;
  }, 'the stalled caller closed');
  t.ok(closedForStall(), `the node closed the caller after ${sent} messages (${Math.round((sent * 40) / 1000)} MB)`);
  stalled.sock.resume();
  const c = await stalled.closed;
  foundClosed(t, c, 'reading again, the caller finds the close after its queued frames');
  t.equal(stalled.binary, 0, 'no audio was ever sent: the JSON alone stalled it');
  const hello = JSON.parse(stalled.texts[0]!);
  t.match(hello, { topic: 'session', type: 'session.started', sessionId: created.session_id });
  // A drop, not a hang-up: the session takes the caller back, and talks.
  const again = await open(`${url}?session_id=${created.session_id}&resume=${encodeURIComponent(hello.resume)}`);
  await until(() => again.texts.length > 0, 'the resumed greeting');
  t.match(JSON.parse(again.texts[0]!), { topic: 'session', type: 'session.started', resumed: true });
  again.sock.send(JSON.stringify({ type: 'user.message', text: 'say "still here"', audio: false }));
  await until(() => again.texts.some((x) => JSON.parse(x).text === 'still here' && JSON.parse(x).final), 'the answer after the resume');
  again.sock.send(JSON.stringify({ type: 'user.hangup' }));
  t.equal((await again.closed).code, 1000);
});

t.test('a sandbox phone that stops reading is closed 4008 and its call hung up', async (t) => {
  // The phone hears ~10 min of opener at 8 kHz (16 KB/s), played on the test clock faster than
  // real time, until the kernel's buffers and the 64 KiB mark are full and the node closes it.
  const clock = useTestClock(t, app);
  const opener = 'This is a very long opening message that the phone will never read. '.repeat(140);
  const { number } = await boundAgent(app, { prompt: { first_message_mode: 'fixed', first_message: opener } }, '415', 7);
  const params = new URLSearchParams({ dial: number, from: '+16505550177' });
  const stalled = await open(`${wsBase}/v1/telephony/sandbox/calls?${params}`, app.auth);
  await until(() => stalled.texts.some((x) => JSON.parse(x).type === 'call.started'), 'the call started');
  stalled.sock.pause();
  const closedForStall = () => warned('sandbox phone not reading: closed 4008, call hung up');
  const sessionOf = () => callOf(app, '+16505550177').catch(() => null);
  let playedAt: number | null = null;
  // Bounded by ticks of the test clock: three times the opener's ~10 min. A run that reaches the
  // bound fails below with what the session had become, rather than hanging the file.
  const maxTicks = 9000;
  let ticks = 0;
  for (let i = 1; !closedForStall() && i <= maxTicks; i++, ticks++) {
    await clock.tick(200, 20);
    if (playedAt === null && i % 25 === 0) {
      const s = await sessionOf();
      if (s && (s.status !== 'active' || s.items.some((x: { type: string; role?: string }) => x.type === 'message' && x.role === 'assistant'))) playedAt = performance.now();
    }
    // The opener is all played and the stall clock has had ten times its time: no close came.
    if (playedAt !== null && performance.now() - playedAt > 10 * app.config.wsStallTimeoutMs) break;
  }
  if (!closedForStall()) {
    const s = await sessionOf();
    t.fail('the node closed the phone that took nothing', {
      ticks,
      opener_played: playedAt !== null,
      session: s && { status: s.status, items: s.items.map((x: { type: string; role?: string }) => `${x.type}:${x.role ?? ''}`) },
      received: { binary: stalled.binary, texts: stalled.texts.length },
    });
    return void stalled.sock.terminate();
  }
  t.pass(`the node closed the phone that took nothing (${ticks} ticks)`);
  stalled.sock.resume();
  foundClosed(t, await stalled.closed, 'reading again, the phone finds the close');
  let s: Record<string, any> | null = null;
  await until(async () => (s = await sessionOf()) !== null && s.status !== 'active', 'the call ended');
  t.match(s, { status: 'completed', ended_reason: 'user_hangup' }, 'the stalled phone hung up its call');
  t.equal((await app.req('GET', '/health')).status, 200);
});
