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
 * The agent state the client sees is a tag of the states (`initializing`, `listening`,
 * `thinking`, `speaking`; none is `idle`). Tool calls are children of the session's actor
 * (`tool.<callId>`, spawned when the model calls a tool, reporting `tool.settled`): ending the
 * session stops them. The session's actor is a root, owned by the supervisor (`supervisor.ts`).
 *
 * Audio never goes through the machine: caller frames go straight to the transcription
 * stream (`sendAudio`), the agent's audio straight from the synthesis stream through the
 * playout to the output. The machine sees the events that decide turns. Its `assign`s only
 * compute context; sending to the client and recording are named actions.
 */
import { assign, createActor, fromCallback, fromPromise, setup, type SnapshotFrom } from 'xstate';
import { Playout } from './playout.ts';
import { cutSentences } from './sentences.ts';
import { contentOf, ToolCalls, toolCallMachine, type BackgroundResult, type StartedCall, type ToolCallInput, type ToolSettled } from './tool-call.ts';
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

/** Events a client sends (docs/api/sessions.md `client-event`), as the actor takes them. */
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
  /**
   * The caller stopped speaking. `endedAt`: when the audio holding the end of speech arrived;
   * `recognitionMs`: from then until the recognizer said so.
   */
  | { type: 'stt.speech_ended'; endedAt: number; recognitionMs: number }
  | { type: 'stt.failed'; error: unknown }
  /** The recognizer stream broke; a new one is being opened (caller audio is not heard meanwhile). */
  | { type: 'stt.lost'; error: unknown }
  | { type: 'turn.done' }
  | { type: 'turn.hangup'; reason?: string }
  | { type: 'turn.failed'; error: unknown }
  /** The model called a tool: its actor starts as a child (`tool.<callId>`). */
  | { type: 'tool.spawn'; input: ToolCallInput }
  /** A blocking call's turn was interrupted: its actor stops. */
  | { type: 'tool.stop'; callId: string }
  | ToolSettled;

/** What the agent says next. */
type Reply =
  | { kind: 'generate'; audio: boolean; instructions?: string }
  | { kind: 'say'; text: string };

interface Ctx {
  plan: SessionPlan;
  /** This session's dependencies and io: in the context, so that one machine serves every session. */
  rt: SessionRt;
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
  /** Typed messages that came while the recognizer was opening, taken once the session is live. */
  early: Extract<SessionEvent, { type: 'user.message' }>[];
}

/** How long a session tries to reopen a lost recognizer before it ends with `error`. */
export const RECOGNIZER_RETRY_MS = 30_000;

/**
 * Interim user transcripts go to the client at most once per this many milliseconds: the first
 * partial after a quiet spell at once, later ones coalesced (the newest is sent when the gap
 * has passed, or at once before any other recognizer event, so nothing arrives out of order).
 * A recognizer may send a partial per character; each one is a JSON message and a socket write.
 */
export const PARTIAL_GAP_MS = 200;

/** Typed messages held while the session opens; a client sending more before it is live loses the rest. */
const MAX_EARLY_MESSAGES = 16;

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
 * message (docs/api/knowledge.md), each between `<passage>` and `</passage>` lines (docs/inference.md).
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
  /** The turn's first audio has been sent: the agent is `speaking` (it was `thinking`). */
  speaking = false;
  /** Model calls that ended in tool calls, in order; the text after the last one is the reply. */
  steps: TurnStep[] = [];
  /** Calls of the last model call that were not followed by another one (hang-up, interruption). */
  open: TurnCall[] = [];
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
    private readonly onSpeaking: () => void,
  ) {
    this.playout = new Playout(deps.clock, (pcm, playAt) => deps.output.audio(pcm, playAt), () => this.progress());
  }

  /** A generated reply without speech (a typed conversation): its text is all said at once. */
  private get textOnly(): boolean {
    return this.reply.kind === 'generate' && !this.reply.audio;
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
    if (all || this.textOnly) return this.text;
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

  /**
   * What the caller has heard of an interrupted turn: the characters whose audio had reached its
   * play time when the turn stopped (`heardMs`), not all that was sent, which runs up to the
   * playout's lead (40–120 ms) ahead of it. Everything, for a text-only reply.
   */
  heard(): string {
    if (this.textOnly) return this.text;
    const heard = this.playout.heardMs + 0.5;
    const chars = this.chars;
    let text = '';
    for (let i = 0; i < chars.length && chars[i]!.endMs <= heard; i++) text += chars[i]!.text;
    return text;
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
    const words = this.textOnly ? text.split(/\s+/).filter(Boolean).length : this.heardWords;
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
        if (!this.stopped) {
          this.speaking = true;
          this.onSpeaking();
        }
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
  /**
   * Caller audio: 16 kHz mono 16-bit PCM, read during the call only: the transport may reuse
   * its buffer once it returns (the websocket transport hands over uWebSockets.js's own).
   */
  sendAudio(pcm: Uint8Array): void;
  /** A client event or a control event. */
  send(event: SessionEvent): void;
  /** Ends the session (no-op once ended). */
  end(reason: string): void;
  /** Settles once the session has ended and its streams are closed. */
  readonly ended: Promise<SessionEnd>;
  /** The metrics of the turns so far. */
  readonly turns: TurnMetrics[];
}

/** What the machine shares with the handle around it (streams are not machine context). */
interface SessionIo {
  stt: SttStream | null;
  /** The agent's turn while `responding`. */
  turn: TurnRun | null;
  /** The turn `responding` was just left with: settled by that step, stopped after it. */
  leaving: TurnRun | null;
  /** The turn's first audio went out: the agent state is now `speaking`. */
  speaking(): void;
  turns: TurnMetrics[];
  /** Milliseconds of caller audio sent to the recognizer. */
  sttSentMs: number;
  /** Where the current recognizer stream began, in `sttSentMs` (it is 0 until one is reopened). */
  sttBaseMs: number;
  /** When the caller's audio at a stream position (ms) arrived, if it is recent (null otherwise). */
  heardAt(atMs: number): number | null;
  /** The machine's context as it is now. */
  context(): Ctx;
  /** The session's tool calls. */
  tools: ToolCalls;
}

/** A message of the conversation as `session_items` keeps it (empty ones are not kept). */
interface RecordedMessage {
  role: 'user' | 'assistant';
  content: string;
  turnId: number;
}

/** How a child's failure reaches its parent (`xstate.error.actor.<id>`). */
type ErrorActorEvent = { type: string; error: unknown; actorId: string };

/** The call id of a tool call's actor id (`tool.<callId>`). */
const toolCallId = (actorId: string) => actorId.slice('tool.'.length);

/** A transcript segment as the client sees it (`lk.transcription`). */
interface Transcript {
  role: 'user' | 'agent';
  segmentId: string;
  text: string;
  final: boolean;
}

/**
 * How the current agent turn ends, if one is running: the text said (all of it, or what the
 * caller heard of an interrupted turn) and what it adds to the history. It reads the running
 * turn: what has been played is the playout's to know, not the machine's.
 */
function settlement(t: TurnRun | null, interrupted: boolean): { turnId: number; text: string; generated: string; added: ChatMessage[] } | null {
  if (!t) return null;
  const text = interrupted ? t.heard() : t.spoken(true);
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
  return { turnId: t.turnId, text, generated: t.text, added };
}

/** What a session's actions reach besides its context (one per session, in `Ctx.rt`). */
interface SessionRt {
  deps: SessionDeps;
  io: SessionIo;
}

/**
 * The session machine: built once for every session of the process. Each session's deps and
 * io come in through its input and live in its context (`rt`). Built per session, the machine
 * (its state nodes, transitions and action closures) took ~56 KB of heap per session, the
 * largest part of an idle session's memory, and ~0.3 ms of CPU per session start.
 */
function createSessionMachine() {
  /**
   * What the caller said in this turn: the committed text. A partial never decides anything
   * (the turn is taken after the end of speech, from what was committed), so partials do not
   * go through the machine: the listener shows them to the client with the segment and the
   * committed text of the moment (one partial per recognizer update, the busiest event of a
   * session, cost a machine transition each).
   */
  const userText = (ctx: Ctx) => ctx.heard.trim();

  const base = setup({
    types: { context: {} as Ctx, events: {} as SessionEvent, input: {} as { plan: SessionPlan; rt: SessionRt }, tags: {} as 'initializing' | 'listening' | 'responding' },
    actors: {
      openStt: fromPromise<SttStream, { language: string; rt: SessionRt }>(async ({ input, signal }) => input.rt.deps.backend.transcribe({ language: input.language, signal })),
      listen: fromCallback<SessionEvent, { language: string; rt: SessionRt }>(({ sendBack, input }) => {
        const { deps, io } = input.rt;
        let stopped = false;
        const aborter = new AbortController();
        const sleep = (ms: number) => new Promise<void>((resolve) => deps.clock.setTimeout(resolve, ms));
        /**
         * The recognizer was lost (its backend crashed or restarted): caller audio is dropped
         * while a new stream is opened (tries 100, 200, then every 250 ms) for up to RECOGNIZER_RETRY_MS; the session
         * goes on with it (its stream positions continue from the audio sent so far).
         */
        const reopen = async (error: unknown): Promise<boolean> => {
          io.stt?.cancel();
          io.stt = null;
          sendBack({ type: 'stt.lost', error });
          const lostAt = deps.clock.now();
          const giveUpAt = lostAt + RECOGNIZER_RETRY_MS;
          // A try costs one stream open (it fails at once while the backend's channel is down), so
          // try often: the caller is not heard until one succeeds.
          for (let delay = 100; ; delay = Math.min(delay * 2, 250)) {
            await sleep(delay);
            if (stopped) return false;
            try {
              const stt = await deps.backend.transcribe({ language: input.language, signal: aborter.signal });
              if (stopped) { stt.cancel(); return false; }
              io.sttBaseMs = io.sttSentMs;
              io.stt = stt;
              deps.log?.info?.({ lost_ms: deps.clock.now() - lostAt }, 'recognizer reopened');
              return true;
            } catch (err) {
              if (stopped) return false;
              if (deps.clock.now() >= giveUpAt) { sendBack({ type: 'stt.failed', error: err }); return false; }
            }
          }
        };
        // Partials, coalesced (PARTIAL_GAP_MS): the newest one not yet sent, and when one was.
        let heldPartial: string | null = null;
        let partialTimer: unknown = null;
        let partialAt = -Infinity;
        const showPartial = (text: string) => {
          partialAt = deps.clock.now();
          const c = io.context();
          deps.output.message({ topic: 'lk.transcription', role: 'user', segmentId: `user-${c.userSegment}`, text: (c.heard + text).trim(), final: false });
        };
        const flushPartial = () => {
          if (partialTimer !== null) deps.clock.clearTimeout(partialTimer);
          partialTimer = null;
          const text = heldPartial;
          heldPartial = null;
          if (text !== null && !stopped) showPartial(text);
        };
        const stopPartials = () => {
          if (partialTimer !== null) deps.clock.clearTimeout(partialTimer);
          partialTimer = null;
          heldPartial = null;
        };
        const read = async (stt: SttStream) => {
          for await (const ev of stt) {
            if (stopped) return;
            if (ev.type === 'partial') {
              const wait = partialAt + PARTIAL_GAP_MS - deps.clock.now();
              if (wait <= 0 && partialTimer === null) showPartial(ev.text);
              else {
                heldPartial = ev.text;
                partialTimer ??= deps.clock.setTimeout(flushPartial, Math.max(0, wait));
              }
              continue;
            }
            // Any other event: the partial it follows first.
            flushPartial();
            if (ev.type === 'speech_started') sendBack({ type: 'stt.speech_started' });
            else if (ev.type === 'committed') sendBack({ type: 'stt.committed', text: ev.text });
            else {
              // The recognizer reports where speech ended in stream time. That audio arrived when
              // the piece holding it did (less the audio after it in the piece); for audio older
              // than the pieces kept, as if the audio since came in real time (audioNow − atMs
              // ago). Recognition is from then to now. Both from this end of speech: a pause and
              // a resumption before it measured an earlier one.
              const now = deps.clock.now();
              const atMs = ev.atMs + io.sttBaseMs;
              const arrived = io.heardAt(atMs) ?? now - Math.max(0, io.sttSentMs - atMs);
              const endedAt = Math.min(now, arrived);
              sendBack({ type: 'stt.speech_ended', endedAt, recognitionMs: now - endedAt });
            }
          }
        };
        (async () => {
          for (;;) {
            try {
              await read(io.stt!);
              return;
            } catch (error) {
              if (stopped || !(await reopen(error))) return;
            }
          }
        })().catch((error) => { if (!stopped) sendBack({ type: 'stt.failed', error }); });
        return () => { stopped = true; stopPartials(); aborter.abort(); };
      }),
      toolCall: toolCallMachine,
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
      // Side effects: what the client and the store see.
      emitTranscript: ({ context: { rt: { deps } } }, t: Transcript) => deps.output.message({ topic: 'lk.transcription', ...t }),
      recordMessage: ({ context: { rt: { deps } } }, m: RecordedMessage) => {
        if (!m.content) return;
        deps.record([{ type: 'message', payload: { role: m.role, content: m.content, turn_id: m.turnId, created_at: new Date(deps.clock.now()).toISOString() } }]);
      },
      reportFailure: ({ context: { rt: { deps } }, event }) => {
        deps.log?.error({ err: 'error' in event ? event.error : undefined }, 'session failed');
        deps.output.message({ topic: 'agent-event', type: 'error', code: 'provider_error' });
      },
      recognizerLost: ({ context: { rt: { deps } }, event }) => {
        deps.log?.warn({ err: 'error' in event ? event.error : undefined }, 'recognizer lost; reopening');
        deps.output.message({ topic: 'agent-event', type: 'error', code: 'provider_error' });
      },
      turnFailed: ({ context: { rt: { deps } }, event }) => {
        deps.log?.warn({ err: 'error' in event ? event.error : undefined }, 'turn failed');
        deps.output.message({ topic: 'agent-event', type: 'error', code: 'provider_error' });
      },
      /**
       * The agent's turn starts (entering `responding`): a plain object of the session, not an
       * actor of its own (a spawned actor per turn, with its snapshots and its place in the
       * session's children, was a fifth of what the session machine allocated per turn). It
       * reports to the session with events; leaving `responding` stops it.
       */
      startTurn: ({ context, self }) => {
        const { deps, io } = context.rt;
        const reply = context.reply ?? { kind: 'generate' as const, audio: true };
        const system: ChatMessage = { role: 'system', content: [context.plan.systemPrompt, ...context.plan.context(deps.clock.now())].filter(Boolean).join('\n\n') };
        const messages = [system, ...context.history];
        // The opener's instructions go last, as the turn the model answers.
        if (reply.kind === 'generate' && reply.instructions) messages.push({ role: 'user', content: reply.instructions });
        const decideMs = context.speechEndedAt !== null ? context.plan.decideMs : null;
        const timing = { speechEndedAt: context.speechEndedAt, recognitionMs: context.recognitionMs, decideMs };
        const run = new TurnRun(deps, context.plan, context.turnId, reply, messages, timing, (e) => self.send(e), (m, timeline) => {
          io.turns.push(m);
          deps.onTurn?.(m, timeline);
        }, io.tools, io.speaking);
        io.turn = run;
        run.run().catch((error) => {
          if (!run.ac.signal.aborted) self.send({ type: 'turn.failed', error });
        });
      },
      /**
       * Leaving `responding`: the turn is settled by the transition's actions (they read
       * `io.leaving`) and stopped once the step is over (the actor's observer), as an invoked
       * actor was.
       */
      leaveTurn: ({ context: { rt: { io } } }) => {
        io.leaving = io.turn;
        io.turn = null;
      },
      attachStt: ({ context }, stt: SttStream) => {
        context.rt.io.stt = stt;
      },
      settleTool: ({ context, event }) => {
        if (event.type === 'tool.settled') context.rt.io.tools.settle(event.callId, event.outcome);
      },
      /** A tool call's actor failed (a bug of ours; `execute`'s failures are outcomes): that call failed, the session goes on. */
      toolCrashed: ({ context: { rt: { deps, io } }, event }) => {
        const e = event as unknown as ErrorActorEvent;
        deps.log?.error({ err: e.error }, 'tool call actor failed');
        io.tools.crashed(toolCallId(e.actorId));
      },
      /** Ending the conversation cancels the tool calls still running (their attempts stay in the history). */
      cancelTools: ({ context }) => context.rt.io.tools.cancelAll(),

      // Context.
      speechOn: assign({ userSpeaking: true }),
      /** A lost recognizer will not say where the caller's speech ended: it is over. */
      speechLost: assign({ userSpeaking: false }),
      speechOff: assign(({ event }) => (event.type === 'stt.speech_ended' ? { userSpeaking: false, speechEndedAt: event.endedAt, recognitionMs: event.recognitionMs } : {})),
      committed: assign(({ context, event }) => (event.type === 'stt.committed' ? { heard: context.heard + event.text } : {})),
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
      endWith: assign((_, params: { reason: string }) => ({ endReason: params.reason })),
      endFromEvent: assign(({ event }) => ({ endReason: event.type === 'session.end' ? event.reason : 'ended' })),
      markFailed: assign({ endReason: 'error', failed: true }),
      endPending: assign(({ context }) => ({ endReason: context.endAfterTurn })),
      endFromTool: assign(({ event }) => ({ endReason: event.type === 'turn.hangup' && event.reason ? event.reason : 'agent_hangup' })),
      /** A background call settled: its result waits for the next natural pause. */
      queueAnnouncement: assign(({ context, event }) => {
        if (event.type !== 'tool.settled' || event.mode !== 'background') return {};
        const r: BackgroundResult = { callId: event.callId, toolName: event.toolName, argumentsJson: event.argumentsJson, content: contentOf(event.outcome) };
        return { announcements: [...context.announcements, r] };
      }),
      /** A natural pause with background results waiting: the agent tells them (a new turn, no caller turn). */
      announce: assign(({ context }) => ({
        history: [...context.history, ...context.announcements.flatMap(announcementMessages)],
        announcements: [],
        reply: { kind: 'generate' as const, audio: true },
        speechEndedAt: null,
        recognitionMs: null,
      })),
    },
  });

  /** Settles the current agent turn, if one runs: final transcript, record, history. */
  const settleTurn = (interrupted: boolean) => base.enqueueActions(({ context, enqueue }) => {
    const s = settlement(context.rt.io.leaving, interrupted);
    if (s && (s.text || s.generated)) enqueue({ type: 'emitTranscript', params: { role: 'agent', segmentId: `agent-${s.turnId}`, text: s.text, final: true } });
    if (s) enqueue({ type: 'recordMessage', params: { role: 'assistant', content: s.text, turnId: s.turnId } });
    enqueue.assign({ history: s?.added.length ? [...context.history, ...s.added] : context.history, speechEndedAt: null, recognitionMs: null });
  });

  // Actions that compute context and name the side effects that go with it.
  return base.extend({
    actions: {
      /** The model called a tool: the call runs as a child of the session. */
      spawnTool: base.enqueueActions(({ event, enqueue }) => {
        if (event.type === 'tool.spawn') enqueue.spawnChild('toolCall', { id: `tool.${event.input.callId}`, input: event.input });
      }),
      /** A call's actor leaves the session's children: stopped (its turn was interrupted), or done once it reported. */
      stopTool: base.enqueueActions(({ event, enqueue }) => {
        const callId = event.type === 'tool.stop' || event.type === 'tool.settled' ? event.callId : toolCallId((event as unknown as ErrorActorEvent).actorId);
        enqueue.stopChild(`tool.${callId}`);
      }),
      /** The caller's turn is taken: final transcript, history, record. */
      takeUserTurn: base.enqueueActions(({ context, enqueue }) => {
        const text = userText(context);
        const turnId = context.turnId + 1;
        enqueue({ type: 'emitTranscript', params: { role: 'user', segmentId: `user-${context.userSegment}`, text, final: true } });
        enqueue({ type: 'recordMessage', params: { role: 'user', content: text, turnId } });
        enqueue.assign({
          history: [...context.history, { role: 'user', content: text }],
          turnId,
          heard: '',
          userSegment: context.userSegment + 1,
          reply: { kind: 'generate', audio: true },
          nudged: false,
        });
      }),
      holdEarly: base.assign({
        early: ({ context, event }) => (event.type === 'user.message' && context.early.length < MAX_EARLY_MESSAGES ? [...context.early, event] : context.early),
      }),
      replayEarly: base.enqueueActions(({ context, enqueue }) => {
        if (!context.early.length) return;
        for (const e of context.early) enqueue.raise(e);
        enqueue.assign({ early: [] });
      }),
      takeTyped: base.enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'user.message') return;
        const turnId = context.turnId + 1;
        enqueue({ type: 'recordMessage', params: { role: 'user', content: event.text, turnId } });
        enqueue.assign({ history: [...context.history, { role: 'user', content: event.text }], turnId, reply: { kind: 'generate', audio: event.audio !== false }, nudged: false, speechEndedAt: null, recognitionMs: null });
      }),
      /** The agent turn ends (done, or the session ends with it): final transcript, history, record. */
      settle: settleTurn(false),
      /** The agent turn is cut short: what the caller heard of it is what was said. */
      interrupt: settleTurn(true),
    },
  }).createMachine({
    id: 'session',
    context: ({ input }) => ({
      plan: input.plan,
      rt: input.rt,
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
      early: [],
    }),
    initial: 'initializing',
    states: {
      initializing: {
        tags: ['initializing'],
        invoke: {
          src: 'openStt',
          input: ({ context }) => ({ language: context.plan.language, rt: context.rt }),
          onDone: { target: 'live', actions: { type: 'attachStt', params: ({ event }) => event.output } },
          onError: { target: 'ended', actions: ['markFailed', 'reportFailure'] },
        },
        on: {
          'session.end': { target: 'ended', actions: 'endFromEvent' },
          'user.hangup': { target: 'ended', actions: { type: 'endWith', params: { reason: 'user_hangup' } } },
          'user.message': { actions: 'holdEarly' },
        },
      },
      live: {
        invoke: { src: 'listen', input: ({ context }) => ({ language: context.plan.language, rt: context.rt }) },
        // Typed messages that came while the recognizer opened, as if sent the moment the session
        // went live: after the first message has started (a typed message interrupts it) or to idle.
        entry: 'replayEarly',
        after: { maxDuration: { target: 'ended', actions: { type: 'endWith', params: { reason: 'max_duration' } } } },
        on: {
          'session.end': { target: 'ended', actions: ['interrupt', 'endFromEvent'] },
          'user.hangup': { target: 'ended', actions: ['interrupt', { type: 'endWith', params: { reason: 'user_hangup' } }] },
          'stt.failed': { target: 'ended', actions: ['interrupt', 'markFailed', 'reportFailure'] },
          'stt.lost': { actions: ['recognizerLost', 'speechLost'] },
          'stt.speech_started': { actions: 'speechOn' },
          'stt.speech_ended': { actions: 'speechOff' },
          'stt.committed': { actions: 'committed' },
          'tool.spawn': { actions: 'spawnTool' },
          'tool.stop': { actions: 'stopTool' },
          'tool.settled': { actions: ['settleTool', 'queueAnnouncement', 'stopTool'] },
          'xstate.error.actor.tool.*': { actions: ['toolCrashed', 'stopTool'] },
        },
        initial: 'opening',
        states: {
          opening: {
            tags: ['initializing'],
            always: [{ guard: 'hasFirstMessage', target: 'responding', actions: 'firstMessage' }, { target: 'idle' }],
          },
          idle: {
            always: { guard: 'hasAnnouncement', target: 'responding', actions: 'announce' },
            // Re-engagement is timed only when the agent has it: a timer armed and cancelled
            // on every pause costs the session its scheduling for nothing otherwise.
            initial: 'waiting',
            states: {
              waiting: { always: { guard: 'reengageEnabled', target: 'timed' } },
              timed: {
                after: {
                  reengage: [
                    { guard: 'nudged', target: '#session.live.responding', actions: 'farewell' },
                    { target: '#session.live.responding', actions: 'nudge' },
                  ],
                },
              },
            },
            on: {
              'stt.speech_started': { target: 'listening', actions: 'speechOn' },
              'stt.committed': { target: 'listening', actions: 'committed' },
              'user.message': { target: 'responding', actions: 'takeTyped' },
              'user.activity': { target: 'idle', reenter: true },
            },
          },
          listening: {
            tags: ['listening'],
            initial: 'check',
            on: {
              'stt.speech_started': { target: '.hearing', actions: 'speechOn' },
              'stt.speech_ended': { target: '.check', actions: 'speechOff' },
              'user.message': { target: 'responding', actions: 'takeTyped' },
            },
            states: {
              check: {
                always: [
                  { guard: 'userSpeaking', target: 'hearing' },
                  // A zero wait (eagerness `eager`) is taken at once, without a timer: a 0 ms
                  // timer would still wait for the rest of the event loop's iteration, tens of
                  // milliseconds under load (and arming one to cancel it costs every turn).
                  { guard: 'decideNowHeard', target: '#session.live.responding', actions: 'takeUserTurn' },
                  { guard: 'decideNow', target: '#session.live.idle' },
                  { target: 'deciding' },
                ],
              },
              hearing: {},
              deciding: {
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
            // The agent's turn runs while this state is active: `thinking` until its first audio,
            // then `speaking` (the run knows which; agentStateOf).
            tags: ['responding'],
            entry: 'startTurn',
            exit: 'leaveTurn',
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
            // Barge-in: the caller talking over the agent.
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
      ended: { id: 'ended', type: 'final', entry: 'cancelTools' },
    },
  });
}

const sessionMachine = createSessionMachine();
type SessionMachine = typeof sessionMachine;

/**
 * The agent state the client sees, from the state's tags (untagged states are `idle`); while
 * `responding`, the turn's run says whether it is still `thinking` or `speaking`.
 */
function agentStateOf(snap: SnapshotFrom<SessionMachine>, io: SessionIo): AgentState {
  if (snap.hasTag('responding')) return io.turn?.speaking ? 'speaking' : 'thinking';
  if (snap.hasTag('listening')) return 'listening';
  if (snap.hasTag('initializing')) return 'initializing';
  return 'idle';
}

/** Caller audio pieces whose arrival a session keeps (~5 s of 20 ms frames). */
const ARRIVALS = 256;

/**
 * Starts a session: the root actor of its own system (supervisor.ts says why), subscribed for
 * errors. The returned handle settles `ended` exactly once; a throwing session ends as
 * `failed` and takes nothing else with it.
 */
export function startSession(plan: SessionPlan, given: SessionDeps): SessionHandle {
  // A failure in the output (a transport's bug) ends this session as failed, never the process.
  const guard = <A extends unknown[]>(f: (...a: A) => void) => (...a: A) => {
    try {
      f(...a);
    } catch (err) {
      given.log?.error({ err }, 'session output failed');
      queueMicrotask(() => finish('failed', 'error'));
    }
  };
  const deps: SessionDeps = { ...given, output: { message: guard((m) => given.output.message(m)), audio: guard((p, at) => given.output.audio(p, at)) } };
  // The arrival of the caller's recent audio: pairs (stream end position in ms, clock time) of
  // the last ARRIVALS pieces: where the caller's end of speech arrived (TurnMetrics.recognition_ms).
  // Allocated with the first piece: 4 KB that a connected session which never sends audio (a
  // muted microphone) does not need (bench/README.md, idle sessions).
  let arrivals: Float64Array | null = null;
  let pieces = 0;
  const io: SessionIo = {
    stt: null,
    turn: null,
    leaving: null,
    speaking() {
      if (done || state === 'speaking') return;
      state = 'speaking';
      deps.output.message({ topic: 'lk.agent.state', state });
    },
    turns: [],
    sttSentMs: 0,
    sttBaseMs: 0,
    heardAt(atMs) {
      // The piece holding atMs: the first whose end is at or after it, with the piece before it
      // ending before it (the oldest piece kept has no known start, so it cannot be that piece
      // unless it is the stream's first).
      if (!arrivals) return null;
      const oldest = Math.max(0, pieces - ARRIVALS);
      let start = oldest === 0 ? 0 : Infinity;
      for (let i = oldest; i < pieces; i++) {
        const k = (i % ARRIVALS) * 2;
        if (arrivals[k] >= atMs) return start <= atMs ? arrivals[k + 1] - (arrivals[k] - atMs) : null;
        start = arrivals[k];
      }
      return null;
    },
    context() { return actor.getSnapshot().context; },
    // `hang_up_call` when the plan enables it, then the runtime's tools. Calls run as children
    // of this session's actor.
    tools: new ToolCalls({
      tools: [...(plan.hangUpTool ? [hangUpTool] : []), ...(deps.tools ?? [])],
      output: deps.output,
      record: deps.record,
      clock: deps.clock,
      toolEvents: plan.toolEvents,
      spawn(input) { actor.send({ type: 'tool.spawn', input }); },
      stop(callId) { actor.send({ type: 'tool.stop', callId }); },
    }),
  };
  let state: AgentState = 'initializing';
  let sentBytes = 0;
  let settle!: (e: SessionEnd) => void;
  const ended = new Promise<SessionEnd>((r) => (settle = r));
  let done = false;
  const finish = (status: 'completed' | 'failed', reason: string) => {
    if (done) return;
    done = true;
    io.tools.cancelAll();
    io.turn?.stop();
    io.leaving?.stop();
    io.stt?.end();
    io.stt?.cancel();
    // Stopping the session stops its children (the turn, the listener, tool calls still running).
    actor.stop();
    settle({ status, reason, turns: io.turns });
  };
  // The io above reaches the actor only once it runs.
  const actor = createActor(sessionMachine, { input: { plan, rt: { deps, io } }, clock: deps.clock });
  actor.subscribe({
    next(snap) {
      // The turn left in this step, once the step's actions have settled it.
      const left = io.leaving;
      if (left) {
        io.leaving = null;
        left.stop();
      }
      if (snap.status === 'done') {
        finish(snap.context.failed ? 'failed' : 'completed', snap.context.endReason ?? 'ended');
        return;
      }
      const s = agentStateOf(snap, io);
      if (s !== state) {
        state = s;
        deps.output.message({ topic: 'lk.agent.state', state: s });
      }
    },
    error(err) {
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
      deps.onCallerAudio?.(pcm);
      if (done || !io.stt) return;
      sentBytes += pcm.length;
      io.sttSentMs = sentBytes / 32; // 16 kHz × 2 bytes = 32 bytes per millisecond
      const k = (pieces++ % ARRIVALS) * 2;
      arrivals ??= new Float64Array(ARRIVALS * 2);
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
  };
}
