/**
 * Shutdown as the clients of one loop see it (docs/websocket-transport.md, docs/deploy.md
 * "Rolling restarts"): the platform stops accepting, finishes the request in flight, refuses
 * requests and upgrades on connections opened before (503), closes the sockets of routes
 * without a drain of their own 1001 (a sandbox line 1001 from its carrier), and ends the live session: its client gets `session.ended` with
 * reason `shutdown`, then close 1000 `shutdown` (not a cut connection, 1006).
 */
import t from 'tap';
import net from 'node:net';
import { pack } from 'msgpackr';
import WebSocket from 'ws';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { createSession, sleep } from '../e2e/session-helpers.ts';
import { startTestServer } from '../helpers/server.ts';
import { caller } from '../scale/helpers.ts';
import { slowUpload } from '../fixtures/slow-upload.ts';

/** A raw keep-alive connection: what it receives, and a way to send on it. */
async function rawConnection(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let received = '';
  socket.on('data', (d) => (received += d.toString('latin1')));
  socket.on('error', () => {});
  const ended = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const answer = async (raw: string) => {
    const from = received.length;
    socket.write(raw);
    for (let i = 0; i < 250 && !/\r\n\r\n/.test(received.slice(from)); i++) await sleep(20);
    return received.slice(from);
  };
  return { socket, answer, ended };
}

/** An open WebSocket: its text frames and how it closed. */
async function openSocket(url: string, headers: Record<string, string>) {
  const ws = new WebSocket(url, { headers });
  const texts: string[] = [];
  ws.on('message', (d, binary) => { if (!binary) texts.push(String(d)); });
  ws.on('error', () => {});
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('unexpected-response', (_q, r) => reject(new Error(`upgrade ${url}: ${r.statusCode}`))));
  return { ws, texts, closed };
}

t.test('a platform closing with a live session: session.ended shutdown, then close 1000 shutdown', async (t) => {
  const app = await startTestServer({ backend: 'synthetic' });
  let closed = false;
  t.teardown(() => (closed ? undefined : app.close()));
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const s = await createSession(app, agent);
  const c = caller(`${s.websocket_url}?token=${s.token}`);
  t.ok(await c.waitFor((m) => m.type === 'session.started'), 'the session started');
  c.say('hello before the stop');
  t.ok(await c.waitFor((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final), 'the agent answered: the session is live');

  // Sockets of the other routes: synthesis (live, ElevenLabs stream-input), realtime, a sandbox phone line.
  const ws = app.url.replace('http://', 'ws://');
  const live = await openSocket(`${ws}/v1/tts/live`, app.auth);
  live.ws.send(pack({ event: 'start', request: { text: '', format: 'pcm' } }));
  const streamInput = await openSocket(`${ws}/compat/elevenlabs/v1/text-to-speech/default/stream-input`, { 'xi-api-key': app.key });
  streamInput.ws.send(JSON.stringify({ text: ' ' }));
  const realtime = await openSocket(`${ws}/compat/v1/realtime?model=gpt-realtime`, app.auth);
  const line = await openSocket(`${ws}/v1/telephony/sandbox/calls?line=%2B15550104242`, app.auth);
  for (let i = 0; i < 250 && !line.texts.some((m) => m.includes('line.ready')); i++) await sleep(20);
  t.ok(line.texts.some((m) => m.includes('line.ready')), 'the sandbox line is registered');

  // Two connections opened before the stop, idle between requests.
  const keepAlive = await rawConnection(app.port);
  t.match(await keepAlive.answer('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'), /^HTTP\/1\.1 200/, 'a keep-alive connection, served before the stop');
  const upgrading = await rawConnection(app.port);
  t.match(await upgrading.answer('GET /health HTTP/1.1\r\nHost: x\r\n\r\n'), /^HTTP\/1\.1 200/);

  // A request in flight: its body is still uploading when the stop begins.
  const body = JSON.stringify({ name: 'made during shutdown' });
  const upload = slowUpload(app.port, '/v1/agent/agents', { ...app.auth, 'Content-Type': 'application/json' }, body);
  for (let i = 0; i < 100 && app.http.inFlight === 0; i++) await sleep(10);
  t.equal(app.http.inFlight, 1, 'the request is in flight');

  const closing = app.close();
  closed = true;
  const refused = await rawConnection(app.port).then(() => 'connected', (err) => err.code);
  t.equal(refused, 'ECONNREFUSED', 'no new connection once the stop began');
  const again = await keepAlive.answer('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
  t.match(again, /^HTTP\/1\.1 503/, 'a request on a connection opened before: 503');
  t.match(again, /\r\nRetry-After: 1\r\n/i);
  await keepAlive.ended;
  t.pass('and that connection is closed');
  const upgrade = await upgrading.answer(`GET /v1/agent/sessions/connect?token=${s.token} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  t.match(upgrade, /^HTTP\/1\.1 503/, 'an upgrade on a connection opened before: 503');
  t.notOk(c.messages.some((m) => m.type === 'session.ended'), 'the session goes on while the request in flight finishes');

  const res = await upload.finish();
  t.equal(res.status, 201, 'the request in flight was answered');

  t.same(await live.closed, { code: 1001, reason: 'Server shutting down' }, '/v1/tts/live closed 1001 going away');
  t.same(await streamInput.closed, { code: 1001, reason: 'Server shutting down' }, 'ElevenLabs stream-input closed 1001 going away');
  t.same(await realtime.closed, { code: 1001, reason: 'Server shutting down' }, 'the realtime socket closed 1001 going away');
  t.same(await line.closed, { code: 1001, reason: 'carrier closing' }, 'the sandbox line closed 1001 by its carrier (docs/telephony.md)');
  const end = await c.closed;
  t.same(end, { code: 1000, reason: 'shutdown' }, 'the session socket closed 1000 shutdown, as documented');
  const ended = c.messages.filter((m) => m.type === 'session.ended');
  t.same(ended, [{ topic: 'session', type: 'session.ended', reason: 'shutdown' }], 'session.ended with reason shutdown reached the client before the close');
  await closing;
});
