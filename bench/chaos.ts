/**
 * Faults under load (bench/README.md, "chaos.ts"): talking sessions, synthesis streams and post-call
 * webhooks run against one platform node while a fault is injected; prints one JSON object
 * with what the callers, the synthesis clients and the webhook receiver saw, on their clocks.
 *
 *   npx tsx bench/chaos.ts [--fault backend|postgres] [--cut 5] [--sessions 100] [--streams 20] [--seconds 30] [--fault-at 10]
 *
 * Faults:
 * - `backend`: the native backend the platform launched is killed (SIGKILL) at `--fault-at`
 *   seconds; its supervisor restarts it. Reported: hung synthesis requests (none answered
 *   within 30 s), how requests failed, sessions that ended before the callers hung up, and per
 *   session its recovery: from the kill to the start of the first question the caller asked
 *   after it that was heard and answered (callers ask again 1 s after each question until then).
 *
 * - `postgres` (needs DATABASE_URL): the node reaches Postgres through a TCP proxy
 *   (`test/fixtures/tcp-proxy.ts`) that is cut at `--fault-at` for `--cut` seconds (default 5).
 *   Reported besides: statuses of the synthesis requests, sessions joined but not ended, ended
 *   without their caller's turns, and post-call webhooks missing.
 *
 * With DATABASE_URL / REDIS_URL the node uses Postgres / Redis; otherwise the embedded defaults.
 * The load (callers, synthesis clients, the webhook receiver) runs in a child process.
 */
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { encodeText } from '../native/engines/synthetic/modem.ts';
import { createLogger } from '../src/log.ts';
import { startPlatform } from '../src/platform.ts';
import { percentile, round } from './lib.ts';
import { startTcpProxy } from '../test/fixtures/tcp-proxy.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const QUESTION = 'What time is it?';
const HUNG_MS = 30_000;

interface LoadPlan { url: string; key: string; agent: string; sessions: number; streams: number }
interface LoadReport {
  sessions: { created: number; refused: number; endedEarly: number; closeCodes: Record<string, number>; answersAfterFault: number; recoveryMs: number[]; notRecovered: number; errorEvents: number };
  tts: { requests: number; ok: number; failedBeforeBody: Record<string, number>; cutAfterFirstByte: number; hung: number; afterFaultFirstOkMs: number | null };
  webhooks: { received: number; sessionsEnded: number };
}

// ------------------------------------------------------------------------------------------
// The load: callers speaking over the websocket transport, synthesis clients, a webhook receiver.

async function load() {
  const plan = JSON.parse(process.env.CHAOS_LOAD!) as LoadPlan;
  const auth = { Authorization: `Bearer ${plan.key}`, 'Content-Type': 'application/json' };
  const question = encodeText(QUESTION, { sampleRateHz: 16000 }).pcm;
  const frame = 1600; // 100 ms
  let faultAt = Infinity;
  let stopping = false;
  const report: LoadReport = {
    sessions: { created: 0, refused: 0, endedEarly: 0, closeCodes: {}, answersAfterFault: 0, recoveryMs: [], notRecovered: 0, errorEvents: 0 },
    tts: { requests: 0, ok: 0, failedBeforeBody: {}, cutAfterFirstByte: 0, hung: 0, afterFaultFirstOkMs: null },
    webhooks: { received: 0, sessionsEnded: 0 },
  };

  // Callers: each asks its question every ~4 s (phases spread), with silence between.
  // After the fault every caller asks again 1 s after each question until it is answered (as a
  // caller who hears a glitch does): recovery is when the first question that was then heard
  // and answered began, after the kill, on the caller's clock.
  const questionMs = question.length / 16;
  interface Caller { ws: WebSocket; pos: number; speakAt: number; starts: number[]; heardStart: number | null; recoveredAt: number | null; closed: boolean }
  const callers: Caller[] = [];
  await Promise.all(Array.from({ length: plan.sessions }, async (_, i) => {
    await sleep((i * 2000) / plan.sessions);
    const r = await fetch(`${plan.url}/v1/agent/sessions`, { method: 'POST', headers: auth, body: JSON.stringify({ agent_id: plan.agent }) });
    if (r.status !== 200) { report.sessions.refused++; if (report.sessions.refused === 1) console.error('session refused', r.status, await r.text()); return; }
    report.sessions.created++;
    const s = (await r.json()) as { websocket_url: string; token: string };
    const ws = new WebSocket(`${s.websocket_url.replace('localhost', '127.0.0.1')}?token=${s.token}`);
    const c: Caller = { ws, pos: -1, speakAt: Date.now() + 1000 + (i * 4000) / plan.sessions, starts: [], heardStart: null, recoveredAt: null, closed: false };
    ws.on('message', (d, bin) => {
      if (bin) return;
      const m = JSON.parse(d.toString());
      if (m.topic === 'agent-event' && m.type === 'error') report.sessions.errorEvents++;
      if (m.topic !== 'lk.transcription' || !m.final) return;
      const now = Date.now();
      if (now < faultAt) return;
      if (m.role === 'user') {
        // The question heard: the last one that had been spoken whole by now, begun after the kill.
        const start = c.starts.filter((x) => x >= faultAt && x + questionMs <= now).at(-1);
        if (c.heardStart === null && start !== undefined) c.heardStart = start;
      } else if (c.heardStart !== null) {
        report.sessions.answersAfterFault++;
        if (c.recoveredAt === null) c.recoveredAt = c.heardStart;
      }
    });
    ws.on('error', () => {});
    ws.on('close', (code) => {
      c.closed = true;
      if (!stopping) {
        report.sessions.endedEarly++;
        report.sessions.closeCodes[code] = (report.sessions.closeCodes[code] ?? 0) + 1;
      }
    });
    await new Promise<void>((res) => { ws.once('open', () => res()); ws.once('close', () => res()); });
    callers.push(c);
  }));
  const silence = new Uint8Array(frame * 2);
  let phase = 0;
  const tick = setInterval(() => {
    const now = Date.now();
    phase = (phase + 1) % 10;
    for (let k = phase; k < callers.length; k += 10) {
      const c = callers[k]!;
      if (c.closed || c.ws.readyState !== WebSocket.OPEN) continue;
      if (c.pos < 0 && now >= c.speakAt) { c.pos = 0; c.starts.push(now); }
      if (c.pos >= 0) {
        const piece = question.subarray(c.pos, c.pos + frame);
        const bytes = new Uint8Array(frame * 2);
        bytes.set(new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength));
        c.ws.send(bytes);
        c.pos += frame;
        if (c.pos >= question.length) { c.pos = -1; c.speakAt = now + (now > faultAt && c.recoveredAt === null ? 1000 : 4000); }
      } else c.ws.send(silence);
    }
  }, 10);

  // Synthesis clients: one request after another, each with a deadline.
  const ttsLoops = Array.from({ length: plan.streams }, async () => {
    while (!stopping) {
      report.tts.requests++;
      const ac = new AbortController();
      const timer = setTimeout(() => ac.abort(), HUNG_MS);
      let gotBody = false;
      try {
        const r = await fetch(`${plan.url}/v1/tts`, { method: 'POST', headers: auth, body: JSON.stringify({ text: 'A sentence or two of speech, long enough to stream for a while. Then a little more.', format: 'wav' }), signal: ac.signal });
        if (r.status !== 200) {
          report.tts.failedBeforeBody[r.status] = (report.tts.failedBeforeBody[r.status] ?? 0) + 1;
          await r.arrayBuffer().catch(() => {});
          await sleep(100);
          continue;
        }
        const reader = r.body!.getReader();
        for (;;) {
          const x = await reader.read();
          if (x.done) break;
          gotBody = true;
        }
        report.tts.ok++;
        if (Date.now() > faultAt && report.tts.afterFaultFirstOkMs === null) report.tts.afterFaultFirstOkMs = Date.now() - faultAt;
      } catch {
        if (ac.signal.aborted) report.tts.hung++;
        else if (gotBody) report.tts.cutAfterFirstByte++;
        else report.tts.failedBeforeBody.network = (report.tts.failedBeforeBody.network ?? 0) + 1;
        await sleep(100);
      } finally {
        clearTimeout(timer);
      }
    }
  });

  process.on('message', async (m: { type: string; at?: number }) => {
    if (m.type === 'fault') {
      faultAt = m.at!;
      for (const c of callers) if (c.pos < 0) c.speakAt = Math.min(c.speakAt, faultAt + 1000);
    }
    if (m.type !== 'stop') return;
    stopping = true;
    clearInterval(tick);
    for (const c of callers) {
      if (c.closed) continue;
      if (faultAt !== Infinity) {
        if (c.recoveredAt !== null) report.sessions.recoveryMs.push(c.recoveredAt - faultAt);
        else report.sessions.notRecovered++;
      }
      c.ws.send(JSON.stringify({ type: 'user.hangup' }));
    }
    await Promise.all(ttsLoops);
    await sleep(1000);
    for (const c of callers) c.ws.terminate();
    process.send!({ type: 'report', report });
  });
  process.send!({ type: 'ready', sessions: callers.length });
}

// ------------------------------------------------------------------------------------------
// The node, the fault and the report.

async function main() {
  const fault = process.argv.includes('--fault') ? process.argv[process.argv.indexOf('--fault') + 1] : 'backend';
  if (fault !== 'backend' && fault !== 'postgres') throw new Error(`unknown fault ${fault} (backend, postgres)`);
  if (fault === 'postgres' && !process.env.DATABASE_URL) throw new Error('--fault postgres needs DATABASE_URL');
  const cutS = arg('cut', 5);
  // `postgres`: the node reaches the database through a proxy the fault cuts for `--cut` seconds.
  const target = process.env.DATABASE_URL ? new URL(process.env.DATABASE_URL) : null;
  const proxy = fault === 'postgres' && target ? await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) }) : null;
  const databaseUrl = proxy && target ? Object.assign(new URL(target), { host: proxy.address }).toString() : process.env.DATABASE_URL;
  const sessions = arg('sessions', 100);
  const streams = arg('streams', 20);
  const seconds = arg('seconds', 30);
  const faultAtS = arg('fault-at', 10);
  const key = `pk_chaos_${randomBytes(16).toString('hex')}`;

  // The webhook receiver, counting call.ended deliveries.
  let webhooks = 0;
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (body.includes('call.ended')) webhooks++;
      res.end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const hookPort = (receiver.address() as { port: number }).port;
  process.env.PARLEY_OUTBOUND_ALLOW = `127.0.0.1:${hookPort}`; // the agent's webhook URL is checked with it

  const deafMs: number[] = [];
  let errorLogs = 0;
  const platform = await startPlatform({
    env: { ...process.env },
    config: {
      host: '127.0.0.1', port: 0, dataDir: 'memory', bootstrapKey: key, logLevel: 'error',
      startNativeBackend: true, speechEngine: 'synthetic', maxSessions: 100_000,
      databaseUrl, redisUrl: process.env.REDIS_URL,
      outboundAllow: [`127.0.0.1:${hookPort}`],
    },
    dbSchema: process.env.DATABASE_URL ? `chaos_${randomBytes(4).toString('hex')}` : undefined,
    // Sessions log when they reopen a lost recognizer, with how long they were deaf.
    log: createLogger({ level: 'info', destination: { write: (line: string) => {
      if (line.includes('recognizer reopened')) deafMs.push(JSON.parse(line).lost_ms);
      else if (line.includes('"level":50') || line.includes('"level":60')) errorLogs++;
    } } }),
  });
  const backend = platform.nativeBackend!;
  const auth = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  const post = async (path: string, body?: unknown) => {
    const r = await fetch(platform.url + path, { method: 'POST', headers: auth, body: body === undefined ? undefined : JSON.stringify(body) });
    return (await r.json().catch(() => null)) as any;
  };
  await platform.db.sql`update teams set credit_micros = 1000000000000`;
  const a = await post('/v1/agent/agents', { name: 'chaos', config: { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager' }, webhooks: { post_call: [{ url: `http://127.0.0.1:${hookPort}/hook` }] } } });
  const agent = a.agent_id as string;
  if (!agent) throw new Error(`agent not created: ${JSON.stringify(a)}`);
  await post(`/v1/agent/agents/${agent}/publish`);

  const child = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, CHAOS_ROLE: 'load', CHAOS_LOAD: JSON.stringify({ url: platform.url, key, agent, sessions, streams }) }, execArgv: ['--import=tsx'] });
  const held = await new Promise<number>((r) => child.once('message', (m: any) => r(m.sessions)));
  const t0 = Date.now();
  await sleep(faultAtS * 1000);

  // The fault.
  const pid = backend.status().pid!;
  const killedAt = Date.now();
  child.send({ type: 'fault', at: killedAt });
  let restoredAt: number | null = null;
  if (proxy) {
    await proxy.cut();
    void sleep(cutS * 1000).then(() => proxy.restore()).then(() => (restoredAt = Date.now()));
  } else process.kill(pid, 'SIGKILL');
  const healthDuring: string[] = [];
  let backAt: number | null = null;
  while (Date.now() - t0 < seconds * 1000) {
    const h = (await (await fetch(`${platform.url}/health`)).json().catch(() => null)) as any;
    const nb = h?.components?.native_backend;
    const st = nb ? `${nb.status}: ${nb.detail ?? ''}` : 'unknown';
    if (healthDuring.at(-1) !== st) healthDuring.push(st);
    if (backAt === null && backend.status().running && backend.status().pid !== pid) backAt = Date.now();
    await sleep(100);
  }

  child.send({ type: 'stop' });
  const report = await new Promise<LoadReport>((r) => child.on('message', (m: any) => { if (m.type === 'report') r(m.report); }));
  // Post-call webhooks of every session, delivered once the sessions have ended.
  const ended = Number((await platform.db.sql`select count(*)::int as n from sessions where status in ('completed', 'failed')`)[0]!.n);
  for (let i = 0; i < 150 && webhooks < ended; i++) await sleep(100);
  report.webhooks = { received: webhooks, sessionsEnded: ended };
  // Records: every session someone joined must be ended, with the caller's turns stored.
  const records = (await platform.db.sql`
    select count(*) filter (where status in ('pending', 'active'))::int as not_ended,
           count(*) filter (where status in ('completed', 'failed') and not exists (
             select 1 from session_items i where i.session_id = s.id and i.type = 'message' and i.payload->>'role' = 'user'))::int as without_items,
           count(*)::int as joined
    from sessions s where started_at is not null`)[0] as { not_ended: number; without_items: number; joined: number };

  const rec = report.sessions.recoveryMs.sort((x, y) => x - y);
  process.stdout.write(`${JSON.stringify({
    bench: 'chaos', fault, date: new Date().toISOString(), cores: os.cpus().length, load_average_1m: round(os.loadavg()[0]!),
    store: process.env.DATABASE_URL ? 'postgres' : 'pglite', shared_state: process.env.REDIS_URL ? 'redis' : 'memory',
    sessions_held: held, streams, fault_at_s: faultAtS, seconds,
    backend: { killed_pid: pid, restarted_in_ms: backAt === null ? null : backAt - killedAt, restarts: backend.status().restarts, health_native_backend: healthDuring },
    sessions: {
      ...report.sessions, recoveryMs: undefined,
      recovery_ms: rec.length ? { p50: round(percentile(rec, 50)), p90: round(percentile(rec, 90)), max: rec.at(-1) } : null,
      // On the platform's clock: from a session's recognizer stream breaking to a new one open.
      recognizer_reopened: deafMs.length, deaf_ms: deafMs.length ? { p50: round(percentile(deafMs.sort((x, y) => x - y), 50)), p90: round(percentile(deafMs, 90)), max: deafMs.at(-1) } : null,
    },
    ...(proxy ? { postgres: { cut_ms: cutS * 1000, restored_after_ms: restoredAt === null ? null : restoredAt - killedAt, records, webhooks_lost: Math.max(0, ended - webhooks) } } : {}),
    error_log_lines: errorLogs,
    tts: report.tts,
    webhooks: report.webhooks,
  }, null, 2)}\n`);
  child.kill();
  await platform.close();
  await proxy?.close();
  receiver.close();
  process.exit(0);
}

if (process.env.CHAOS_ROLE === 'load') void load();
else void main();
