/**
 * Slow and stalled clients (docs/reliability.md, "Slow clients"): sockets that never send the
 * first message they owe are closed 4408; a client that stops reading is closed 4008 and gives
 * back what it held; a request body that never completes is answered 408 and its connection
 * closed. The deadlines are shortened through the configuration; nothing here times them.
 */
import net from 'node:net';
import t from 'tap';
import { pack, unpack } from 'msgpackr';
import WebSocket from 'ws';
import { createLogger } from '../../src/log.ts';
import { startTestServer } from '../helpers/server.ts';
import { useTestClock } from '../e2e/session-helpers.ts';

const warnings: { msg: string; sessionId?: string }[] = [];
const app = await startTestServer({
  backend: 'synthetic',
  log: createLogger({ level: 'warn', destination: { write: (s: string) => void warnings.push(JSON.parse(s)) } }),
  // One speech slot per team: a socket that holds it shuts every other one out (429).
  config: { wsStartTimeoutMs: 300, wsStallTimeoutMs: 300, bodyTimeoutMs: 300, speechConcurrency: 1 },
});
t.teardown(() => app.close());
const ws = app.url.replace(/^http/, 'ws');
const streamInput = `${ws}/compat/elevenlabs/v1/text-to-speech/default/stream-input`;
const live = `${ws}/v1/tts/live`;

interface Sock {
  sock: WebSocket;
  frames: Buffer[];
  /** Text frames only. */
  texts: string[];
  closed: Promise<{ code: number; reason: string }>;
}

function open(url: string, headers: Record<string, string> = {}): Promise<Sock> {
  return new Promise((resolve, reject) => {
    const sock = new WebSocket(url, { headers });
    const frames: Buffer[] = [];
    const texts: string[] = [];
    sock.on('message', (d, binary) => {
      frames.push(d as Buffer);
      if (!binary) texts.push(d.toString());
    });
    const closed = new Promise<{ code: number; reason: string }>((r) => sock.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    sock.on('error', () => {});
    sock.once('open', () => resolve({ sock, frames, texts, closed }));
    sock.once('unexpected-response', (_q, res) => {
      res.resume();
      reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode }));
    });
  });
}

/** Opens a live synthesis socket once the team's slot is free (429 until then; bounded tries). */
async function openLiveWhenFree(tries = 600): Promise<Sock> {
  for (let i = 0; ; i++) {
    try {
      return await open(live, app.auth);
    } catch (err) {
      if ((err as { status?: number }).status !== 429 || i >= tries) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

/** Live synthesis of a short text on a fresh socket: the audio bytes and the close. */
async function speaks(): Promise<{ audio: number; code: number }> {
  const s = await openLiveWhenFree();
  s.sock.send(pack({ event: 'start', request: { text: 'Still serving.', format: 'pcm', sample_rate: 16000 } }));
  s.sock.send(pack({ event: 'stop' }));
  const c = await s.closed;
  const audio = s.frames.map((f) => unpack(f)).filter((f) => f.event === 'audio').reduce((n, f) => n + f.audio.length, 0);
  return { audio, code: c.code };
}

t.test('sockets that never send their first message are closed 4408; others are served', async (t) => {
  // 100 upgraded, unauthenticated stream-input sockets (the key may come in the first message)
  // and one authenticated live synthesis socket that never sends `start` (it holds the slot).
  const idle = await Promise.all(Array.from({ length: 100 }, () => open(streamInput)));
  const idleLive = await open(live, app.auth);

  const codes = await Promise.all([...idle, idleLive].map((s) => s.closed));
  t.same(new Set(codes.map((c) => `${c.code} ${c.reason}`)), new Set(['4408 No first message within 0.3 s']));

  // A keyless socket that sends its key in its first message in time is served.
  const keyed = await open(streamInput);
  keyed.sock.send(JSON.stringify({ text: ' ', xi_api_key: app.key }));
  keyed.sock.send(JSON.stringify({ text: 'Hello there. ', flush: true }));
  keyed.sock.send(JSON.stringify({ text: '' }));
  const k = await keyed.closed;
  t.equal(k.code, 1000, 'the keyed socket ends normally');
  t.ok(keyed.frames.some((f) => /"audio":"[A-Za-z0-9+/]/.test(f.toString())), 'and got audio');
  // The idle live socket gave its slot back: the team's one slot serves a new socket.
  const s = await speaks();
  t.equal(s.code, 1000);
  t.ok(s.audio > 0, 'a new live socket speaks');
  t.equal((await app.req('GET', '/health')).status, 200);
});

t.test('a live synthesis client that stops reading is closed 4008 and frees its slot', async (t) => {
  const stalled = await open(live, app.auth);
  // More audio than the kernel's socket buffers and the platform's 1 MiB high-water mark hold.
  (stalled.sock as unknown as { _socket: net.Socket })._socket.pause();
  stalled.sock.send(pack({ event: 'start', request: { text: 'A long sentence the client never reads. '.repeat(60), format: 'pcm', sample_rate: 48000 } }));
  stalled.sock.send(pack({ event: 'stop' }));
  // While it stalls the team's only slot is taken (429); once it is closed 4008 a new socket speaks.
  const s = await speaks();
  t.equal(s.code, 1000);
  t.ok(s.audio > 0, 'another socket of the team is served');
  (stalled.sock as unknown as { _socket: net.Socket })._socket.resume();
  const c = await stalled.closed;
  t.ok(c.code === 4008 || c.code === 1006, `the stalled socket ends (${c.code} ${c.reason})`);
  const finished = stalled.frames.map((f) => unpack(f)).some((f) => f.event === 'finish' && f.reason === 'stop');
  t.notOk(finished, 'its synthesis did not run to the end');
});

t.test('a session caller that stops reading: the node keeps serving other callers', async (t) => {
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'slow reader' })).body;
  await app.req('POST', `/v1/agent/agents/${agent.agent_id}/publish`);
  const connect = async () => {
    const s = (await app.req('POST', '/v1/agent/sessions', { agent_id: agent.agent_id })).body;
    return open(`${s.websocket_url.replace('localhost', '127.0.0.1')}?token=${s.token}`);
  };
  // The stalled caller reads nothing and keeps asking: its agent keeps speaking to it.
  const stalled = await connect();
  const sock = (stalled.sock as unknown as { _socket: net.Socket })._socket;
  sock.pause();
  for (let i = 0; i < 5; i++) stalled.sock.send(JSON.stringify({ type: 'user.message', text: 'Tell me everything you know.' }));
  // Another caller talks meanwhile and is answered.
  const other = await connect();
  const answered = new Promise<string>((resolve) => {
    let asked = false;
    other.sock.on('message', (d, binary) => {
      if (binary) return;
      const m = JSON.parse(d.toString());
      if (m.state === 'idle' && !asked) {
        asked = true;
        other.sock.send(JSON.stringify({ type: 'user.message', text: 'hello there', audio: false }));
      }
      if (m.topic === 'lk.transcription' && m.role === 'agent' && m.final) resolve(m.text);
    });
  });
  t.ok(await answered, 'the other caller hears its answer');
  other.sock.close(1000);
  // The stalled caller, reading again, gets its frames from the start, in order.
  sock.resume();
  while (stalled.texts.length < 2) await new Promise((r) => setTimeout(r, 50));
  t.match(JSON.parse(stalled.texts[0]!), { topic: 'session', type: 'session.started' });
  stalled.sock.close(1000);
  t.equal((await app.req('GET', '/health')).status, 200);
});

t.test('a session caller that stops reading is closed 4008 and resumes its session', async (t) => {
  // The node sees a stalled reader only once the kernel's buffers are full: the server's send
  // buffer (about 4 MB on Linux loopback, `net.ipv4.tcp_wmem`) and the client's receive buffer
  // take agent audio first; then uWS buffers it, and past 64 KiB the audio is dropped and the
  // stall clock (PARLEY_WS_STALL_TIMEOUT_MS, 0.3 s of real time here) starts. About 130 s of
  // speech at 32 KB/s, so the opener is long (~10 min) and played on the test clock, faster
  // than real time. How fast depends on the machine (the playout pulls synthesis over gRPC;
  // test time that passes before a chunk arrives carries no audio), so the wait is on what
  // happens, not on a number of ticks: until the node closes the caller, or the opener has
  // all been played (it is in the record) and the stall clock has had its time since.
  const clock = useTestClock(t, app);
  const opener = 'This is a very long opening message that the caller will never read. '.repeat(140);
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'long opener', config: { prompt: { first_message_mode: 'fixed', first_message: opener } } })).body;
  t.equal((await app.req('POST', `/v1/agent/agents/${agent.agent_id}/publish`)).status, 200);
  const created = (await app.req('POST', '/v1/agent/sessions', { agent_id: agent.agent_id })).body;
  const url = created.websocket_url.replace('localhost', '127.0.0.1');
  const stalled = await open(`${url}?token=${created.token}`);
  // ws's own pause: a pause of the raw socket can be undone by ws when its parser drains.
  stalled.sock.pause();
  const closedForStall = () => warnings.some((w) => w.msg.startsWith('websocket client not reading') && w.sessionId === created.session_id);
  const openerPlayed = async () => {
    const r = (await app.req('GET', `/v1/agent/sessions/${created.session_id}`)).body;
    return r.status !== 'active' || r.items.some((i: { type: string; role?: string }) => i.type === 'message' && i.role === 'assistant');
  };
  let playedAt: number | null = null;
  for (let i = 1; !closedForStall(); i++) {
    await clock.tick(200, 20);
    if (playedAt === null && i % 25 === 0 && (await openerPlayed())) playedAt = performance.now();
    // The stall clock, started at the first drop, has run out by now: no drop came.
    if (playedAt !== null && performance.now() - playedAt > 10 * app.config.wsStallTimeoutMs) break;
  }
  t.ok(closedForStall(), 'the node closed the caller that took nothing (else: the kernel held the whole opener; see net.ipv4.tcp_wmem)');
  if (!closedForStall()) {
    stalled.sock.terminate();
    return;
  }
  // The caller reads again: what was queued for it, then the close.
  stalled.sock.resume();
  const c = await stalled.closed;
  t.same(c, { code: 4008, reason: 'Client not reading: nothing taken for 0.3 s' });
  const hello = JSON.parse(stalled.texts[0]!);
  t.match(hello, { topic: 'session', type: 'session.started', sessionId: created.session_id, resumed: false });

  // A drop, not a hang-up: the same session takes the caller back with its resume secret.
  const again = await open(`${url}?session_id=${created.session_id}&resume=${encodeURIComponent(hello.resume)}`);
  while (again.texts.length < 1) await new Promise((r) => setTimeout(r, 20));
  t.match(JSON.parse(again.texts[0]!), { topic: 'session', type: 'session.started', sessionId: created.session_id, resumed: true });
  again.sock.send(JSON.stringify({ type: 'user.hangup' }));
  t.equal((await again.closed).code, 1000);
  let record: any;
  for (let i = 0; i < 200; i++) {
    record = (await app.req('GET', `/v1/agent/sessions/${created.session_id}`)).body;
    if (record.status !== 'active') break;
    await new Promise((r) => setTimeout(r, 50));
  }
  t.match(record, { status: 'completed', ended_reason: 'user_hangup' }, 'the session ended when the resumed caller hung up');
});

t.test('a request body that never completes: 408, connection closed', async (t) => {
  const sock = net.connect(app.port, '127.0.0.1');
  let data = '';
  sock.on('data', (d) => (data += d.toString('latin1')));
  const closed = new Promise<void>((r) => sock.on('close', () => r()));
  sock.on('error', () => {});
  sock.write(`POST /v1/tts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${app.key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"text":"`);
  await closed;
  t.match(data, /^HTTP\/1\.1 408 Request Timeout\r\n/);
  t.match(data, /"message":"Request body not received within 0.3 s"/);
  t.equal((await app.req('POST', '/v1/tts', { text: 'Complete bodies still work.', format: 'wav' })).status, 200);
});
