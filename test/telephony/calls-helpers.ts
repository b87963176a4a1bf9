/** Helpers for call tests: sandbox phones (WebSocket clients) that speak and hear 8 kHz audio. */
import WebSocket from 'ws';
import { decodeAudio, encodeText } from '../../native/engines/synthetic/modem.ts';
import type { TestServer } from '../helpers/server.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { sandboxNumber } from './helpers.ts';
import { listCallTransfers } from '../../src/phone-calls/store.ts';

export const PHONE_RATE = 8_000;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface Phone {
  ws: WebSocket;
  events: Record<string, any>[];
  /** Audio received since the last `resetAudio()`. */
  audio(): Int16Array;
  resetAudio(): void;
  /** What the audio received since the last reset says (the synthetic recognizer, at 8 kHz). */
  heard(): string;
  send(m: Record<string, unknown>): void;
  /** Speaks `text` as synthetic speech at 8 kHz in real time, then `silenceMs` of silence. */
  speak(text: string, silenceMs?: number): Promise<void>;
  /** Sends silence in real time for `ms` (the recognizer needs a continuous stream). */
  silence(ms: number): Promise<void>;
  event(type: string, timeoutMs?: number, nth?: number): Promise<Record<string, any>>;
  waitFor(pred: () => boolean, timeoutMs?: number, what?: string): Promise<void>;
  closed: Promise<{ code: number; reason: string }>;
  close(): void;
}

/** Opens a sandbox phone: `{dial, from}` calls a number; `{line}` registers a phone line. */
export async function phone(app: TestServer, q: { dial: string; from: string } | { line: string }, key = app.key): Promise<Phone> {
  const params = new URLSearchParams(q as Record<string, string>);
  const ws = new WebSocket(`${app.url.replace(/^http/, 'ws')}/v1/telephony/sandbox/calls?${params}`, { headers: { Authorization: `Bearer ${key}` } });
  let chunks: Int16Array[] = [];
  const events: Record<string, any>[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  ws.on('message', (data, isBinary) => {
    const buf = data as Buffer;
    if (isBinary) {
      const copy = new Uint8Array(buf.byteLength);
      copy.set(buf);
      chunks.push(new Int16Array(copy.buffer));
    } else events.push(JSON.parse(buf.toString('utf8')));
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const audio = () => {
    const out = new Int16Array(chunks.reduce((n, c) => n + c.length, 0));
    let o = 0;
    for (const c of chunks) {
      out.set(c, o);
      o += c.length;
    }
    return out;
  };
  const waitFor = async (pred: () => boolean, timeoutMs = 15_000, what = 'condition') => {
    const until = Date.now() + timeoutMs;
    while (!pred()) {
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; events ${JSON.stringify(events)}`);
      await sleep(20);
    }
  };
  const stream = async (pcm: Int16Array) => {
    const step = PHONE_RATE / 10; // 100 ms per frame, in real time
    const t0 = Date.now();
    for (let i = 0, k = 0; i < pcm.length; i += step, k++) {
      if (ws.readyState !== WebSocket.OPEN) return;
      ws.send(pcm.subarray(i, Math.min(pcm.length, i + step)));
      const due = t0 + (k + 1) * 100 - Date.now();
      if (due > 0) await sleep(due);
    }
  };
  return {
    ws,
    events,
    audio,
    resetAudio: () => {
      chunks = [];
    },
    heard: () => decodeAudio(audio(), PHONE_RATE)?.text ?? '',
    send: (m) => ws.send(JSON.stringify(m)),
    async speak(text, silenceMs = 900) {
      const speech = encodeText(text, { sampleRateHz: PHONE_RATE }).pcm;
      const all = new Int16Array(speech.length + (silenceMs * PHONE_RATE) / 1000);
      all.set(speech);
      await stream(all);
    },
    silence: (ms) => stream(new Int16Array((ms * PHONE_RATE) / 1000)),
    async event(type, timeoutMs = 15_000, nth = 1) {
      await waitFor(() => events.filter((e) => e.type === type).length >= nth, timeoutMs, `event ${type}`);
      return events.filter((e) => e.type === type)[nth - 1]!;
    },
    waitFor,
    closed,
    close: () => ws.close(1000),
  };
}

/** A published agent bound to a fresh sandbox number; returns both. */
/** Polls `GET /v1/agent/sessions/{id}` until `pred` holds (20 s at most); returns the session. */
export async function settleSession(app: TestServer, id: string, pred: (s: any) => boolean, what: string): Promise<Record<string, any>> {
  for (let i = 0; i < 200; i++) {
    const s = (await app.req('GET', `/v1/agent/sessions/${id}`)).body;
    if (pred(s)) return s;
    await sleep(100);
  }
  throw new Error(`session never reached: ${what}`);
}

export async function boundAgent(app: TestServer, config: Record<string, unknown>, area = '415', index = 1): Promise<{ agentId: string; number: string; numberId: string }> {
  const agentId = await makeAgent(app, { config });
  const number = sandboxNumber(area, index);
  const r = await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: number, agent_id: agentId });
  if (r.status !== 201) throw new Error(`purchase: ${r.status} ${r.text}`);
  return { agentId, number, numberId: r.body.phone_number_id };
}

/** The session of a call, once the runtime wrote it (by caller number). */
/** The human a transfer reaches (a sandbox line the tests answer). */
export const TRANSFER_HUMAN = '+13125550199';

/** An agent on a sandbox number (area 512) that may transfer to `TRANSFER_HUMAN` as `destination` says. */
export function transferAgent(app: TestServer, destination: Record<string, unknown>, index: number) {
  return boundAgent(app, {
    prompt: { first_message_mode: 'fixed', first_message: 'Hello.' },
    conversation: { eagerness: 'eager', transfer_destinations: [{ phone_number: TRANSFER_HUMAN, label: 'Sales', ...destination }] },
  }, '512', index);
}

/** The human's line, open and ready to ring (closed when the test ends). */
export async function humanLine(t: { teardown(fn: () => void): void }, app: TestServer): Promise<Phone> {
  const human = await phone(app, { line: TRANSFER_HUMAN });
  t.teardown(() => human.close());
  await human.event('line.ready');
  return human;
}

/** The session's recorded transfers, once there are any (they are written when the human leg ends). */
export async function transfersOf(app: TestServer, sessionId: string) {
  let transfers = await listCallTransfers(app.db.sql, sessionId);
  for (let i = 0; i < 100 && !transfers.length; i++) transfers = (await sleep(50), await listCallTransfers(app.db.sql, sessionId));
  return transfers;
}

export async function sessionOf(app: TestServer, callerNumber: string): Promise<Record<string, any>> {
  const r = await app.req('GET', `/v1/agent/sessions?caller_number=${encodeURIComponent(callerNumber)}&status=pending,active,completed,failed`);
  if (r.status !== 200 || !r.body.sessions.length) throw new Error(`no session for ${callerNumber}: ${r.status} ${r.text}`);
  return (await app.req('GET', `/v1/agent/sessions/${r.body.sessions[0].session_id}`)).body;
}

/** Keeps a phone's line open with silence (the recognizer needs a continuous stream) until stopped. */
export function keepAlive(p: Phone): () => Promise<void> {
  let on = true;
  const loop = (async () => {
    while (on && p.ws.readyState === p.ws.OPEN) await p.silence(200);
  })();
  return async () => {
    on = false;
    await loop;
  };
}

/** Dials `number` from `from` and waits until the agent's opener "Hello." has been heard. */
export async function connected(app: TestServer, number: string, from: string): Promise<Phone> {
  const caller = await phone(app, { dial: number, from });
  await caller.event('call.started');
  const stop = keepAlive(caller);
  await caller.waitFor(() => caller.heard() === 'Hello.', 15_000, 'the opener');
  await stop();
  caller.resetAudio();
  return caller;
}
