/**
 * One text-only run of an agent against a scripted user (docs/api/agent-tests.md): the session actor itself
 * (`startSession`), with the agent's prompt, tools and knowledge, driven by `user.message`
 * events with `audio: false` — so every turn is text in and text out, and every webhook tool
 * runs as `blocking` (the actor's rule for text-only turns). No transcription or synthesis is
 * opened: the backend's speech streams here are silent stand-ins, only `generate` reaches the
 * inference backend. The opener (first message) is part of the run, as text.
 */
import { realClock, type Clock } from '../../actors/clock.ts';
import { startSession } from '../../actors/session.ts';
import type { SessionBackend, SessionItem, SessionPlan, SessionTool, SttStream, TtsStream } from '../../actors/types.ts';
import type { Logger } from '../log.ts';

/** How long one agent turn of a test may take (tool calls included). */
export const TEST_TURN_TIMEOUT_MS = 120_000;

/** A transcription stream that never hears anything (text-only runs). */
function silentStt(): SttStream {
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  return {
    sendAudio() {},
    end: () => stop(),
    cancel: () => stop(),
    async *[Symbol.asyncIterator]() {
      await stopped;
    },
  };
}

/** A synthesis stream that speaks nothing (text-only runs): the turn's text is what counts. */
function silentTts(): TtsStream {
  let stop!: () => void;
  const stopped = new Promise<void>((r) => (stop = r));
  return {
    send() {},
    flush() {},
    end: () => stop(),
    cancel: () => stop(),
    async *[Symbol.asyncIterator]() {
      await stopped;
    },
  };
}

/** The backend with silent speech streams: only `generate` is real. */
export function textOnlyBackend(backend: Pick<SessionBackend, 'generate'>): SessionBackend {
  return {
    generate: (o) => backend.generate(o),
    transcribe: async () => silentStt(),
    synthesize: async () => silentTts(),
  };
}

export interface TextRunInput {
  plan: SessionPlan;
  backend: Pick<SessionBackend, 'generate'>;
  tools?: SessionTool[];
  retrieve?: (query: string, signal: AbortSignal) => Promise<string[]>;
  userTurns: string[];
  clock?: Clock;
  log?: Logger;
  turnTimeoutMs?: number;
}

export interface TextRunResult {
  /** The record of the run, as a session detail shows it: messages, tool calls and results. */
  items: SessionItem['payload'][];
  /** User and assistant messages in order. */
  transcript: { role: 'user' | 'assistant'; content: string }[];
  /** Why the run stopped early (a turn timed out, the session ended), or null. */
  error: string | null;
}

/** Runs the conversation; resolves once every user turn has been answered (or the run stopped). */
export async function runTextConversation(i: TextRunInput): Promise<TextRunResult> {
  const items: SessionItem['payload'][] = [];
  let idles = 0;
  let wake: (() => void) | null = null;
  const plan: SessionPlan = { ...i.plan, reengage: null, toolEvents: true };
  const handle = startSession(plan, {
    backend: textOnlyBackend(i.backend),
    tools: i.tools,
    retrieve: i.retrieve,
    output: {
      message: (m) => {
        if (m.topic !== 'lk.agent.state') return;
        if (m.state === 'idle') idles++;
        wake?.();
      },
      audio: () => {},
    },
    record: (list) => {
      for (const it of list) items.push({ ...it.payload, type: it.type });
    },
    clock: i.clock ?? realClock,
    log: i.log,
  });
  let ended: string | null = null;
  void handle.ended.then((e) => {
    ended = e.reason;
    wake?.();
  });
  const timeoutMs = i.turnTimeoutMs ?? TEST_TURN_TIMEOUT_MS;
  /** Waits until the agent has been idle `n` times (each turn ends idle). */
  const idleCount = async (n: number): Promise<string | null> => {
    const deadline = Date.now() + timeoutMs;
    while (idles < n && !ended) {
      const left = deadline - Date.now();
      if (left <= 0) return 'The agent did not answer in time';
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
    // The agent hanging up is its own behaviour (the criteria judge it); any other end is not.
    if (ended !== null && idles < n && ended !== 'agent_hangup') return `The conversation ended early (${ended})`;
    return null;
  };

  let error = await idleCount(1); // the opener, or none
  for (const turn of i.userTurns) {
    if (error || ended !== null) break;
    const before = idles;
    handle.send({ type: 'user.message', text: turn, audio: false });
    error = await idleCount(before + 1);
  }
  handle.end('test_finished');
  await handle.ended;
  const transcript = items
    .filter((it) => it.type === 'message' && (it.role === 'user' || it.role === 'assistant'))
    .map((it) => ({ role: it.role as 'user' | 'assistant', content: String(it.content ?? '') }));
  return { items, transcript, error };
}
