/**
 * Faults under load (bench/README.md, "chaos.ts"): talking sessions, synthesis streams and post-call
 * webhooks run against one platform node while a fault is injected; prints one JSON object
 * with what the callers, the synthesis clients and the webhook receiver saw, on their clocks.
 *
 *   npx tsx bench/chaos.ts [--fault backend|postgres|postgres-blackhole|redis|redis-blackhole|redis-restart|disk-full|slow-clients] [--disk-mb 256] [--cut 5] [--sessions 100] [--streams 20] [--seconds 30] [--fault-at 10]
 *     [--stalled 10] [--idle-ws 5000] [--slowloris 2000] [--crowd-seconds 60] [--cpu-dir DIR] [--heap-dir DIR]
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
 *   Reported besides: statuses of the synthesis requests, `/ready` over time, sessions joined
 *   but not ended, ended without their caller's turns, turns the callers heard but the record
 *   lacks, and post-call webhooks missing.
 * - `postgres-blackhole`: the same proxy goes silent instead (nothing forwarded, nothing reset;
 *   `test/fixtures/tcp-proxy.ts` `blackhole()`), then heals.
 * - `redis` (needs REDIS_URL): the node's Redis connections go through the proxy, cut for
 *   `--cut` seconds; when it is restored the node's keys are deleted, as a Redis restarted
 *   without persistence would have lost them. `redis-blackhole`: silent instead, keys kept.
 * - `redis-restart` (needs REDIS_URL on this machine, and `redis-cli` / `redis-server` on the
 *   PATH): the real Redis is shut down (`SHUTDOWN NOSAVE`: every key of every user of that
 *   Redis is lost) and started again `--cut` seconds later without persistence, as the
 *   development machine runs it. For a development machine only: never against a shared Redis.
 * - `disk-full` (needs root or CAP_SYS_ADMIN: a tmpfs is mounted): the recordings folder
 *   (`PARLEY_RECORDINGS_DIR`) is a tmpfs of `--disk-mb` MiB (256), filled to the last byte at
 *   `--fault-at`. Reported besides: sessions by status and reason, and each ended session's
 *   recording outcome (every track complete, or failed with the tracks' error codes).
 *
 * - `slow-clients`: at `--fault-at` (30 s for this fault), from a process of their own: `--stalled` (10) callers join
 *   sessions of an agent whose opener is ~10 minutes of speech and stop reading their socket at
 *   once (ws's `pause()`; their microphone keeps sending silence); a crowd of `--idle-ws` (5,000)
 *   keyless `stream-input` WebSockets that never send their first message and `--slowloris`
 *   (2,000) connections dribbling half a request's headers a byte every 2 s, each reopened when
 *   the platform closes it until `--crowd-seconds` (60) after the fault, then left to be closed.
 *   The run goes on until every stalled caller was closed 4008 (the platform's log) and 15 s
 *   more, within `--seconds` (300 for this fault). Reported besides: the platform's heap +
 *   external and RSS before (forced GC), at the peak while the slow clients were there and
 *   after (forced GC); the healthy callers' turn latency on their clock (last audio of a
 *   question out → first agent audio in) and the synthesis clients' first byte, p50 / p99, by
 *   window (before, crowds, stalled only, after); each crowd's opens, lifetimes and how the
 *   platform ended them; when the platform closed each stalled caller (from its last read),
 *   what the caller then read, and its session's record and webhook. Memory is read once more
 *   (`after_grace`) when every stalled caller's session has ended (its 30 s resume grace over)
 *   and 5 s more, the load still running, with the node's live sessions and active resources at
 *   each reading. `--cpu-dir`: CPU profiles of the platform (this process) 20 s before the fault
 *   and 20 s of the crowds; `--heap-dir`: heap snapshots before and after the grace (the writes
 *   stall the node for seconds: for finding what stays, not for figures).
 *
 * Single-use tokens (every fault): besides the callers, a joiner creates a session every
 * 250 ms, connects its token 0–2 s later and hangs up after 1 s; at the end every token
 * issued (joiners' and callers') is presented again. Reported: creations and connects by
 * status / close code, and tokens admitted a second time (must be 0).
 *
 * With DATABASE_URL / REDIS_URL the node uses Postgres / Redis; otherwise the embedded defaults.
 * The load (callers, synthesis clients, the webhook receiver) runs in a child process.
 */
import { execFileSync, fork } from 'node:child_process';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import inspector from 'node:inspector';
import { writeFileSync } from 'node:fs';
import v8 from 'node:v8';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import WebSocket from 'ws';
import { encodeText } from '../native/engines/synthetic/modem.ts';
import { createLogger } from '../src/log.ts';
import { startPlatform } from '../src/platform.ts';
import { benchChild, ensureFdLimit, memoryAfterGc, openCrowd, percentile, round, type CrowdReport } from './lib.ts';
import { fillDisk, smallDisk, type SmallDisk } from '../test/fixtures/small-disk.ts';
import { startTcpProxy } from '../test/fixtures/tcp-proxy.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const QUESTION = 'What time is it?';
const HUNG_MS = 30_000;

interface LoadPlan { url: string; key: string; agent: string; joinAgent: string; sessions: number; streams: number }
interface LoadReport {
  sessions: { created: number; refused: number; endedEarly: number; closeCodes: Record<string, number>; answersAfterFault: number; recoveryMs: number[]; notRecovered: number; errorEvents: number };
  /** Per caller session: the final transcripts with text the caller received, by role. */
  heard: Record<string, { user: number; agent: number }>;
  /** Per caller session: the final transcripts received, in order ([role, text]). */
  heardTexts: Record<string, [string, string][]>;
  tokens: { created: number; createdStatus: Record<string, number>; connected: number; connectClose: Record<string, number>; reused: number; reuseAdmitted: number; reuseClose: Record<string, number>; givenBackAdmitted: number; givenBackClose: Record<string, number> };
  /** Tokens not admitted at first, presented again: session id, first close code, the later one, when (ms since epoch). */
  retried: { session_id: string; first: number | string; then: number | string; at: number }[];
  tts: { requests: number; ok: number; failedBeforeBody: Record<string, number>; failedAfterFault: Record<string, number>; firstMessage: Record<string, string>; slowestAfterFaultMs: number; over5sAfterFault: number; cutAfterFirstByte: number; hung: number; afterFaultFirstOkMs: number | null };
  webhooks: { received: number; sessionsEnded: number };
  /**
   * On the load's clock: each question's latency, from its last audio leaving to the first agent
   * audio arriving ([question end ms since epoch, ms]; a question asked while the previous answer
   * still played is not timed); each `200` synthesis request's first byte ([request start, ms]).
   */
  timed: { turns: [number, number][]; unanswered: number; ttfb: [number, number][] };
}

/** Profiles this process's JavaScript for `ms` and writes the profile (Chrome DevTools format). */
async function cpuProfile(ms: number, file: string): Promise<void> {
  const session = new inspector.Session();
  session.connect();
  const post = (method: string, params?: object) => new Promise<any>((res, rej) => session.post(method, params, (err, r) => (err ? rej(err) : res(r))));
  await post('Profiler.enable');
  await post('Profiler.setSamplingInterval', { interval: 1000 });
  await post('Profiler.start');
  await sleep(ms);
  const { profile } = await post('Profiler.stop');
  writeFileSync(file, JSON.stringify(profile));
  session.disconnect();
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
    tts: { requests: 0, ok: 0, failedBeforeBody: {}, failedAfterFault: {}, firstMessage: {}, slowestAfterFaultMs: 0, over5sAfterFault: 0, cutAfterFirstByte: 0, hung: 0, afterFaultFirstOkMs: null },
    webhooks: { received: 0, sessionsEnded: 0 },
    heard: {},
    heardTexts: {},
    retried: [],
    tokens: { created: 0, createdStatus: {}, connected: 0, connectClose: {}, reused: 0, reuseAdmitted: 0, reuseClose: {}, givenBackAdmitted: 0, givenBackClose: {} },
    timed: { turns: [], unanswered: 0, ttfb: [] },
  };
  // `--fault slow-clients`: the callers keep their pace through the fault (no one asks again).
  let askAgain = true;
  /** Every token issued, and whether a session was started with it. */
  const issued: { s: { websocket_url: string; token: string; session_id: string }; admitted: boolean; first?: number }[] = [];
  const bump = (o: Record<string, number>, k: string | number) => void (o[k] = (o[k] ?? 0) + 1);
  const wsUrl = (s: { websocket_url: string; token: string }) => `${s.websocket_url.replace('localhost', '127.0.0.1')}?token=${encodeURIComponent(s.token)}`;
  /** Connects a token: `started` when the session's first frame arrives, else the close code. */
  const tryToken = (s: { websocket_url: string; token: string }, holdMs: number) =>
    new Promise<'started' | number>((res) => {
      const ws = new WebSocket(wsUrl(s));
      let started = false;
      ws.on('message', (d, bin) => {
        if (started || bin || !String(d).includes('"session.started"')) return;
        started = true;
        res('started');
        setTimeout(() => { try { ws.send(JSON.stringify({ type: 'user.hangup' })); } catch {} setTimeout(() => ws.terminate(), 500); }, holdMs);
      });
      ws.on('error', () => {});
      ws.on('close', (code) => { if (!started) res(code); });
      setTimeout(() => { if (!started) { ws.terminate(); res(-1); } }, 15_000);
    });

  // Callers: each asks its question every ~4 s (phases spread), with silence between.
  // After the fault every caller asks again 1 s after each question until it is answered (as a
  // caller who hears a glitch does): recovery is when the first question that was then heard
  // and answered began, after the kill, on the caller's clock.
  const questionMs = question.length / 16;
  interface Caller { ws: WebSocket; pos: number; speakAt: number; starts: number[]; heardStart: number | null; recoveredAt: number | null; closed: boolean; endAt: number; lastAudioAt: number }
  const callers: Caller[] = [];
  await Promise.all(Array.from({ length: plan.sessions }, async (_, i) => {
    await sleep((i * 2000) / plan.sessions);
    const r = await fetch(`${plan.url}/v1/agent/sessions`, { method: 'POST', headers: auth, body: JSON.stringify({ agent_id: plan.agent }) });
    if (r.status !== 200) { report.sessions.refused++; if (report.sessions.refused === 1) console.error('session refused', r.status, await r.text()); return; }
    report.sessions.created++;
    const s = (await r.json()) as { websocket_url: string; token: string; session_id: string };
    const mine = { s, admitted: false };
    issued.push(mine);
    const heard = (report.heard[s.session_id] = { user: 0, agent: 0 });
    const texts = (report.heardTexts[s.session_id] = [] as [string, string][]);
    const ws = new WebSocket(wsUrl(s));
    const c: Caller = { ws, pos: -1, speakAt: Date.now() + 1000 + (i * 4000) / plan.sessions, starts: [], heardStart: null, recoveredAt: null, closed: false, endAt: 0, lastAudioAt: 0 };
    ws.on('message', (d, bin) => {
      if (bin) {
        const now = Date.now();
        c.lastAudioAt = now;
        if (c.endAt > 0 && c.pos < 0) report.timed.turns.push([c.endAt, now - c.endAt]);
        c.endAt = 0;
        return;
      }
      const m = JSON.parse(d.toString());
      if (m.type === 'session.started') mine.admitted = true;
      if (m.topic === 'agent-event' && m.type === 'error') report.sessions.errorEvents++;
      if (m.topic !== 'lk.transcription' || !m.final) return;
      texts.push([m.role, m.text]);
      // An agent final without text: the reply was cut before a word of it was heard (nothing
      // said, nothing recorded); counted apart.
      if (m.role === 'user') heard.user++;
      else if (m.text) heard.agent++;
      else return;
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
      if (c.pos < 0 && now >= c.speakAt) {
        if (c.endAt > 0) report.timed.unanswered++;
        c.endAt = 0;
        c.pos = 0;
        c.starts.push(now);
      }
      if (c.pos >= 0) {
        const piece = question.subarray(c.pos, c.pos + frame);
        const bytes = new Uint8Array(frame * 2);
        bytes.set(new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength));
        c.ws.send(bytes);
        c.pos += frame;
        if (c.pos >= question.length) {
          c.pos = -1;
          c.speakAt = now + (askAgain && now > faultAt && c.recoveredAt === null ? 1000 : 4000);
          // Timed unless the previous answer was still playing (its audio would be taken as this one's).
          c.endAt = now - c.lastAudioAt < 300 ? 0 : now;
        }
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
      const began = Date.now();
      try {
        const r = await fetch(`${plan.url}/v1/tts`, { method: 'POST', headers: auth, body: JSON.stringify({ text: 'A sentence or two of speech, long enough to stream for a while. Then a little more.', format: 'wav' }), signal: ac.signal });
        if (r.status !== 200) {
          report.tts.failedBeforeBody[r.status] = (report.tts.failedBeforeBody[r.status] ?? 0) + 1;
          if (Date.now() >= faultAt) bump(report.tts.failedAfterFault, r.status);
          if (!report.tts.firstMessage[r.status]) report.tts.firstMessage[r.status] = (await r.clone().text().catch(() => '')).slice(0, 200);
          await r.arrayBuffer().catch(() => {});
          await sleep(100);
          continue;
        }
        const reader = r.body!.getReader();
        for (;;) {
          const x = await reader.read();
          if (x.done) break;
          if (!gotBody) report.timed.ttfb.push([began, Date.now() - began]);
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
        // Requests that were waiting when the fault began or began after it: answer time.
        const took = Date.now() - began;
        if (Date.now() >= faultAt) {
          report.tts.slowestAfterFaultMs = Math.max(report.tts.slowestAfterFaultMs, took);
          if (took > 5000) report.tts.over5sAfterFault++;
        }
      }
    }
  });

  // The joiner: single-use tokens issued and spent through the fault.
  const joins: Promise<void>[] = [];
  const joiner = setInterval(() => {
    joins.push((async () => {
      const r = await fetch(`${plan.url}/v1/agent/sessions`, { method: 'POST', headers: auth, body: JSON.stringify({ agent_id: plan.joinAgent }) }).catch(() => null);
      bump(report.tokens.createdStatus, r?.status ?? 'network');
      if (r?.status !== 200) return void (await r?.arrayBuffer().catch(() => {}));
      report.tokens.created++;
      const s = (await r.json()) as { websocket_url: string; token: string; session_id: string };
      const mine: (typeof issued)[number] = { s, admitted: false };
      issued.push(mine);
      await sleep(Math.random() * 2000);
      const got = await tryToken(s, 1000);
      if (got === 'started') { report.tokens.connected++; mine.admitted = true; }
      else { bump(report.tokens.connectClose, got); mine.first = got; }
    })());
  }, 250);

  process.on('message', async (m: { type: string; at?: number; askAgain?: boolean }) => {
    if (m.type === 'fault') {
      faultAt = m.at!;
      askAgain = m.askAgain !== false;
      if (askAgain) for (const c of callers) if (c.pos < 0) c.speakAt = Math.min(c.speakAt, faultAt + 1000);
    }
    if (m.type !== 'stop') return;
    stopping = true;
    clearInterval(tick);
    clearInterval(joiner);
    for (const c of callers) {
      if (c.closed) continue;
      if (faultAt !== Infinity) {
        if (c.recoveredAt !== null) report.sessions.recoveryMs.push(c.recoveredAt - faultAt);
        else report.sessions.notRecovered++;
      }
      c.ws.send(JSON.stringify({ type: 'user.hangup' }));
    }
    await Promise.all(ttsLoops);
    await Promise.all(joins);
    await sleep(1000);
    for (const c of callers) c.ws.terminate();
    // Every token issued, presented again: none that started a session may start another. A
    // token refused 4503 (store unreachable) was given back, and may start its session now.
    for (let i = 0; i < issued.length; i += 20) {
      await Promise.all(issued.slice(i, i + 20).map(async (x) => {
        const got = await tryToken(x.s, 0);
        if (x.admitted) {
          report.tokens.reused++;
          if (got === 'started') report.tokens.reuseAdmitted++;
          else bump(report.tokens.reuseClose, got);
        } else {
          if (got === 'started') report.tokens.givenBackAdmitted++;
          else bump(report.tokens.givenBackClose, got);
          if (x.first !== undefined) report.retried.push({ session_id: x.s.session_id, first: x.first, then: got, at: Date.now() });
        }
      }));
    }
    process.send!({ type: 'report', report });
  });
  process.send!({ type: 'ready', sessions: callers.length });
}

// ------------------------------------------------------------------------------------------
// `--fault slow-clients`: the slow and stalled clients, in a process of their own (the healthy
// callers' process keeps its clock to itself).

interface SlowPlan { url: string; key: string; agent: string; stalled: number; idleWs: number; slowloris: number }
/** The stalled callers, on their side: each session and when it stopped reading; how each ended. */
interface StalledReport { sessions: { id: string; at: number }[]; refused: number; closes: Record<string, number>; no_close_frame: number }

async function slow() {
  const plan = JSON.parse(process.env.CHAOS_SLOW!) as SlowPlan;
  const port = new URL(plan.url).port;
  const stalled: StalledReport = { sessions: [], refused: 0, closes: {}, no_close_frame: 0 };
  // Stalled callers: each joins a session of the long-opener agent and stops reading at once
  // (ws's pause: nothing more is read from the socket), while its microphone keeps sending
  // silence. A closed socket's close frame waits behind the bytes it did not read, so a caller
  // learns how it was closed only when it reads again, at the end ('finish'); when is the
  // platform's to say (its log, read by the main process).
  const sockets: WebSocket[] = [];
  const closed: Promise<void>[] = [];
  const silence = new Uint8Array(3200);
  await Promise.all(Array.from({ length: plan.stalled }, async () => {
    const r = await fetch(`${plan.url}/v1/agent/sessions`, { method: 'POST', headers: { Authorization: `Bearer ${plan.key}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ agent_id: plan.agent }) }).catch(() => null);
    if (r?.status !== 200) return void stalled.refused++;
    const s = (await r.json()) as { websocket_url: string; token: string; session_id: string };
    const ws = new WebSocket(`${s.websocket_url.replace('localhost', '127.0.0.1')}?token=${encodeURIComponent(s.token)}`);
    let timer: NodeJS.Timeout | undefined;
    closed.push(new Promise<void>((res) => ws.on('close', (code, reason) => {
      clearInterval(timer);
      const k = `${code} ${reason.toString()}`;
      stalled.closes[k] = (stalled.closes[k] ?? 0) + 1;
      res();
    })));
    ws.on('error', () => {});
    await new Promise<void>((res) => {
      ws.once('open', () => {
        ws.pause();
        stalled.sessions.push({ id: s.session_id, at: Date.now() });
        sockets.push(ws);
        timer = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send(silence), 100);
        res();
      });
      ws.once('close', () => res());
    });
  }));
  const crowds = [
    plan.idleWs > 0 ? openCrowd({ mode: 'ws', n: plan.idleWs, port, key: plan.key, sustain: true }) : null,
    plan.slowloris > 0 ? openCrowd({ mode: 'headers', n: plan.slowloris, port, key: plan.key, sustain: true }) : null,
  ].filter((c) => c !== null);
  const held = await Promise.all(crowds.map((c) => c.held));
  process.send!({ type: 'held', held, stalled: stalled.sessions });
  process.on('message', async (m: { type: string }) => {
    if (m.type === 'stop-crowds') {
      for (const c of crowds) c.stop();
      const reports = await Promise.all(crowds.map((c) => c.done));
      process.send!({ type: 'crowds-done', crowds: reports });
    }
    if (m.type === 'finish') {
      // Reading again: what was queued, then the close frame of a socket the platform closed.
      for (const ws of sockets) ws.resume();
      await Promise.race([Promise.all(closed), sleep(10_000)]);
      for (const ws of sockets) {
        if (ws.readyState === WebSocket.CLOSED) continue;
        stalled.no_close_frame++;
        ws.terminate();
      }
      await Promise.all(closed);
      process.send!({ type: 'stalled', stalled }, () => process.exit(0));
    }
  });
}

// ------------------------------------------------------------------------------------------
// The node, the fault and the report.

async function main() {
  const fault = process.argv.includes('--fault') ? process.argv[process.argv.indexOf('--fault') + 1] : 'backend';
  const faults = ['backend', 'postgres', 'postgres-blackhole', 'redis', 'redis-blackhole', 'redis-restart', 'disk-full', 'slow-clients'];
  if (!faults.includes(fault!)) throw new Error(`unknown fault ${fault} (${faults.join(', ')})`);
  const dependency = fault!.startsWith('postgres') ? 'postgres' : fault!.startsWith('redis') ? 'redis' : null;
  const silent = fault!.endsWith('-blackhole');
  const restart = fault === 'redis-restart';
  // `disk-full`: the recordings folder is a tmpfs of its own (`--disk-mb`), filled at the fault.
  const diskFull = fault === 'disk-full';
  let disk: SmallDisk | null = null;
  if (diskFull) {
    const got = smallDisk(arg('disk-mb', 256));
    if (typeof got === 'string') throw new Error(`--fault disk-full: ${got}`);
    disk = got;
  }
  if (dependency === 'postgres' && !process.env.DATABASE_URL) throw new Error(`--fault ${fault} needs DATABASE_URL`);
  if (dependency === 'redis' && !process.env.REDIS_URL) throw new Error(`--fault ${fault} needs REDIS_URL`);
  const cutS = arg('cut', 5);
  // `postgres*` / `redis*`: the node reaches the dependency through a proxy the fault cuts (or
  // silences) for `--cut` seconds.
  const target = dependency === 'postgres' ? new URL(process.env.DATABASE_URL!) : dependency === 'redis' ? new URL(process.env.REDIS_URL!) : null;
  const proxy = target && !restart ? await startTcpProxy({ host: target.hostname, port: Number(target.port || (dependency === 'postgres' ? 5432 : 6379)) }) : null;
  const viaProxy = proxy && target ? Object.assign(new URL(target), { host: proxy.address }).toString() : undefined;
  const databaseUrl = dependency === 'postgres' ? viaProxy : process.env.DATABASE_URL;
  const redisUrl = dependency === 'redis' && proxy ? viaProxy : process.env.REDIS_URL;
  const statePrefix = `chaos_${randomBytes(4).toString('hex')}:`;
  const dbSchema = process.env.DATABASE_URL ? `chaos_${randomBytes(4).toString('hex')}` : undefined;
  const direct = dependency === 'redis' && !restart ? new Redis(process.env.REDIS_URL!) : null;
  const sessions = arg('sessions', 100);
  const streams = arg('streams', 20);
  const slowClients = fault === 'slow-clients';
  // `slow-clients`: the run goes on until every stalled caller was closed (bounded by `--seconds`).
  const seconds = arg('seconds', slowClients ? 300 : 30);
  const faultAtS = arg('fault-at', slowClients ? 30 : 10);
  // `--cpu-dir`: CPU profiles of this process (the platform's JavaScript) over 20 s before the
  // fault (from 22 s to 2 s before it) and 20 s of the crowds (from 10 s after the fault).
  const cpuDir = process.argv.includes('--cpu-dir') ? process.argv[process.argv.indexOf('--cpu-dir') + 1] : undefined;
  const heapDir = process.argv.includes('--heap-dir') ? process.argv[process.argv.indexOf('--heap-dir') + 1] : undefined;
  const slowPlan = { stalled: arg('stalled', 10), idleWs: arg('idle-ws', 5000), slowloris: arg('slowloris', 2000), crowdS: arg('crowd-seconds', 60) };
  if (slowClients) ensureFdLimit(slowPlan.idleWs + slowPlan.slowloris + 2000);
  const key = `pk_chaos_${randomBytes(16).toString('hex')}`;

  // The webhook receiver, counting call.ended deliveries.
  let webhooks = 0;
  /** `call.ended` deliveries for the stalled callers' agent (slow-clients). */
  let stalledWebhooks = 0;
  let stalledAgent = '';
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (body.includes('call.ended')) {
        if (stalledAgent && body.includes(stalledAgent)) stalledWebhooks++;
        else webhooks++;
      }
      res.end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const hookPort = (receiver.address() as { port: number }).port;
  process.env.PARLEY_OUTBOUND_ALLOW = `127.0.0.1:${hookPort}`; // the agent's webhook URL is checked with it

  const deafMs: number[] = [];
  /** The platform's 4008 closes of stalled callers, when it logged them. */
  const stallCloses: { sessionId: string; at: number }[] = [];
  let errorLogs = 0;
  const errorLines: string[] = [];
  const warnings: Record<string, number> = {};
  const platform = await startPlatform({
    env: { ...process.env, ...(disk ? { PARLEY_RECORDINGS_DIR: disk.dir } : {}) },
    config: {
      host: '127.0.0.1', port: 0, dataDir: 'memory', bootstrapKey: key, logLevel: 'error',
      startNativeBackend: true, speechEngine: 'synthetic', maxSessions: 100_000,
      databaseUrl, redisUrl,
      outboundAllow: [`127.0.0.1:${hookPort}`],
    },
    statePrefix,
    dbSchema,
    // Sessions log when they reopen a lost recognizer, with how long they were deaf.
    log: createLogger({ level: 'info', destination: { write: (line: string) => {
      if (line.includes('recognizer reopened')) deafMs.push(JSON.parse(line).lost_ms);
      else if (line.includes('websocket client not reading')) {
        stallCloses.push({ sessionId: JSON.parse(line).sessionId, at: Date.now() });
        warnings['websocket client not reading: closed 4008, resume allowed'] = (warnings['websocket client not reading: closed 4008, resume allowed'] ?? 0) + 1;
      }
      else if (line.includes('"level":40')) {
        const l = JSON.parse(line);
        const k = `${l.msg}${l.err?.code ? ` (${l.err.code})` : ''}`;
        warnings[k] = (warnings[k] ?? 0) + 1;
      }
      else if (line.includes('"level":50') || line.includes('"level":60')) {
        errorLogs++;
        if (errorLines.length < 5) {
          const l = JSON.parse(line);
          errorLines.push(`${l.msg}: ${l.err?.message ?? ''} ${(l.err?.stack ?? '').split('\n').slice(1, 4).join(' | ')}`);
        }
      }
    } } }),
  });
  const backend = platform.nativeBackend!;
  /** What the node holds: live sessions (its gauge) and the event loop's active resources by type. */
  const liveCounts = () => {
    const resources: Record<string, number> = {};
    for (const t of process.getActiveResourcesInfo()) resources[t] = (resources[t] ?? 0) + 1;
    return { sessions_live: platform.runtime.supervisor.size, resources };
  };
  let slowChild: ReturnType<typeof benchChild> | null = null;
  // slow-clients, as it goes: the crowds and stalled callers held, when the crowds were told to
  // stop, their reports, and when the last slow client was gone.
  const sl: { held: { held: { held: number; failed: number }[]; stalled: { id: string; at: number }[] } | null; heldAt: number; crowdsStoppedAt: number; crowds: CrowdReport[] | null; goneAt: number | null; stalled: StalledReport | null; memHeld?: ReturnType<typeof memoryAfterGc> } = { held: null, heldAt: 0, crowdsStoppedAt: 0, crowds: null, goneAt: null, stalled: null };
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
  const j = await post('/v1/agent/agents', { name: 'chaos-joiner', config: { prompt: { first_message_mode: 'off' } } });
  const joinAgent = j.agent_id as string;
  await post(`/v1/agent/agents/${joinAgent}/publish`);

  const child = fork(fileURLToPath(import.meta.url), [], { env: { ...process.env, CHAOS_ROLE: 'load', CHAOS_LOAD: JSON.stringify({ url: platform.url, key, agent, joinAgent, sessions, streams }) }, execArgv: ['--import=tsx'] });
  if (slowClients) {
    // The stalled callers' agent: an opener of ~10 minutes, paced in real time, so the kernel's
    // buffers (a few MB) fill and the platform sees the stall; post-call webhooks too.
    const opener = 'This is a very long opening message that the caller will never read. '.repeat(140);
    const st = await post('/v1/agent/agents', { name: 'chaos-stalled', config: { prompt: { first_message_mode: 'fixed', first_message: opener }, webhooks: { post_call: [{ url: `http://127.0.0.1:${hookPort}/hook` }] } } });
    stalledAgent = st.agent_id as string;
    await post(`/v1/agent/agents/${stalledAgent}/publish`);
  }
  // The platform's memory (this process), sampled through the run without forcing a GC.
  const memSamples: { at: number; rss: number; heapExternal: number }[] = [];
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    memSamples.push({ at: Date.now(), rss: m.rss, heapExternal: m.heapUsed + m.external });
  }, 250);
  const held = await new Promise<number>((r) => child.once('message', (m: any) => r(m.sessions)));
  const t0 = Date.now();
  let memBefore: ReturnType<typeof memoryAfterGc> | null = null;
  let liveBefore: ReturnType<typeof liveCounts> | null = null;
  if (slowClients) {
    if (cpuDir && faultAtS >= 25) {
      await sleep(faultAtS * 1000 - 22_000);
      await cpuProfile(20_000, join(cpuDir, 'before.cpuprofile'));
    } else await sleep(faultAtS * 1000 - 2000);
    memBefore = memoryAfterGc();
    liveBefore = liveCounts();
    // `--heap-dir`: heap snapshots before and after the grace, to diff (the write stalls the
    // node for seconds: the before window is then disturbed; for finding what stays, not figures).
    if (heapDir) v8.writeHeapSnapshot(join(heapDir, 'before.heapsnapshot'));
    await sleep(2000);
  } else await sleep(faultAtS * 1000);

  // The fault.
  const pid = backend.status().pid!;
  const killedAt = Date.now();
  child.send({ type: 'fault', at: killedAt, askAgain: !slowClients });
  let restoredAt: number | null = null;
  let keysDeleted: number | null = null;
  if (proxy) {
    await (silent ? proxy.blackhole() : proxy.cut());
    void sleep(cutS * 1000).then(async () => {
      // A Redis restarted without persistence comes back empty: the node's keys are gone.
      if (direct && !silent) {
        const keys = await direct.keys(`${statePrefix}*`);
        keysDeleted = keys.length;
        if (keys.length) await direct.del(...keys);
      }
      await proxy.restore();
      restoredAt = Date.now();
    });
  } else if (restart && target) {
    // The real Redis: shut down without saving, started again after the cut.
    const host = target.hostname, port = target.port || '6379';
    try {
      execFileSync('redis-cli', ['-h', host, '-p', port, 'shutdown', 'nosave'], { stdio: 'ignore' });
    } catch {
      // redis-cli reports the connection closing under it
    }
    void sleep(cutS * 1000).then(async () => {
      execFileSync('redis-server', ['--daemonize', 'yes', '--bind', host, '--port', port, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      const probe = new Redis({ host, port: Number(port), lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
      for (;;) {
        const ok = await probe.ping().then(() => true, () => false);
        if (ok) break;
        await sleep(20);
      }
      probe.disconnect();
      restoredAt = Date.now();
    });
  } else if (disk) {
    fillDisk(join(disk.dir, 'filler'));
    restoredAt = null;
  } else if (slowClients) {
    slowChild = benchChild(fileURLToPath(import.meta.url), { CHAOS_ROLE: 'slow', CHAOS_SLOW: JSON.stringify({ url: platform.url, key, agent: stalledAgent, ...slowPlan } satisfies SlowPlan) });
    const sc = slowChild;
    sc.proc.on('message', (m: any) => {
      if (m.type === 'held') {
        sl.held = m;
        sl.heldAt = Date.now();
        // Every crowd connection and stalled caller held (the first close comes ~10 s after the first open).
        sl.memHeld = memoryAfterGc();
      } else if (m.type === 'crowds-done') sl.crowds = m.crowds;
      else if (m.type === 'stalled') sl.stalled = m.stalled;
    });
    if (cpuDir) void sleep(10_000).then(() => cpuProfile(20_000, join(cpuDir, 'crowds.cpuprofile')));
    void sleep(slowPlan.crowdS * 1000).then(() => {
      sl.crowdsStoppedAt = Date.now();
      sc.send({ type: 'stop-crowds' });
    });
  } else process.kill(pid, 'SIGKILL');
  const healthDuring: string[] = [];
  // `/ready` as a load balancer sees it: each change, ms after the fault began.
  const readyDuring: { at_ms: number; status: number | string; down: string[] }[] = [];
  let backAt: number | null = null;
  while (Date.now() - t0 < seconds * 1000) {
    // slow-clients: done 15 s after the crowds have ended and every stalled caller was closed.
    if (slowClients && sl.crowds && sl.held && stallCloses.length >= sl.held.stalled.length) {
      sl.goneAt ??= Math.max(sl.crowdsStoppedAt, sl.crowds.reduce((x, c) => Math.max(x, c.lastClosedAt), 0), stallCloses.at(-1)?.at ?? 0);
      if (Date.now() - sl.goneAt > 15_000) break;
    }
    const ready = await fetch(`${platform.url}/ready`, { signal: AbortSignal.timeout(5000) }).then(async (r) => {
      const b = (await r.json().catch(() => null)) as { components?: Record<string, { status: string; detail?: string }> } | null;
      const down = Object.entries(b?.components ?? {}).filter(([, c]) => c.status === 'down').map(([n, c]) => `${n}: ${c.detail ?? ''}`.slice(0, 80));
      return { status: r.status, down };
    }, () => ({ status: 'no answer' as const, down: [] as string[] }));
    const last = readyDuring.at(-1);
    if (last?.status !== ready.status || String(last?.down) !== String(ready.down)) readyDuring.push({ at_ms: Date.now() - killedAt, ...ready });
    const h = (await (await fetch(`${platform.url}/health`)).json().catch(() => null)) as any;
    const nb = h?.components?.native_backend;
    const st = nb ? `${nb.status}: ${nb.detail ?? ''}` : 'unknown';
    if (healthDuring.at(-1) !== st) healthDuring.push(st);
    if (backAt === null && backend.status().running && backend.status().pid !== pid) backAt = Date.now();
    await sleep(100);
  }

  clearInterval(sampler);
  // After: the platform's memory once the slow ones are gone (forced GC), before the load stops.
  const memAfter = slowClients ? memoryAfterGc() : null;
  const liveAfter = slowClients ? liveCounts() : null;
  const endAt = Date.now();
  // After the grace: the stalled callers' sessions wait `PARLEY_SESSION_RESUME_GRACE`-long (30 s)
  // for a resume once closed 4008; memory read again once every one has ended (the load still
  // running), so what the stalled sessions held and what anything else kept are told apart.
  let memAfterGrace: ReturnType<typeof memoryAfterGc> | null = null;
  let liveAfterGrace: ReturnType<typeof liveCounts> | null = null;
  let afterGraceAt: number | null = null;
  if (slowClients && stalledAgent) {
    const activeStalled = async () => Number((await platform.db.sql`select count(*)::int as n from sessions where agent_id = ${stalledAgent} and status in ('pending', 'active')`)[0]!.n);
    for (let i = 0; i < 600 && (await activeStalled()) > 0; i++) await sleep(100);
    await sleep(5000); // the ended sessions' last writes and webhooks
    memAfterGrace = memoryAfterGc();
    liveAfterGrace = liveCounts();
    afterGraceAt = Date.now();
    if (heapDir) v8.writeHeapSnapshot(join(heapDir, 'after-grace.heapsnapshot'));
  }
  if (slowChild) {
    slowChild.send({ type: 'finish' });
    while (!sl.stalled) await sleep(100);
  }
  child.send({ type: 'stop' });
  const report = await new Promise<LoadReport>((r) => child.on('message', (m: any) => { if (m.type === 'report') r(m.report); }));
  // Post-call webhooks of every session, delivered once the sessions have ended.
  const ended = Number((await platform.db.sql`select count(*)::int as n from sessions where agent_id = ${agent} and status in ('completed', 'failed')`)[0]!.n);
  for (let i = 0; i < 150 && webhooks < ended; i++) await sleep(100);
  report.webhooks = { received: webhooks, sessionsEnded: ended };

  /** slow-clients: memory, the healthy callers' latency by window, how the slow ones ended. */
  async function slowClientsReport() {
    const mb = (b: number) => round(b / 2 ** 20, 1);
    const crowdsEnd = Math.max(killedAt, ...(sl.crowds ?? []).map((c) => c.lastClosedAt));
    const lastStall = stallCloses.at(-1)?.at ?? endAt;
    const gone = sl.goneAt ?? endAt;
    const windows = { before: [t0 + 5000, killedAt], crowds: [killedAt, crowdsEnd], stalled_only: [crowdsEnd, Math.max(crowdsEnd, lastStall)], during: [killedAt, gone], after: [gone, endAt] } as const;
    const summary = (xs: [number, number][]) => Object.fromEntries(Object.entries(windows).map(([k, [a, b]]) => {
      const v = xs.filter(([at]) => at >= a && at < b).map(([, ms]) => ms).sort((x, y) => x - y);
      return [k, { n: v.length, p50: v.length ? percentile(v, 50) : null, p99: v.length ? percentile(v, 99) : null, max: v.at(-1) ?? null }];
    }));
    const during = memSamples.filter((m) => m.at >= killedAt && m.at <= gone);
    const beforeSamples = memSamples.filter((m) => m.at >= killedAt - 10_000 && m.at < killedAt - 2500);
    // The stalled callers' sessions: ended after their grace (30 s) once dropped; waited for here.
    const stalledRows = async () => platform.db.sql<{ k: string; n: number }[]>`
      select status || ' / ' || coalesce(ended_reason, '') as k, count(*)::int as n from sessions where agent_id = ${stalledAgent} and started_at is not null group by 1`;
    let rows = await stalledRows();
    for (let i = 0; i < 450 && rows.some((r) => r.k.startsWith('active')); i++) {
      await sleep(100);
      rows = await stalledRows();
    }
    const stalledEnded = rows.filter((r) => !r.k.startsWith('active')).reduce((n, r) => n + Number(r.n), 0);
    for (let i = 0; i < 100 && stalledWebhooks < stalledEnded; i++) await sleep(100);
    const opened = new Map((sl.held?.stalled ?? []).map((x) => [x.id, x.at]));
    const closedAfter = stallCloses.filter((c) => opened.has(c.sessionId)).map((c) => c.at - opened.get(c.sessionId)!).sort((x, y) => x - y);
    return {
      plan: { stalled: slowPlan.stalled, idle_ws: slowPlan.idleWs, slowloris: slowPlan.slowloris, crowd_seconds: slowPlan.crowdS },
      timeline_s_after_fault: { crowds_held: sl.heldAt ? round((sl.heldAt - killedAt) / 1000, 1) : null, crowds_told_to_stop: sl.crowdsStoppedAt ? round((sl.crowdsStoppedAt - killedAt) / 1000, 1) : null, crowds_ended: round((crowdsEnd - killedAt) / 1000, 1), last_stalled_closed: stallCloses.length ? round((lastStall - killedAt) / 1000, 1) : null, end: round((endAt - killedAt) / 1000, 1) },
      crowds_first_held: sl.held?.held,
      crowds: sl.crowds,
      stalled: {
        sessions: opened.size,
        refused: sl.stalled?.refused,
        closed_4008_by_platform: closedAfter.length,
        // From the caller's last read (it paused at once) to the platform's 4008, on the platform's log.
        closed_after_ms: closedAfter.length ? { min: closedAfter[0], p50: percentile(closedAfter, 50), max: closedAfter.at(-1) } : null,
        client_saw_when_reading_again: sl.stalled?.closes,
        no_close_frame: sl.stalled?.no_close_frame,
        records: Object.fromEntries(rows.map((r) => [r.k, Number(r.n)])),
        webhooks: { received: stalledWebhooks, sessions_ended: stalledEnded },
      },
      memory_mb: {
        // Before (forced GC, 2 s before the fault) / held (forced GC, once every crowd connection
        // and stalled caller was open) / after (forced GC, ~15 s after the last slow client was
        // gone); the peaks, sampled every 250 ms without a forced GC (garbage included): the
        // 7.5 s before the fault's GC, and while the slow clients were there.
        // after_grace (forced GC): once every stalled caller's session had ended (their 30 s
        // resume grace after the 4008 expired) and 5 s more, the load still running.
        heap_plus_external: { before: memBefore ? mb(memBefore.heapExternal) : null, held: sl.memHeld ? mb(sl.memHeld.heapExternal) : null, peak_before: beforeSamples.length ? mb(Math.max(...beforeSamples.map((m) => m.heapExternal))) : null, peak: during.length ? mb(Math.max(...during.map((m) => m.heapExternal))) : null, after: memAfter ? mb(memAfter.heapExternal) : null, after_grace: memAfterGrace ? mb(memAfterGrace.heapExternal) : null },
        rss: { before: memBefore ? mb(memBefore.rss) : null, held: sl.memHeld ? mb(sl.memHeld.rss) : null, peak_before: beforeSamples.length ? mb(Math.max(...beforeSamples.map((m) => m.rss))) : null, peak: during.length ? mb(Math.max(...during.map((m) => m.rss))) : null, after: memAfter ? mb(memAfter.rss) : null, after_grace: memAfterGrace ? mb(memAfterGrace.rss) : null },
        after_grace_s_after_fault: afterGraceAt ? round((afterGraceAt - killedAt) / 1000, 1) : null,
        // Live sessions on the node and the event loop's active resources (handles, timers that
        // keep it alive) at each reading.
        live: { before: liveBefore, after: liveAfter, after_grace: liveAfterGrace },
      },
      healthy: {
        windows_s_after_fault: Object.fromEntries(Object.entries(windows).map(([k, [a, b]]) => [k, [round((a - killedAt) / 1000, 1), round((b - killedAt) / 1000, 1)]])),
        turn_latency_ms: summary(report.timed.turns),
        unanswered_questions: report.timed.unanswered,
        tts_first_byte_ms: summary(report.timed.ttfb),
      },
    };
  }
  // Records: every session someone joined must be ended, with the caller's turns stored.
  const records = (await platform.db.sql`
    select count(*) filter (where status in ('pending', 'active'))::int as not_ended,
           count(*) filter (where status in ('completed', 'failed') and not exists (
             select 1 from session_items i where i.session_id = s.id and i.type = 'message' and i.payload->>'role' = 'user'))::int as without_items,
           count(*)::int as joined
    from sessions s where agent_id = ${agent} and started_at is not null`)[0] as { not_ended: number; without_items: number; joined: number };
  // Recordings: every track of an ended session settled (complete or failed with a reason);
  // tracks settle after the session's end (files closed, rows retried): up to 15 s more.
  const unsettled = async () => Number((await platform.db.sql`select count(*)::int as n from session_recordings where status = 'active'`)[0]!.n);
  for (let i = 0; i < 150 && (await unsettled()) > 0; i++) await sleep(100);
  const recTracks = (await platform.db.sql`
    select count(*)::int as tracks, count(*) filter (where r.status = 'active')::int as unsettled,
           count(*) filter (where r.status = 'failed')::int as failed
    from session_recordings r join sessions s on s.id = r.session_id where s.status in ('completed', 'failed')`)[0] as { tracks: number; unsettled: number; failed: number };
  // Per ended session: its recording's outcome (every track complete; failed and why).
  const recOutcomes = disk ? Object.fromEntries((await platform.db.sql<{ outcome: string; n: number }[]>`
    select outcome, count(*)::int as n from (
      select s.id, case when bool_and(r.status = 'complete') then 'complete'
                        else 'failed: ' || coalesce(string_agg(distinct r.error_code, ','), 'no code') end as outcome
      from sessions s join session_recordings r on r.session_id = s.id
      where s.agent_id = ${agent} and s.status in ('completed', 'failed') group by s.id) x group by 1`).map((r) => [r.outcome, Number(r.n)])) : undefined;
  const sessionStatuses = disk ? Object.fromEntries((await platform.db.sql<{ k: string; n: number }[]>`
    select status || ' / ' || coalesce(ended_reason, '') as k, count(*)::int as n from sessions where agent_id = ${agent} and started_at is not null group by 1`).map((r) => [r.k, Number(r.n)])) : undefined;
  // Turns: each final transcript a caller received must be in its record.
  const stored = await platform.db.sql<{ session_id: string; role: string; n: number }[]>`
    select session_id, payload->>'role' as role, count(*)::int as n from session_items
    where type = 'message' and session_id in (select id from sessions where agent_id = ${agent}) group by 1, 2`;
  const storedBy = new Map(stored.map((r) => [`${r.session_id}/${r.role}`, Number(r.n)]));
  const turns = { heard: 0, stored: 0, missing: 0, missing_user: 0, missing_agent: 0, sessions_missing: 0 };
  const missingSessions: { id: string; heard: { user: number; agent: number }; stored: { user: number; agent: number }; heard_texts?: [string, string][]; stored_texts?: [string, string][] }[] = [];
  let emptyAgentFinals = 0;
  for (const texts of Object.values(report.heardTexts)) emptyAgentFinals += texts.filter(([r, x]) => r === 'agent' && !x).length;
  for (const [id, h] of Object.entries(report.heard)) {
    const u = storedBy.get(`${id}/user`) ?? 0;
    const a = storedBy.get(`${id}/assistant`) ?? 0;
    turns.heard += h.user + h.agent;
    turns.stored += u + a;
    const miss = Math.max(0, h.user - u) + Math.max(0, h.agent - a);
    turns.missing += miss;
    turns.missing_user += Math.max(0, h.user - u);
    turns.missing_agent += Math.max(0, h.agent - a);
    if (miss) turns.sessions_missing++;
    if (miss && missingSessions.length < 5) {
      const rows = await platform.db.sql<{ role: string; content: string }[]>`select payload->>'role' as role, payload->>'content' as content from session_items where session_id = ${id} and type = 'message' order by seq`;
      missingSessions.push({ id, heard: h, stored: { user: u, agent: a }, heard_texts: report.heardTexts[id], stored_texts: rows.map((r) => [r.role, r.content]) });
    }
  }
  // Tokens refused at first and presented again: what the store says of their sessions.
  const retriedFates: Record<string, number> = {};
  for (const x of report.retried) {
    const [row] = await platform.db.sql<{ status: string; started: boolean; expires_at: Date; node: string | null }[]>`select status, started_at is not null as started, expires_at, node_id as node from sessions where id = ${x.session_id}`;
    const k = `first ${x.first} then ${x.then}: ${row ? `${row.status}${row.started ? ' started' : ''}${new Date(row.expires_at).getTime() <= x.at ? ' expired when retried' : ''}` : 'no row'}`;
    retriedFates[k] = (retriedFates[k] ?? 0) + 1;
  }

  const slowReport = slowClients ? await slowClientsReport() : undefined;
  const rec = report.sessions.recoveryMs.sort((x, y) => x - y);
  process.stdout.write(`${JSON.stringify({
    bench: 'chaos', fault, date: new Date().toISOString(), cores: os.cpus().length, load_average_1m: round(os.loadavg()[0]!),
    store: process.env.DATABASE_URL ? 'postgres' : 'pglite', db_schema: dbSchema, shared_state: process.env.REDIS_URL ? 'redis' : 'memory',
    sessions_held: held, streams, fault_at_s: faultAtS, seconds,
    backend: { killed_pid: pid, restarted_in_ms: backAt === null ? null : backAt - killedAt, restarts: backend.status().restarts, health_native_backend: healthDuring },
    sessions: {
      ...report.sessions, recoveryMs: undefined,
      recovery_ms: rec.length ? { p50: round(percentile(rec, 50)), p90: round(percentile(rec, 90)), max: rec.at(-1) } : null,
      // On the platform's clock: from a session's recognizer stream breaking to a new one open.
      recognizer_reopened: deafMs.length, deaf_ms: deafMs.length ? { p50: round(percentile(deafMs.sort((x, y) => x - y), 50)), p90: round(percentile(deafMs, 90)), max: deafMs.at(-1) } : null,
    },
    ...(restart ? { redis: { mode: 'restart', down_ms: cutS * 1000, restored_after_ms: restoredAt === null ? null : restoredAt - killedAt } } : {}),
    ...(proxy ? { [dependency!]: { mode: silent ? 'blackhole' : 'cut', cut_ms: cutS * 1000, restored_after_ms: restoredAt === null ? null : restoredAt - killedAt, keys_deleted: keysDeleted } } : {}),
    ready: readyDuring,
    ...(disk ? { disk: { mb: arg('disk-mb', 256), sessions_by_status: sessionStatuses, recordings_by_outcome: recOutcomes } } : {}),
    records: { ...records, turns: { ...turns, empty_agent_finals_heard: emptyAgentFinals, first_sessions_missing: missingSessions }, recordings: recTracks, webhooks_lost: Math.max(0, ended - webhooks) },
    tokens: { ...report.tokens, retried: retriedFates },
    error_log_lines: errorLogs,
    error_logs: errorLines,
    warnings,
    tts: report.tts,
    webhooks: report.webhooks,
    ...(slowReport ? { slow_clients: slowReport } : {}),
  }, null, 2)}\n`);
  child.kill();
  await platform.close();
  await proxy?.close();
  disk?.unmount();
  direct?.disconnect();
  receiver.close();
  process.exit(0);
}

if (process.env.CHAOS_ROLE === 'load') void load();
else if (process.env.CHAOS_ROLE === 'slow') void slow();
else void main();
