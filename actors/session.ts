/**
 * The session actor: one conversation, as an xstate v5 machine.
 *
 *   initializing ──stt open──► live ─────────────────────────────────────────► ended
 *                               ├ opening ──first message?──► responding | idle
 *                               ├ idle ──caller speaks──► listening
 *                               ├ listening (hearing ⇄ deciding) ──eagerness wait──► responding
 *                               └ responding (thinking → speaking) ──done──► idle | listening
 *                                   └ barge-in (interruptible, caller speaks ≥ bargeInMs) ──► listening
 *   live ──max duration | session.end | user.hangup | hang_up_call──► ended
 *
 * Audio never goes through the machine: caller frames go straight to the transcription
 * stream (`sendAudio`), the agent's audio straight from the synthesis stream through the
 * playout to the output. The machine sees the events that decide turns.
 */
import { assign, createActor, fromCallback, fromPromise, setup, type AnyActorRef } from 'xstate';
import { Playout } from './playout.ts';
import { ToolCalls, type BackgroundResult, type StartedCall } from './tool-call.ts';
import type {
  AgentState,
  ChatMessage,
  SessionDeps,
  SessionEnd,
  SessionPlan,
  SessionTool,
  SttStream,
  Timed,
  ToolSpec,
  TtsStream,
  TurnMetrics,
  TurnTimeline,
} from './types.ts';

/** Events a client sends (GAPS.md §5 `client-event`), as the actor takes them. */
export type ClientEvent =
  | { type: 'user.message'; text: string; audio?: boolean }
  | { type: 'user.activity' }
  | { type: 'user.interrupt' }
  | { type: 'user.hangup' }
  /** The client's answer to a `client_tool.call` (the runtime routes it to the tool that waits). */
  | { type: 'client_tool.result'; callId: string; result?: unknown; isError?: boolean };

export type SessionEvent =
  | ClientEvent
  | { type: 'session.end'; reason: string }
  | { type: 'stt.speech_started' }
  | { type: 'stt.committed'; text: string }
  | { type: 'stt.speech_ended'; atMs: number }
  | { type: 'stt.failed'; error: unknown }
  | { type: 'turn.speaking' }
  | { type: 'turn.done' }
  | { type: 'turn.hangup'; reason?: string }
  | { type: 'turn.failed'; error: unknown }
  /** A background tool call settled: announced at the next natural pause. */
  | { type: 'tool.background'; result: BackgroundResult };

/** What the agent says next. */
type Reply =
  | { kind: 'generate'; audio: boolean; instructions?: string }
  | { kind: 'say'; text: string };

interface Ctx {
  plan: SessionPlan;
  history: ChatMessage[];
  turnId: number;
  /** Committed text of the caller's current turn. */
  heard: string;
  userSpeaking: boolean;
  userSegment: number;
  reply: Reply | null;
  /** End the session once the current turn has been spoken (farewell, hang-up). */
  endAfterTurn: string | null;
  nudged: boolean;
  endReason: string | null;
  failed: boolean;
  /** Clock time when the caller's speech ended (for turn metrics). */
  speechEndedAt: number | null;
  /** Recognition part of the latency: end of speech → the recognizer said so. */
  recognitionMs: number | null;
  /** Background tool results waiting for the next natural pause (idle). */
  announcements: BackgroundResult[];
}

const HANG_UP_TOOL: ToolSpec = {
  name: 'hang_up_call',
  description: 'End the call. Use it when the caller says goodbye or asks you to hang up.',
  parametersJsonSchema: JSON.stringify({ type: 'object', properties: { reason: { type: 'string', description: 'Why the call ends' } } }),
};

/** `hang_up_call` as a system tool: the session ends once what the reply said is spoken. */
const hangUpTool: SessionTool = {
  spec: HANG_UP_TOOL,
  source: 'system',
  mode: 'blocking',
  execute: async () => ({ status: 'completed', output: JSON.stringify({ ok: true }), error: null, latencyMs: 0, endSession: 'agent_hangup' }),
};

/** Model calls per turn at most: the first, and this many more after tool results. */
const MAX_TOOL_ROUNDS = 4;

/** A call of this turn, with what the model was told once it is known. */
interface TurnCall {
  call: StartedCall;
  argumentsJson: string;
  content: string | null;
}

/** One model call of a turn that ended in tool calls: its text, its calls, and their results. */
interface TurnStep {
  text: string;
  calls: TurnCall[];
}

/** The messages a model call that ended in tool calls adds: its text with the calls, then each result. */
function stepMessages(step: TurnStep): ChatMessage[] {
  const calls = step.calls.map((c) => ({ id: c.call.callId, name: c.call.toolName, argumentsJson: c.argumentsJson }));
  const results = step.calls.map((c): ChatMessage => ({
    role: 'tool',
    // A call still open when the turn ended (interrupted) was cancelled with it.
    content: c.content ?? JSON.stringify({ error: 'Cancelled: the reply was interrupted' }),
    toolCallId: c.call.callId,
    name: c.call.toolName,
  }));
  return [{ role: 'assistant', content: step.text, toolCalls: calls }, ...results];
}

/** The history entries of a background result: the result as if the agent had just fetched it. */
function announcementMessages(r: BackgroundResult): ChatMessage[] {
  const id = `${r.callId}_result`;
  return [
    { role: 'assistant', content: '', toolCalls: [{ id, name: r.toolName, argumentsJson: r.argumentsJson }] },
    { role: 'tool', content: r.content, toolCallId: id, name: r.toolName },
  ];
}

/**
 * The turn's messages with knowledge passages for the caller's latest text added to the system
 * message (GAPS.md §7), each between `<passage>` and `</passage>` lines (docs/inference.md).
 * Only replies to a caller turn retrieve; a failed retrieval leaves the messages as they are.
 */
async function withKnowledge(deps: SessionDeps, messages: ChatMessage[], signal: AbortSignal): Promise<ChatMessage[]> {
  const last = messages[messages.length - 1];
  const system = messages[0];
  if (!deps.retrieve || last?.role !== 'user' || system?.role !== 'system') return messages;
  let passages: string[] = [];
  try {
    passages = await deps.retrieve(last.content, signal);
  } catch (err) {
    if (signal.aborted) throw err;
    deps.log?.warn({ err }, 'knowledge retrieval failed; the turn goes on without it');
  }
  signal.throwIfAborted();
  if (passages.length === 0) return messages;
  const block = ["Knowledge passages (from the agent's knowledge sources; answer from them when they are relevant):", ...passages.map((p) => `<passage>\n${p}\n</passage>`)].join('\n');
  return [{ ...system, content: system.content ? `${system.content}\n\n${block}` : block }, ...messages.slice(1)];
}

/**
 * Closes a synthesis stream nobody will read: ended (nothing was sent, so the backend finishes
 * it at once) and read to its end, which is when the backend client gives its slot back.
 * Ending rather than cancelling keeps a burst of interruptions from becoming a burst of stream
 * resets on the backend connection.
 */
function discard(stream: Promise<TtsStream>): void {
  stream.then(
    (s) => {
      s.end();
      void (async () => {
        for await (const _ of s) { /* dropped: the turn is over */ }
      })().catch(() => {});
    },
    () => {},
  );
}

/** Text up to the last sentence end followed by whitespace, and the rest. */
function cutSentences(buffer: string): [string, string] {
  const re = /[.!?。！？…\n]+["')\]」』]*\s+/gu;
  let end = -1;
  for (const m of buffer.matchAll(re)) end = m.index! + m[0].length;
  return end < 0 ? ['', buffer] : [buffer.slice(0, end), buffer.slice(end)];
}

/**
 * One agent turn: generate (or take) the text, stream it sentence by sentence into a
 * synthesis stream, pace the audio out, and know at any moment what has been spoken.
 */
class TurnRun {
  readonly ac = new AbortController();
  text = '';
  chars: Timed[] = [];
  /** Set by a tool outcome (`hang_up_call`, a cold transfer): the session ends after this turn. */
  endSession: string | null = null;
  /** Model calls that ended in tool calls, in order; the text after the last one is the reply. */
  steps: TurnStep[] = [];
  /** Calls of the last model call that were not followed by another one (hang-up, interruption). */
  open: TurnCall[] = [];
  finalized = false;
  private playout: Playout;
  private stopped = false;
  private lastWords = -1;
  /**
   * Turn timings: `firstText` the model's first output, `firstSpeakable` its first text the agent
   * can speak (a whole sentence, or the reply's end), `firstTts` that text sent to synthesis,
   * `firstAudio` synthesis's first audio back.
   */
  private t: { start: number; firstText?: number; firstSpeakable?: number; firstTts?: number; firstAudio?: number } = { start: 0 };
  /** The model's text events read so far, and how many it took to the first speakable text. */
  private textEvents = 0;
  private textEventsToSpeakable = 0;

  constructor(
    private readonly deps: SessionDeps,
    private readonly plan: SessionPlan,
    readonly turnId: number,
    private readonly reply: Reply,
    private readonly messages: ChatMessage[],
    private readonly timing: { speechEndedAt: number | null; recognitionMs: number | null; decideMs: number | null },
    private readonly sendBack: (e: SessionEvent) => void,
    private readonly onMetrics: (m: TurnMetrics, timeline: TurnTimeline) => void,
    private readonly tools: ToolCalls,
  ) {
    this.playout = new Playout(deps.clock, (pcm) => deps.output.audio(pcm), () => this.progress());
  }

  /** Audio sent to the caller so far, in milliseconds of this turn's speech. */
  get playedMs(): number {
    return this.playout.playedMs;
  }

  /**
   * What has been heard so far, kept up as playback advances (it only grows within a turn):
   * the first `heardChars` of `chars` make `heardText`, which holds `heardWords` words. Built
   * incrementally, not rescanned per 20 ms frame.
   */
  private heardChars = 0;
  private heardText = '';
  private heardWords = 0;
  private inWord = false;

  /** The text the caller has actually heard (everything, for text-only or finished turns). */
  spoken(all = false): string {
    if (all || this.reply.kind === 'generate' && !this.reply.audio) return this.text;
    const played = this.playout.playedMs + 0.5;
    const chars = this.chars;
    let i = this.heardChars;
    if (i >= chars.length || chars[i]!.endMs > played) return this.heardText;
    let add = '';
    for (; i < chars.length && chars[i]!.endMs <= played; i++) {
      const text = chars[i]!.text;
      add += text;
      for (let k = 0; k < text.length; k++) {
        const space = /\s/.test(text[k]!);
        if (!space && !this.inWord) this.heardWords++;
        this.inWord = !space;
      }
    }
    this.heardChars = i;
    this.heardText += add;
    return this.heardText;
  }

  private emit(e: SessionEvent) {
    if (!this.stopped) this.sendBack(e);
  }

  /** The synthesis stream opened for this turn while nothing has been read from it yet. */
  private unread: Promise<TtsStream> | null = null;

  stop() {
    this.stopped = true;
    this.ac.abort();
    this.playout.stop();
    if (this.unread) discard(this.unread);
    this.unread = null;
    // Blocking calls belong to the turn: an interrupted turn cancels them (the others outlive it).
    for (const c of this.open) if (c.call.mode === 'blocking' && c.content === null) this.tools.cancel(c.call.callId);
  }

  private progress() {
    // Agent text is paced to playback: an interim transcript per completed word.
    const text = this.spoken();
    const words = this.reply.kind === 'generate' && !this.reply.audio ? text.split(/\s+/).filter(Boolean).length : this.heardWords;
    if (words === this.lastWords || this.stopped || !text) return;
    this.lastWords = words;
    this.deps.output.message({ topic: 'lk.transcription', role: 'agent', segmentId: `agent-${this.turnId}`, text, final: false });
  }

  private metrics() {
    const now = this.deps.clock.now();
    const t = this.t;
    const from = this.timing.speechEndedAt ?? t.start;
    const total = now - from;
    const rec = this.timing.recognitionMs;
    const decide = this.timing.decideMs;
    // The model's share runs to its first speakable text: until a sentence is complete there is
    // nothing to synthesize, and how fast the words come is the model's speed, not the platform's.
    const modelDone = t.firstSpeakable ?? t.firstText;
    const model = modelDone !== undefined ? modelDone - t.start : null;
    const synth = t.firstTts !== undefined && t.firstAudio !== undefined ? t.firstAudio - t.firstTts : null;
    const known = (rec ?? 0) + (decide ?? 0) + (model ?? 0) + (synth ?? 0);
    const timeline: TurnTimeline = {
      sessionId: this.plan.sessionId,
      turnId: this.turnId,
      speechEndedAt: this.timing.speechEndedAt,
      recognizedAt: this.timing.speechEndedAt !== null && rec !== null ? this.timing.speechEndedAt + rec : null,
      decideMs: decide,
      startedAt: t.start,
      textEventsToSpeakable: this.textEventsToSpeakable,
      firstSpeakableAt: modelDone ?? null,
      firstTtsAt: t.firstTts ?? null,
      firstAudioAt: t.firstAudio ?? null,
    };
    this.onMetrics({ turn_id: this.turnId, recognition_ms: rec, decide_ms: decide, model_ms: model, synthesis_ms: synth, total_ms: total, platform_ms: Math.max(0, total - known) }, timeline);
  }

  async run(): Promise<void> {
    const { deps, plan, reply } = this;
    const signal = this.ac.signal;
    this.t.start = deps.clock.now();
    const audio = reply.kind === 'say' || reply.audio;
    let tts: TtsStream | null = null;
    let reading: Promise<void> | null = null;
    // The synthesis stream opens while the model thinks, so its set-up is off the critical path.
    const opening = audio ? deps.backend.synthesize({ voiceId: plan.voiceId, language: plan.language, signal }) : null;
    opening?.catch(() => {});
    this.unread = opening;
    const speak = async (text: string) => {
      if (!audio || !text) return;
      if (!tts) {
        this.unread = null;
        tts = await opening!;
        reading = this.read(tts);
        reading.catch(() => {});
      }
      this.t.firstTts ??= deps.clock.now();
      tts.send(text);
      tts.flush();
    };

    if (reply.kind === 'say') {
      this.text = reply.text;
      this.t.firstText = this.t.start;
      await speak(reply.text);
    } else {
      const tools = this.tools.specs();
      let messages = reply.instructions ? this.messages : await withKnowledge(deps, this.messages, signal);
      const textOnly = !reply.audio;
      for (let round = 0; ; round++) {
        let buffer = '';
        let text = '';
        const calls: TurnCall[] = [];
        this.open = calls;
        for await (const ev of deps.backend.generate({ messages, tools, signal })) {
          if (ev.type === 'text') {
            this.textEvents++;
            this.t.firstText ??= deps.clock.now();
            this.text += ev.text;
            text += ev.text;
            buffer += ev.text;
            const [sentences, rest] = cutSentences(buffer);
            buffer = rest;
            if (sentences && this.t.firstSpeakable === undefined) {
              this.t.firstSpeakable = deps.clock.now();
              this.textEventsToSpeakable = this.textEvents;
            }
            await speak(sentences);
          } else if (ev.type === 'tool_call') {
            this.t.firstText ??= deps.clock.now();
            const call = this.tools.start(ev, { turnId: this.turnId, textOnly });
            const c: TurnCall = { call, argumentsJson: ev.argumentsJson, content: null };
            void call.content.then((content) => { c.content = content; });
            calls.push(c);
          }
        }
        if (buffer && this.t.firstSpeakable === undefined) {
          this.t.firstSpeakable = deps.clock.now();
          this.textEventsToSpeakable = this.textEvents;
        }
        await speak(buffer);
        if (calls.length === 0) break;
        // Blocking calls hold the turn; the others were answered at once (dispatched, running).
        await Promise.all(calls.map((c) => c.call.content));
        signal.throwIfAborted();
        for (const c of calls) {
          if (c.call.mode !== 'blocking') continue;
          const o = await c.call.outcome;
          if (o.endSession) this.endSession ??= o.endSession;
        }
        if (this.endSession || round >= MAX_TOOL_ROUNDS) break;
        this.steps.push({ text, calls });
        this.open = [];
        messages = [...messages, ...stepMessages({ text, calls })];
      }
    }
    signal.throwIfAborted();
    if (!tts && opening) {
      // Nothing to say (e.g. only a tool call): the unused stream is closed and drained.
      this.unread = null;
      discard(opening);
    }
    if (tts) {
      (tts as TtsStream).end();
      await reading;
      await this.playout.drained();
    } else {
      this.metrics();
    }
    signal.throwIfAborted();
    this.emit(this.endSession ? { type: 'turn.hangup', reason: this.endSession } : { type: 'turn.done' });
  }

  private async read(tts: TtsStream): Promise<void> {
    for await (const ev of tts) {
      if (this.stopped) return;
      if (ev.type !== 'audio') continue;
      for (const c of ev.chars) this.chars.push(c);
      if (ev.pcm.length === 0) continue;
      if (this.t.firstAudio === undefined) {
        this.t.firstAudio = this.deps.clock.now();
        this.metrics();
        this.emit({ type: 'turn.speaking' });
      }
      await this.playout.enqueue(ev.pcm);
    }
  }
}

/** A live session: the actor plus the audio paths around it. */
export interface SessionHandle {
  readonly id: string;
  /** The agent state the client sees. */
  readonly state: AgentState;
  /** Caller audio: 16 kHz mono 16-bit PCM. */
  sendAudio(pcm: Uint8Array): void;
  /** A client event or a control event. */
  send(event: SessionEvent): void;
  /** Ends the session (no-op once ended). */
  end(reason: string): void;
  /** Settles once the session has ended and its streams are closed. */
  readonly ended: Promise<SessionEnd>;
  readonly turns: TurnMetrics[];
  readonly actor: AnyActorRef;
}

/** What the machine shares with the handle around it (streams are not machine context). */
export interface SessionIo {
  stt: SttStream | null;
  turn: TurnRun | null;
  turns: TurnMetrics[];
  /** Milliseconds of caller audio sent to the recognizer. */
  sttSentMs: number;
  /** When the caller's audio at a stream position (ms) arrived, if it is recent (null otherwise). */
  heardAt?(atMs: number): number | null;
  /** The machine's context as it is now (set once the actor exists). */
  context?: () => Ctx;
  /** The session's tool calls (created with the session; lazily, without background delivery, otherwise). */
  tools?: ToolCalls;
}

/** The tool-call registry of a session: `hang_up_call` when the plan enables it, then `deps.tools`. */
function createToolCalls(plan: SessionPlan, deps: SessionDeps, onBackground: (r: BackgroundResult) => void): ToolCalls {
  const tools = [...(plan.hangUpTool ? [hangUpTool] : []), ...(deps.tools ?? [])];
  return new ToolCalls({ tools, output: deps.output, record: deps.record, clock: deps.clock, toolEvents: plan.toolEvents, onBackground, log: deps.log });
}

interface TurnInput {
  plan: SessionPlan;
  reply: Reply;
  messages: ChatMessage[];
  turnId: number;
  timing: { speechEndedAt: number | null; recognitionMs: number | null; decideMs: number | null };
}

export function createSessionMachine(deps: SessionDeps, io: SessionIo = { stt: null, turn: null, turns: [], sttSentMs: 0 }) {

  const record = (role: 'user' | 'assistant', content: string, turnId: number) => {
    if (!content) return;
    deps.record([{ type: 'message', payload: { role, content, turn_id: turnId, created_at: new Date(deps.clock.now()).toISOString() } }]);
  };

  /** Settles the current agent turn once: final transcript, history, record. */
  const settleTurn = (ctx: Ctx, interrupted: boolean): ChatMessage[] => {
    const t = io.turn;
    if (!t || t.finalized) return ctx.history;
    t.finalized = true;
    const text = interrupted ? t.spoken() : t.spoken(true);
    if (text || t.text) deps.output.message({ topic: 'lk.transcription', role: 'agent', segmentId: `agent-${t.turnId}`, text, final: true });
    record('assistant', text, t.turnId);
    // The spoken text is a prefix of what was generated: each model call keeps its share of it.
    const added: ChatMessage[] = [];
    let used = 0;
    for (const step of t.steps) {
      const part = text.slice(used, used + step.text.length);
      used += part.length;
      // A tool call needs its result in the history for the next request.
      added.push(...stepMessages({ text: part, calls: step.calls }));
    }
    const rest = text.slice(used);
    if (t.open.length) added.push(...stepMessages({ text: rest, calls: t.open }));
    else if (rest) added.push({ role: 'assistant', content: rest });
    return added.length ? [...ctx.history, ...added] : ctx.history;
  };

  /**
   * What the caller said in this turn: the committed text. A partial never decides anything
   * (the turn is taken after the end of speech, from what was committed), so partials do not
   * go through the machine: the listener shows them to the client with the segment and the
   * committed text of the moment (one partial per recognizer update, the busiest event of a
   * session, cost a machine transition each).
   */
  const userText = (ctx: Ctx) => ctx.heard.trim();

  return setup({
    types: { context: {} as Ctx, events: {} as SessionEvent, input: {} as { plan: SessionPlan } },
    actors: {
      openStt: fromPromise<SttStream, { language: string }>(async ({ input, signal }) => deps.backend.transcribe({ language: input.language, signal })),
      listen: fromCallback<SessionEvent>(({ sendBack }) => {
        const stt = io.stt!;
        let stopped = false;
        (async () => {
          for await (const ev of stt) {
            if (stopped) return;
            if (ev.type === 'speech_started') sendBack({ type: 'stt.speech_started' });
            else if (ev.type === 'partial') {
              const c = io.context!();
              deps.output.message({ topic: 'lk.transcription', role: 'user', segmentId: `user-${c.userSegment}`, text: (c.heard + ev.text).trim(), final: false });
            } else if (ev.type === 'committed') sendBack({ type: 'stt.committed', text: ev.text });
            else sendBack({ type: 'stt.speech_ended', atMs: ev.atMs });
          }
        })().catch((error) => { if (!stopped) sendBack({ type: 'stt.failed', error }); });
        return () => { stopped = true; };
      }),
      turn: fromCallback<SessionEvent, TurnInput>(({ input, sendBack }) => {
        const tools = (io.tools ??= createToolCalls(input.plan, deps, () => {}));
        const run = new TurnRun(deps, input.plan, input.turnId, input.reply, input.messages, input.timing, sendBack, (m, timeline) => {
          io.turns.push(m);
          deps.onTurn?.(m, timeline);
        }, tools);
        io.turn = run;
        run.run().catch((error) => {
          if (!run.ac.signal.aborted) sendBack({ type: 'turn.failed', error });
        });
        return () => run.stop();
      }),
    },
    delays: {
      maxDuration: ({ context }) => context.plan.maxDurationMs,
      decide: ({ context }) => context.plan.decideMs,
      bargeIn: ({ context }) => context.plan.bargeInMs,
      reengage: ({ context }) => context.plan.reengage?.afterMs ?? 2 ** 31 - 1,
    },
    guards: {
      userSpeaking: ({ context }) => context.userSpeaking,
      hasFirstMessage: ({ context }) => context.plan.firstMessage.mode !== 'off',
      heardSomething: ({ context }) => userText(context) !== '',
      decideNow: ({ context }) => context.plan.decideMs <= 0,
      decideNowHeard: ({ context }) => context.plan.decideMs <= 0 && userText(context) !== '',
      bargeInNow: ({ context }) => context.plan.bargeInMs <= 0,
      endAfterTurn: ({ context }) => context.endAfterTurn !== null,
      callerPending: ({ context }) => context.userSpeaking || userText(context) !== '',
      reengageEnabled: ({ context }) => context.plan.reengage !== null,
      nudged: ({ context }) => context.nudged,
      interruptible: ({ context }) => context.plan.interruptible,
      hasAnnouncement: ({ context }) => context.announcements.length > 0,
    },
    actions: {
      speechOn: assign({ userSpeaking: true }),
      speechOff: assign(({ context, event }) => {
        const now = deps.clock.now();
        const atMs = event.type === 'stt.speech_ended' ? event.atMs : null;
        // The recognizer reports where speech ended in stream time. That audio arrived when the
        // piece holding it did (less the audio after it in the piece); for audio older than the
        // pieces kept, as if the audio since came in real time (audioNow − atMs ago). Recognition
        // is from then to now. Both from this end of speech: a pause and a resumption before it
        // measured an earlier one.
        if (atMs === null) return { userSpeaking: false, speechEndedAt: now, recognitionMs: null };
        const arrived = io.heardAt?.(atMs) ?? now - Math.max(0, io.sttSentMs - atMs);
        const speechEndedAt = Math.min(now, arrived);
        return { userSpeaking: false, speechEndedAt, recognitionMs: now - speechEndedAt };
      }),
      committed: assign(({ context, event }) => (event.type === 'stt.committed' ? { heard: context.heard + event.text } : {})),
      /** The caller's turn is taken: final transcript, history, record. */
      takeUserTurn: assign(({ context }) => {
        const text = userText(context);
        const turnId = context.turnId + 1;
        deps.output.message({ topic: 'lk.transcription', role: 'user', segmentId: `user-${context.userSegment}`, text, final: true });
        record('user', text, turnId);
        return {
          history: [...context.history, { role: 'user' as const, content: text }],
          turnId,
          heard: '',
          userSegment: context.userSegment + 1,
          reply: { kind: 'generate' as const, audio: true },
          nudged: false,
        };
      }),
      takeTyped: assign(({ context, event }) => {
        if (event.type !== 'user.message') return {};
        const turnId = context.turnId + 1;
        record('user', event.text, turnId);
        return { history: [...context.history, { role: 'user' as const, content: event.text }], turnId, reply: { kind: 'generate' as const, audio: event.audio !== false }, nudged: false, speechEndedAt: null, recognitionMs: null };
      }),
      firstMessage: assign(({ context }) => {
        const fm = context.plan.firstMessage;
        const endAfterTurn = context.plan.endAfterFirstMessage ?? null;
        if (fm.mode === 'fixed') return { reply: { kind: 'say' as const, text: fm.text }, endAfterTurn };
        if (fm.mode === 'prompt') return { reply: { kind: 'generate' as const, audio: true, instructions: fm.prompt }, endAfterTurn };
        return {};
      }),
      nudge: assign(({ context }) => ({ reply: { kind: 'say' as const, text: context.plan.reengage!.nudge }, nudged: true, speechEndedAt: null, recognitionMs: null })),
      farewell: assign(({ context }) => {
        const f = context.plan.reengage?.farewell;
        return f ? { reply: { kind: 'say' as const, text: f }, endAfterTurn: 'idle_timeout' } : { endAfterTurn: 'idle_timeout' };
      }),
      settle: assign(({ context }) => ({ history: settleTurn(context, false), speechEndedAt: null, recognitionMs: null })),
      interrupt: assign(({ context }) => ({ history: settleTurn(context, true), speechEndedAt: null, recognitionMs: null })),
      endWith: assign((_, params: { reason: string }) => ({ endReason: params.reason })),
      endFromEvent: assign(({ event }) => ({ endReason: event.type === 'session.end' ? event.reason : 'ended' })),
      fail: assign(({ event }) => {
        deps.log?.error({ err: 'error' in event ? event.error : undefined }, 'session failed');
        deps.output.message({ topic: 'agent-event', type: 'error', code: 'provider_error' });
        return { endReason: 'error', failed: true };
      }),
      turnFailed: ({ event }) => {
        deps.log?.warn({ err: 'error' in event ? event.error : undefined }, 'turn failed');
        deps.output.message({ topic: 'agent-event', type: 'error', code: 'provider_error' });
      },
      endPending: assign(({ context }) => ({ endReason: context.endAfterTurn })),
      endFromTool: assign(({ event }) => ({ endReason: event.type === 'turn.hangup' && event.reason ? event.reason : 'agent_hangup' })),
      queueAnnouncement: assign(({ context, event }) => (event.type === 'tool.background' ? { announcements: [...context.announcements, event.result] } : {})),
      /** A natural pause with background results waiting: the agent tells them (a new turn, no caller turn). */
      announce: assign(({ context }) => ({
        history: [...context.history, ...context.announcements.flatMap(announcementMessages)],
        announcements: [],
        reply: { kind: 'generate' as const, audio: true },
        speechEndedAt: null,
        recognitionMs: null,
      })),
      /** Ending the conversation cancels the tool calls still running (their attempts stay in the history). */
      cancelTools: () => io.tools?.cancelAll(),
    },
  }).createMachine({
    id: 'session',
    context: ({ input }) => ({
      plan: input.plan,
      history: [],
      turnId: 0,
      heard: '',
      userSpeaking: false,
      userSegment: 1,
      reply: null,
      endAfterTurn: null,
      nudged: false,
      endReason: null,
      failed: false,
      speechEndedAt: null,
      recognitionMs: null,
      announcements: [],
    }),
    initial: 'initializing',
    states: {
      initializing: {
        invoke: {
          src: 'openStt',
          input: ({ context }) => ({ language: context.plan.language }),
          onDone: { target: 'live', actions: ({ event }) => { io.stt = event.output; } },
          onError: { target: 'ended', actions: 'fail' },
        },
        on: {
          'session.end': { target: 'ended', actions: 'endFromEvent' },
          'user.hangup': { target: 'ended', actions: { type: 'endWith', params: { reason: 'user_hangup' } } },
        },
      },
      live: {
        invoke: { src: 'listen' },
        after: { maxDuration: { target: 'ended', actions: { type: 'endWith', params: { reason: 'max_duration' } } } },
        on: {
          'session.end': { target: 'ended', actions: ['interrupt', 'endFromEvent'] },
          'user.hangup': { target: 'ended', actions: ['interrupt', { type: 'endWith', params: { reason: 'user_hangup' } }] },
          'stt.failed': { target: 'ended', actions: ['interrupt', 'fail'] },
          'stt.speech_started': { actions: 'speechOn' },
          'stt.speech_ended': { actions: 'speechOff' },
          'stt.committed': { actions: 'committed' },
          'tool.background': { actions: 'queueAnnouncement' },
        },
        initial: 'opening',
        states: {
          opening: {
            always: [{ guard: 'hasFirstMessage', target: 'responding', actions: 'firstMessage' }, { target: 'idle' }],
          },
          idle: {
            always: { guard: 'hasAnnouncement', target: 'responding', actions: 'announce' },
            after: {
              reengage: [
                { guard: 'nudged', target: 'responding', actions: 'farewell' },
                { guard: 'reengageEnabled', target: 'responding', actions: 'nudge' },
              ],
            },
            on: {
              'stt.speech_started': { target: 'listening', actions: 'speechOn' },
              'stt.committed': { target: 'listening', actions: 'committed' },
              'user.message': { target: 'responding', actions: 'takeTyped' },
              'user.activity': { target: 'idle', reenter: true },
            },
          },
          listening: {
            initial: 'check',
            on: {
              'stt.speech_started': { target: '.hearing', actions: 'speechOn' },
              'stt.speech_ended': { target: '.deciding', actions: 'speechOff' },
              'user.message': { target: 'responding', actions: 'takeTyped' },
            },
            states: {
              check: { always: [{ guard: 'userSpeaking', target: 'hearing' }, { target: 'deciding' }] },
              hearing: {},
              deciding: {
                // A zero wait (eagerness `eager`) is taken at once: a 0 ms timer would still wait
                // for the rest of the event loop's iteration, tens of milliseconds under load.
                always: [
                  { guard: 'decideNowHeard', target: '#session.live.responding', actions: 'takeUserTurn' },
                  { guard: 'decideNow', target: '#session.live.idle' },
                ],
                after: {
                  decide: [
                    { guard: 'heardSomething', target: '#session.live.responding', actions: 'takeUserTurn' },
                    { target: '#session.live.idle' },
                  ],
                },
              },
            },
          },
          responding: {
            type: 'parallel',
            invoke: {
              src: 'turn',
              input: ({ context }) => {
                const reply = context.reply ?? { kind: 'generate' as const, audio: true };
                const system: ChatMessage = { role: 'system', content: [context.plan.systemPrompt, ...context.plan.context(deps.clock.now())].filter(Boolean).join('\n\n') };
                const messages = [system, ...context.history];
                // The opener's instructions go last, as the turn the model answers.
                if (reply.kind === 'generate' && reply.instructions) messages.push({ role: 'user', content: reply.instructions });
                const decideMs = context.speechEndedAt !== null ? context.plan.decideMs : null;
                return { plan: context.plan, reply, messages, turnId: context.turnId, timing: { speechEndedAt: context.speechEndedAt, recognitionMs: context.recognitionMs, decideMs } };
              },
            },
            on: {
              'turn.done': [
                { guard: 'endAfterTurn', target: '#ended', actions: ['settle', 'endPending'] },
                { guard: 'callerPending', target: 'listening', actions: 'settle' },
                { target: 'idle', actions: 'settle' },
              ],
              'turn.hangup': { target: '#ended', actions: ['settle', 'endFromTool'] },
              'turn.failed': { target: 'idle', actions: ['interrupt', 'turnFailed'] },
              'user.interrupt': { target: 'listening', actions: 'interrupt' },
              'user.message': { target: 'responding', reenter: true, actions: ['interrupt', 'takeTyped'] },
            },
            states: {
              output: {
                initial: 'thinking',
                states: {
                  thinking: { on: { 'turn.speaking': 'speaking' } },
                  speaking: {},
                },
              },
              barge: {
                initial: 'quiet',
                states: {
                  quiet: {
                    on: { 'stt.speech_started': { guard: 'interruptible', target: 'callerTalking', actions: 'speechOn' } },
                  },
                  callerTalking: {
                    // Sensitivity `high` (no wait): the agent stops in the same step, not a timer later.
                    always: { guard: 'bargeInNow', target: '#session.live.listening', actions: 'interrupt' },
                    after: { bargeIn: { target: '#session.live.listening', actions: 'interrupt' } },
                    on: { 'stt.speech_ended': { target: 'quiet', actions: 'speechOff' } },
                  },
                },
              },
            },
          },
        },
      },
      ended: { id: 'ended', type: 'final', entry: 'cancelTools' },
    },
  });
}

/** Maps the machine's state to the agent state the client sees. */
export function agentStateOf(value: unknown): AgentState {
  if (inState(value, 'initializing') || inState(value, 'opening')) return 'initializing';
  if (inState(value, 'speaking')) return 'speaking';
  if (inState(value, 'thinking')) return 'thinking';
  if (inState(value, 'listening')) return 'listening';
  return 'idle';
}

/** Whether a state value (`'idle'`, `{ live: { listening: 'hearing' } }`, …) is in the state `name` at any depth. */
function inState(value: unknown, name: string): boolean {
  if (typeof value === 'string') return value === name;
  if (!value || typeof value !== 'object') return false;
  for (const k in value) if (k === name || inState((value as Record<string, unknown>)[k], name)) return true;
  return false;
}

/** Caller audio pieces whose arrival a session keeps (~5 s of 20 ms frames). */
const ARRIVALS = 256;

/**
 * Starts a session. The returned handle settles `ended` exactly once; a throwing session
 * ends as `failed` and takes nothing else with it.
 */
export function startSession(plan: SessionPlan, given: SessionDeps): SessionHandle {
  const io: SessionIo = { stt: null, turn: null, turns: [], sttSentMs: 0 };
  // A failure in the output (a transport's bug) ends this session as failed, never the process.
  const guard = <A extends unknown[]>(f: (...a: A) => void) => (...a: A) => {
    try {
      f(...a);
    } catch (err) {
      given.log?.error({ err }, 'session output failed');
      queueMicrotask(() => finish('failed', 'error'));
    }
  };
  const deps: SessionDeps = { ...given, output: { message: guard((m) => given.output.message(m)), audio: guard((p) => given.output.audio(p)) } };
  // Background results reach the machine as events; after the end there is nobody to tell.
  io.tools = createToolCalls(plan, deps, (result) => {
    if (!done) actor.send({ type: 'tool.background', result });
  });
  const machine = createSessionMachine(deps, io);
  const actor = createActor(machine, { input: { plan }, clock: deps.clock });
  io.context = () => actor.getSnapshot().context;
  let state: AgentState = 'initializing';
  let sentBytes = 0;
  // The arrival of the caller's recent audio: pairs (stream end position in ms, clock time) of
  // the last ARRIVALS pieces: where the caller's end of speech arrived (TurnMetrics.recognition_ms).
  const arrivals = new Float64Array(ARRIVALS * 2);
  let pieces = 0;
  io.heardAt = (atMs) => {
    // The piece holding atMs: the first whose end is at or after it, with the piece before it
    // ending before it (the oldest piece kept has no known start, so it cannot be that piece
    // unless it is the stream's first).
    const oldest = Math.max(0, pieces - ARRIVALS);
    let start = oldest === 0 ? 0 : Infinity;
    for (let i = oldest; i < pieces; i++) {
      const k = (i % ARRIVALS) * 2;
      if (arrivals[k] >= atMs) return start <= atMs ? arrivals[k + 1] - (arrivals[k] - atMs) : null;
      start = arrivals[k];
    }
    return null;
  };
  let settle!: (e: SessionEnd) => void;
  const ended = new Promise<SessionEnd>((r) => (settle = r));
  let done = false;
  const finish = (status: 'completed' | 'failed', reason: string) => {
    if (done) return;
    done = true;
    io.tools?.cancelAll();
    io.turn?.stop();
    io.stt?.end();
    io.stt?.cancel();
    actor.stop();
    settle({ status, reason, turns: io.turns });
  };

  actor.subscribe({
    next: (snap) => {
      if (snap.status === 'done') {
        finish(snap.context.failed ? 'failed' : 'completed', snap.context.endReason ?? 'ended');
        return;
      }
      const s = agentStateOf(snap.value);
      if (s !== state) {
        state = s;
        deps.output.message({ topic: 'lk.agent.state', state: s });
      }
    },
    error: (err) => {
      deps.log?.error({ err }, 'session actor threw');
      finish('failed', 'error');
    },
  });
  deps.output.message({ topic: 'lk.agent.state', state });
  actor.start();

  return {
    id: plan.sessionId,
    get state() {
      return state;
    },
    sendAudio(pcm) {
      if (done || !io.stt) return;
      sentBytes += pcm.length;
      io.sttSentMs = sentBytes / 32; // 16 kHz × 2 bytes = 32 bytes per millisecond
      const k = (pieces++ % ARRIVALS) * 2;
      arrivals[k] = io.sttSentMs;
      arrivals[k + 1] = deps.clock.now();
      io.stt.sendAudio(pcm);
    },
    send(event) {
      if (!done) actor.send(event);
    },
    end(reason) {
      if (!done) actor.send({ type: 'session.end', reason });
    },
    ended,
    get turns() {
      return io.turns;
    },
    actor,
  };
}
