/** Helpers for end-to-end session tests: a caller that speaks synthetic audio and hears the agent. */
import WebSocket from 'ws';
import { TestClock } from '../../actors/clock.ts';
import { decodeAudio, encodeText } from '../../native/engines/synthetic/modem.ts';
import { start, type Conversation, type StartOptions, type Transcript } from '../../src/client/index.ts';
import type { TestServer } from '../helpers/server.ts';
import { makeAgent, type AgentSetup } from '../agent/sessions-helpers.ts';

export const RATE = 16_000;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Creates a session through the real endpoint; throws unless 200. */
export async function createSession(app: TestServer, agentId: string, extra: Record<string, unknown> = {}) {
  const r = await app.req('POST', '/v1/agent/sessions', { agent_id: agentId, ...extra });
  if (r.status !== 200) throw new Error(`create session: ${r.status} ${r.text}`);
  return r.body;
}

/** A connected caller: the SDK conversation plus what it heard. */
export interface Caller {
  convo: Conversation;
  transcripts: Transcript[];
  states: string[];
  /** Agent audio received since the last `resetAudio()`. */
  audio(): Int16Array;
  resetAudio(): void;
  /** What the agent audio received since the last reset says. */
  heard(): string;
  /** Speaks `text` as synthetic speech in real time, then `silenceMs` of silence. */
  speak(text: string, silenceMs?: number): Promise<void>;
  /**
   * Sends the same audio as `speak` at once (100 ms pieces, not paced). The recognizer times
   * speech by the audio's own timeline, so the turn is the same; a test that is not about
   * pacing then does not wait on (or depend on) this process's timers under load.
   */
  speakAtOnce(text: string, silenceMs?: number): void;
  finals(role?: 'user' | 'agent'): string[];
  waitFor(pred: () => boolean, timeoutMs?: number, what?: string): Promise<void>;
}

/** `text` as synthetic speech followed by `silenceMs` of silence, at RATE. */
function utterance(text: string, silenceMs: number): Int16Array {
  const speech = encodeText(text, { sampleRateHz: RATE }).pcm;
  const all = new Int16Array(speech.length + (silenceMs * RATE) / 1000);
  all.set(speech);
  return all;
}

export async function connect(session: Record<string, unknown>, options: StartOptions = {}): Promise<Caller> {
  let chunks: Int16Array[] = [];
  const transcripts: Transcript[] = [];
  const states: string[] = [];
  const convo = await start(session as never, { ...options, onAudio: (pcm) => chunks.push(pcm.slice()) });
  convo.on('transcript', (t) => transcripts.push(t));
  convo.on('state', (s) => states.push(s));
  const audio = () => {
    const n = chunks.reduce((k, c) => k + c.length, 0);
    const out = new Int16Array(n);
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
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}; states ${states.join(',')}; transcripts ${JSON.stringify(transcripts.filter((t) => t.final))}`);
      await sleep(20);
    }
  };
  return {
    convo,
    transcripts,
    states,
    audio,
    resetAudio: () => { chunks = []; },
    heard: () => decodeAudio(audio(), RATE)?.text ?? '',
    finals: (role) => transcripts.filter((t) => t.final && (!role || t.role === role)).map((t) => t.text),
    waitFor,
    async speak(text, silenceMs = 900) {
      const all = utterance(text, silenceMs);
      const step = RATE / 10; // 100 ms per send, in real time
      const t0 = Date.now();
      for (let i = 0, k = 0; i < all.length; i += step, k++) {
        convo.sendAudio(all.subarray(i, Math.min(all.length, i + step)));
        const due = t0 + (k + 1) * 100 - Date.now();
        if (due > 0) await sleep(due);
      }
    },
    speakAtOnce(text, silenceMs = 900) {
      const all = utterance(text, silenceMs);
      for (let i = 0; i < all.length; i += RATE / 10) convo.sendAudio(all.subarray(i, Math.min(all.length, i + RATE / 10)));
    },
  };
}

export async function agentWith(app: TestServer, config: Record<string, unknown>, extra: Partial<AgentSetup> = {}) {
  return makeAgent(app, { config, ...extra });
}

/** The session record once `until` holds (by default: the session ended); throws after ~5-10 s. */
export async function sessionRecord(app: TestServer, id: string, until: (b: any) => boolean = (b) => b.status === 'completed' || b.status === 'failed') {
  for (let i = 0; i < 200; i++) {
    const r = await app.req('GET', `/v1/agent/sessions/${id}`);
    if (until(r.body)) return r.body;
    await sleep(50);
  }
  throw new Error('record did not settle');
}

/** A raw socket to the websocket transport: its JSON messages, its close, and the session's start on it. */
export function rawSocket(url: string) {
  const ws = new WebSocket(url);
  const messages: any[] = [];
  const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
  ws.on('message', (data, isBinary) => { if (!isBinary) messages.push(JSON.parse(data.toString())); });
  ws.on('error', () => {});
  const started = async () => {
    for (let i = 0; i < 300 && !messages.some((m) => m.type === 'session.started'); i++) await sleep(20);
    return messages.find((m) => m.type === 'session.started');
  };
  return { ws, messages, closed, started };
}

/**
 * Runs the server's session runtime on a test clock (real time, plus what the test advances)
 * until the test ends; sessions started after the call use it.
 */
export function useTestClock(t: { teardown(fn: () => unknown): void }, app: TestServer): TestClock {
  const runtime = app.runtime;
  const clock = new TestClock({ realtime: true });
  const real = runtime.clock;
  runtime.clock = clock;
  t.teardown(() => {
    runtime.clock = real;
    clock.close();
  });
  return clock;
}
