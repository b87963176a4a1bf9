/**
 * A platform node killed (SIGKILL) with a live session, in a two-node setup on one Postgres and
 * one Redis: the other node ends the orphaned session `failed` / `node_lost`, settles its charge
 * and queues its post-call webhook, which is delivered; a resume for it gets close 4404.
 * Both nodes are `parley serve` processes, as an operator runs them.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import http from 'node:http';
import postgres from 'postgres';
import WebSocket from 'ws';
import { startBackend } from '../../native/server.ts';
import { serve, untilReady } from '../helpers/process.ts';
import { sleep } from '../e2e/session-helpers.ts';

const DATABASE_URL = process.env.DATABASE_URL;
const REDIS_URL = process.env.REDIS_URL;
if (!DATABASE_URL || !REDIS_URL) {
  t.plan(0, 'needs DATABASE_URL and REDIS_URL (two nodes share Postgres and Redis)');
  process.exit(0);
}

// A database of its own: both nodes migrate and use it as `parley serve` would.
const dbName = `parley_nodelost_${randomBytes(4).toString('hex')}`;
const admin = postgres(DATABASE_URL!, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database "${dbName}"`);
const url = new URL(DATABASE_URL!);
url.pathname = `/${dbName}`;
t.teardown(async () => {
  await admin.unsafe(`drop database if exists "${dbName}" with (force)`);
  await admin.end();
});

const hooks: { sessionId: string; type: string }[] = [];
const receiver = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    const b = JSON.parse(body);
    hooks.push({ sessionId: JSON.stringify(b).match(/sess_[A-Za-z0-9]+/)?.[0] ?? '', type: b.type ?? b.event ?? '' });
    res.end('ok');
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const hookAddr = `127.0.0.1:${(receiver.address() as { port: number }).port}`;
const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
t.teardown(async () => {
  receiver.close();
  await backend.close();
});

t.test('the sessions of a killed node are ended node_lost by the other, settled and webhooked', async (t) => {
  const key = `pk_nodelost_${randomBytes(16).toString('hex')}`;
  const env = {
    DATABASE_URL: url.toString(), REDIS_URL: REDIS_URL!, PARLEY_BOOTSTRAP_KEY: key, BACKEND_ADDRESS: backend.address,
    PARLEY_NATIVE_BACKEND: 'false', PARLEY_NODE_STALE_MS: '2000', PARLEY_OUTBOUND_ALLOW: hookAddr, PARLEY_DATA_DIR: 'memory',
  };
  // Node A is killed, so it cannot remove its ephemeral recordings folder: it gets one the test removes.
  const recordingsA = mkdtempSync(join(tmpdir(), 'parley-node-lost-'));
  t.teardown(() => rmSync(recordingsA, { recursive: true, force: true }));
  const a = await serve(t, { ...env, PARLEY_NODE_ID: 'node-a', PARLEY_RECORDINGS_DIR: recordingsA });
  await untilReady(a.url);
  const b = await serve(t, { ...env, PARLEY_NODE_ID: 'node-b' });
  await untilReady(b.url);
  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const call = async (base: string, method: string, path: string, body?: unknown) => {
    const r = await fetch(base + path, { method, headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: r.status, body: (await r.json().catch(() => null)) as any };
  };

  const agent = await call(a.url, 'POST', '/v1/agent/agents', { name: 'Lost', config: { prompt: { first_message_mode: 'off' }, webhooks: { post_call: [{ url: `http://${hookAddr}/hook` }] } } });
  t.equal(agent.status, 201, JSON.stringify(agent.body));
  await call(a.url, 'POST', `/v1/agent/agents/${agent.body.agent_id}/publish`);
  const created = await call(a.url, 'POST', '/v1/agent/sessions', { agent_id: agent.body.agent_id });
  t.equal(created.status, 200);
  const sessionId = created.body.session_id as string;

  // A live session on node A: connected, a typed question answered.
  const ws = new WebSocket(`${created.body.websocket_url.replace('localhost', '127.0.0.1')}?token=${created.body.token}`);
  let resume = '';
  let answered = false;
  ws.on('message', (d, bin) => {
    if (bin) return;
    const m = JSON.parse(d.toString());
    if (m.type === 'session.started') resume = m.resume;
    if (m.state === 'idle' && !answered) ws.send(JSON.stringify({ type: 'user.message', text: 'hello there', audio: false }));
    if (m.topic === 'lk.transcription' && m.role === 'agent' && m.final) answered = true;
  });
  const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
  for (let i = 0; i < 300 && !answered; i++) await sleep(50);
  t.ok(answered, 'the session answered on node A');
  t.ok(resume, 'the client has its resume secret');

  // What was said is in the store (written as it happens; a kill loses only writes in flight).
  for (let i = 0; i < 200; i++) {
    const r = await call(b.url, 'GET', `/v1/agent/sessions/${sessionId}`);
    if (r.body?.items?.some((x: any) => x.type === 'message' && x.content === 'hello there')) break;
    await sleep(50);
  }
  const killedAt = Date.now();
  a.child.kill('SIGKILL');
  t.equal(await closed, 1006, 'the caller loses the connection');

  // Node B ends it once A's beat is stale (2 s here; 20 s by default).
  let record: any = null;
  for (let i = 0; i < 400; i++) {
    const r = await call(b.url, 'GET', `/v1/agent/sessions/${sessionId}`);
    if (r.body?.status === 'failed') { record = r.body; break; }
    await sleep(50);
  }
  t.ok(record, 'node B ended the orphaned session', { output: record ? '' : b.output().slice(-3000) });
  t.match(record, { status: 'failed', ended_reason: 'node_lost' });
  t.ok(record.items.some((i: any) => i.type === 'message' && i.content === 'hello there'), 'what was said before the loss is kept');

  // Charged as of node A's last beat (not for the time it took to notice): one started minute.
  t.ok(Date.parse(record.ended_at) <= killedAt, 'it ended as of node A\'s last beat, before the kill');
  const ledger = await call(b.url, 'GET', '/v1/usage/ledger');
  const moves = ledger.body.entries.filter((e: any) => e.ref === sessionId);
  t.equal(moves.reduce((k: number, e: any) => k + e.amount, 0), -0.1, 'settled: one started minute at 0.1, the hold kept as the charge');

  for (let i = 0; i < 200 && !hooks.some((h) => h.sessionId === sessionId && h.type === 'call.ended'); i++) await sleep(50);
  t.ok(hooks.some((h) => h.sessionId === sessionId && h.type === 'call.ended'), 'its call.ended webhook was delivered', { hooks });

  // A resume reaching node B: the session is not live anywhere.
  const connectB = created.body.websocket_url.replace(/^ws:\/\/[^/]+/, b.url.replace('http', 'ws'));
  const again = new WebSocket(`${connectB}?session_id=${sessionId}&resume=${encodeURIComponent(resume)}`);
  again.on('error', () => {});
  const code = await new Promise<number>((r) => again.on('close', (c) => r(c)));
  t.equal(code, 4404, 'a resume gets 4404 Session is not live');

  await b.stop();
});
