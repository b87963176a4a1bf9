/**
 * The session runtime: glue between the durable record, the inference client, the
 * transports and the session actors. It turns a session row and its pinned config into a
 * `SessionPlan`, adapts the inference client to the actor's `SessionBackend`, consumes
 * tokens, holds live sessions across network drops, and writes the record as the
 * conversation goes (items) and when it ends (status, reason, per-turn latency).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import os from 'node:os';
import type client from 'prom-client';
import type { Clock } from '../../actors/clock.ts';
import type { SessionHandle } from '../../actors/session.ts';
import { Supervisor } from '../../actors/supervisor.ts';
import type { ChatMessage, LlmEvent, ServerMessage, SessionBackend, SessionEnd, SessionItem, SessionOutput, SessionPlan, SessionTool, SttEvent, Timed, TtsEvent } from '../../actors/types.ts';
import { SESSION_SAMPLE_RATE_HZ } from '../../actors/types.ts';
import { createResampler, int16ToPcmBytes, pcmBytesToInt16, type Resampler } from '../audio/index.ts';
import { AudioEncoding, Role } from '../gen/inference/v1/inference_pb.ts';
import type { InferenceClient, SynthesizeInput } from '../inference/index.ts';
import type { VoiceResolver } from '../speech/request.ts';
import type { Logger } from '../log.ts';
import type { SharedState } from '../state/index.ts';
import { registryKey, type SessionRegistry } from '../state/session-registry.ts';
import { NodeReaper, STALE_MS } from './node-reaper.ts';
import { AudioBatcher } from './audio-batch.ts';
import type { Sql } from '../store/db.ts';
import { getSessionRuntime, markSessionActive, markSessionEnded, refundExpiredHolds, undoSessionActive, type SessionRow } from './store.ts';
import { SessionRecordWriter, type RecordWriterOptions } from './record-writer.ts';
import { ItemBatcher } from './item-batch.ts';
import type { StoredDraft } from '../agent-config/index.ts';
import { DEFAULT_VOICE_ID } from '../agent-config/defaults.ts';
import { knowledgeRetriever } from '../knowledge/retrieval.ts';
import type { SessionRecorder } from '../recordings/index.ts';
import { customLlmGenerate, type LlmFailure } from './custom-llm.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import { sessionTokenKey, sessionTokenOfKey, SESSION_CONTROL_CHANNEL, SESSION_TOKEN_TTL_MS } from './service.ts';
import { ServiceError, isConnectionError } from '../errors.ts';
import { createSessionTools, toolSystemValues, type ClientToolResult } from '../tools/runtime.ts';
import type { Resolver } from '../net/index.ts';
import { promptVariables, renderTemplate, systemVariables, worldContext, type VariableValue } from './variables.ts';

/** How often expired pending sessions are swept for refunds. */
export const EXPIRED_SWEEP_MS = 60_000;

/** How long a session whose socket dropped waits for its client to reconnect. */
export const RECONNECT_GRACE_MS = 30_000;

/** How soon the agent answers after the caller stops (on top of the recognizer's end of speech). */
export const EAGERNESS_MS = { eager: 0, balanced: 250, relaxed: 700 } as const;
/** How long the caller must speak over the agent before it stops. */
export const BARGE_IN_MS = { high: 0, balanced: 200, low: 500 } as const;

const LANGUAGE_NAMES: Record<string, string> = { en: 'English', ja: 'Japanese', zh: 'Chinese', ko: 'Korean', es: 'Spanish', fr: 'French', de: 'German' };
const NUDGE: Record<string, string> = {
  en: 'Are you still there?',
  es: '¿Sigues ahí?',
  fr: 'Vous êtes toujours là ?',
  de: 'Sind Sie noch da?',
  ja: 'まだいらっしゃいますか？',
  zh: '您还在吗？',
  ko: '아직 계세요?',
};
const FAREWELL: Record<string, string> = {
  en: 'It seems you have stepped away. Goodbye!',
  es: 'Parece que te has ido. ¡Adiós!',
  fr: 'Il semble que vous soyez parti. Au revoir !',
  de: 'Sie scheinen nicht mehr da zu sein. Auf Wiederhören!',
  ja: 'お話がないようですので、失礼します。',
  zh: '看来您已经离开了，再见！',
  ko: '자리를 비우신 것 같네요. 안녕히 계세요!',
};

/** `ended_reason` of an outbound call that reached an answering machine: hung up at once, or its message left. */
export const VOICEMAIL_HUNG_UP = 'voicemail';
export const VOICEMAIL_LEFT = 'voicemail_message_left';

/**
 * Turns the session record and its pinned config into what the actor runs. `voicemail`: the
 * call reached an answering machine and the agent leaves the version's voicemail message
 * (`conversation.outbound.voicemail`: literal, or generated from it as a prompt) as its only
 * turn, uninterrupted, then hangs up (docs/telephony.md, "Answering machines").
 */
export function buildPlan(session: SessionRow, config: StoredDraft, voicemail = false): SessionPlan {
  const o = session.overrides ?? {};
  const language = o.language ?? config.voice.speaking_language;
  const created = new Date(session.created_at);
  const vars: Record<string, VariableValue> = {
    ...promptVariables(session.dynamic_variables ?? {}),
    ...systemVariables({ channel: session.source !== 'phone' ? 'web_voice' : session.direction === 'outbound' ? 'phone_outbound' : 'phone_inbound', timezone: session.timezone, now: created, language, callerNumber: session.caller_number, dialedNumber: session.dialed_number }),
  };
  const render = (text: string) => renderTemplate(text, vars);
  const p = config.prompt;
  let firstMessage: SessionPlan['firstMessage'];
  if (o.first_message !== undefined) firstMessage = { mode: 'fixed', text: render(o.first_message) };
  else if (o.first_message_prompt !== undefined) firstMessage = { mode: 'prompt', prompt: render(o.first_message_prompt) };
  else if (p.first_message_mode === 'fixed') firstMessage = { mode: 'fixed', text: render(p.first_message) };
  else if (p.first_message_mode === 'prompt') firstMessage = { mode: 'prompt', prompt: render(p.first_message_prompt) };
  else firstMessage = { mode: 'off' };
  if (firstMessage.mode === 'fixed' && !firstMessage.text.trim()) firstMessage = { mode: 'off' };
  const vm = voicemail ? config.conversation.outbound?.voicemail : undefined;
  if (vm) firstMessage = vm.action === 'leave_prompt_message' ? { mode: 'prompt', prompt: render(vm.message) } : { mode: 'fixed', text: render(vm.message) };
  const c = config.conversation;
  const halfIdle = Math.max(5_000, (c.hangup_after_seconds * 1000) / 2);
  const languageName = LANGUAGE_NAMES[language] ?? language;
  return {
    sessionId: session.id,
    systemPrompt: render(o.system_prompt ?? p.system_prompt),
    context: planContext(languageName, language, session.world_context ? { created, timezone: session.timezone } : null),
    firstMessage,
    // A message that renders to nothing (only empty variables) left nothing: the call was hung up.
    ...(vm ? { endAfterFirstMessage: firstMessage.mode === 'fixed' && !firstMessage.text.trim() ? VOICEMAIL_HUNG_UP : VOICEMAIL_LEFT } : {}),
    language,
    voiceId: o.voice_id ?? config.voice.voice_id,
    decideMs: EAGERNESS_MS[c.eagerness] ?? EAGERNESS_MS.balanced,
    // An answering machine's greeting or beep must not cut the message short.
    interruptible: vm ? false : c.interruptible,
    bargeInMs: BARGE_IN_MS[c.interruption_sensitivity] ?? BARGE_IN_MS.balanced,
    maxDurationMs: session.max_duration_seconds * 1000,
    hangUpTool: config.tools.system_tools.hang_up_call,
    reengage: c.reengage_enabled ? { afterMs: halfIdle, nudge: NUDGE[language] ?? NUDGE.en, farewell: c.hangup_farewell_enabled ? FAREWELL[language] ?? FAREWELL.en : null } : null,
    toolEvents: session.tool_events,
  };
}

/**
 * The plan's `context`: a closure over these values only. A closure written inside `buildPlan`
 * kept its whole scope alive (the session row, its variables) for the session's life: ~4 KB
 * per connected session (bench/README.md, idle sessions).
 */
function planContext(languageName: string, language: string, world: { created: Date; timezone: SessionRow['timezone'] } | null): SessionPlan['context'] {
  return (now) => {
    const lines = [`Always speak ${languageName} (${language}), whatever language the caller uses.`];
    if (world) lines.push(worldContext('start', world.created, world.timezone), worldContext('turn', new Date(now), world.timezone));
    return lines;
  };
}

const ROLE: Record<ChatMessage['role'], Role> = { system: Role.SYSTEM, user: Role.USER, assistant: Role.ASSISTANT, tool: Role.TOOL };

/** The inference client as a session backend: 16 kHz PCM both ways, resampled when needed. */
export function inferenceBackend(inference: InferenceClient, o: { teamId: string; chatModel: string; requestId?: string; resolveVoice?: VoiceResolver; log?: Logger; voiceId?: string; recognizerBatchMs?: number }): SessionBackend {
  const call = (signal: AbortSignal) => ({ signal, teamId: o.teamId, requestId: o.requestId });
  // The agent's voice_id names a stored voice model: resolved once per session to reference
  // audio (as /v1/tts does); a voice the registry does not know speaks with the backend's
  // default voice rather than failing every turn.
  let voice: Promise<Pick<SynthesizeInput, 'referenceId' | 'references'>> | null = null;
  const voiceFor = (voiceId: string) =>
    (voice ??= (async () => {
      if (!voiceId || !o.resolveVoice) return {};
      try {
        const v = await o.resolveVoice(o.teamId, voiceId);
        if (v.references.length) return { references: v.references.map((r) => ({ audio: r.audio, text: r.text, input: { encoding: AudioEncoding.WAV } })) };
        return { referenceId: v.referenceId };
      } catch (err) {
        if (voiceId !== DEFAULT_VOICE_ID) o.log?.warn({ err, voiceId }, 'session voice not found; the default voice speaks');
        return {};
      }
    })());
  // The session's voice (`voiceId`) is looked up as it starts, not when its first reply is ready
  // to speak: the store's answer was on that turn's path whenever the model answered first.
  if (o.voiceId !== undefined) void voiceFor(o.voiceId);
  return {
    async transcribe({ language, signal }) {
      const s = await inference.transcribeStream({ model: 'transcribe-1', language, input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: SESSION_SAMPLE_RATE_HZ } }, call(signal));
      async function* events(): AsyncGenerator<SttEvent> {
        for await (const r of s) {
          const e = r.event;
          if (e.case === 'speechStarted') yield { type: 'speech_started', atMs: e.value.atMs };
          else if (e.case === 'speechEnded') yield { type: 'speech_ended', atMs: e.value.atMs };
          else if (e.case === 'partial') yield { type: 'partial', text: e.value };
          else if (e.case === 'committed') yield { type: 'committed', text: e.value.text };
        }
      }
      const it = events();
      // Caller frames go to the recognizer in batches of RECOGNIZER_BATCH_MS (audio-batch.ts).
      const batch = new AudioBatcher((pcm) => s.sendAudio(pcm), { batchMs: o.recognizerBatchMs });
      return {
        sendAudio(pcm) { batch.push(pcm); },
        end() {
          batch.end();
          s.end();
        },
        cancel() {
          batch.cancel();
          s.cancel();
        },
        [Symbol.asyncIterator]: () => it,
      };
    },
    async *generate({ messages, tools, signal }): AsyncGenerator<LlmEvent> {
      const req = {
        model: o.chatModel,
        messages: messages.map((m) => ({ role: ROLE[m.role], content: m.content, toolCalls: m.toolCalls ?? [], toolCallId: m.toolCallId ?? '', name: m.name ?? '' })),
        tools,
      };
      for await (const r of inference.generate(req, call(signal))) {
        const e = r.event;
        if (e.case === 'textDelta') yield { type: 'text', text: e.value };
        else if (e.case === 'toolCall') yield { type: 'tool_call', id: e.value.id, name: e.value.name, argumentsJson: e.value.argumentsJson };
        else if (e.case === 'finish') yield { type: 'finish', reason: String(e.value.reason) };
      }
    },
    async synthesize({ voiceId, language, signal }) {
      const s = await inference.synthesizeStream({ ...(await voiceFor(voiceId)), language, output: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: SESSION_SAMPLE_RATE_HZ, allowOtherRate: true } }, call(signal));
      let resampler: Resampler | null = null;
      async function* events(): AsyncGenerator<TtsEvent> {
        for await (const r of s) {
          const e = r.event;
          if (e.case === 'flushed') {
            yield { type: 'flushed' };
            continue;
          }
          if (e.case !== 'chunk') continue;
          const c = e.value;
          let pcm = c.audio;
          if (c.sampleRateHz && c.sampleRateHz !== SESSION_SAMPLE_RATE_HZ && pcm.length) {
            resampler ??= createResampler(c.sampleRateHz, SESSION_SAMPLE_RATE_HZ);
            pcm = int16ToPcmBytes(resampler.push(pcmBytesToInt16(pcm)));
          }
          const timed = c.alignment?.characters.length ? c.alignment.characters : (c.alignment?.segments ?? []).map((w, i, all) => ({ ...w, text: i < all.length - 1 ? `${w.text} ` : w.text }));
          const chars: Timed[] = timed.map((t) => ({ text: t.text, startMs: t.startMs, endMs: t.endMs }));
          yield { type: 'audio', pcm, offsetMs: c.offsetMs, chars };
        }
      }
      const it = events();
      return { send: (t) => s.send(t), flush: () => s.flush(), end: () => s.end(), cancel: () => s.cancel(), [Symbol.asyncIterator]: () => it };
    },
  };
}

/**
 * The backend with `generate` replaced by the agent's custom LLM endpoint when its config has
 * `llm.custom` (docs/api/agents.md; never a fallback to a platform model). Otherwise unchanged.
 */
function withCustomLlm(
  backend: SessionBackend,
  config: StoredDraft,
  o: { session: Pick<SessionRow, 'id' | 'end_user_id'>; plan: SessionPlan; box?: SecretBox; allow?: string[]; log: Logger; onFailure(f: LlmFailure): void },
): SessionBackend {
  const custom = config.llm?.custom;
  if (!custom || !o.box) return backend;
  const generate = customLlmGenerate({
    custom,
    box: o.box,
    sessionId: o.session.id,
    endUserId: o.session.end_user_id,
    language: o.plan.language,
    outbound: o.allow ? { allow: o.allow } : undefined,
    onFailure: (f) => {
      o.log.warn({ reason: f.reason, status: f.status, consecutive: f.consecutive, fatal: f.fatal }, 'custom LLM endpoint failed');
      o.onFailure(f);
    },
  });
  return { ...backend, generate };
}

/** What a transport gives a live session to talk to its client. */
export interface ClientLink {
  message(m: ServerMessage | SessionMessage): void;
  audio(pcm: Uint8Array): void;
  /** Closes the connection (the session has ended, or a newer connection replaced it). */
  close(code: number, reason: string): void;
}

/** Session-level messages of the transport (beyond the wire protocol of docs/api/sessions.md). */
export type SessionMessage =
  | { topic: 'session'; type: 'session.started'; sessionId: string; resume: string; resumed: boolean; sampleRateHz: number }
  | { topic: 'session'; type: 'session.ended'; reason: string }
  /** Sent to a resume that reached a node not holding the session, just before close code 4307. */
  | { topic: 'session'; type: 'session.moved'; sessionId: string; url: string };

/** Why a connection is refused: a close code and its reason. */
export class ConnectRefused extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
  ) {
    super(reason);
  }
}

export interface LiveSession {
  readonly id: string;
  readonly handle: SessionHandle;
  /** The secret a client presents to reconnect after a drop. */
  readonly resume: string;
  attach(link: ClientLink): void;
  /** The client's socket closed: `clean` ends the session, a drop starts the grace period. */
  detach(link: ClientLink, how: 'clean' | 'drop'): void;
  /** A client's `client_tool.result`: settles the call that waits for it; unknown or settled ids are ignored. */
  clientToolResult(r: ClientToolResult): void;
}

export interface RuntimeOptions {
  sql: Sql;
  state: SharedState;
  inference: InferenceClient;
  log: Logger;
  clock: Clock;
  maxSessions: number;
  /**
   * Past this wait (ms) of input written to the inference backend and not yet sent, new sessions
   * are refused (`overloaded`); 0 or unset: never (`PARLEY_MAX_INFERENCE_BACKLOG_MS`).
   */
  maxInferenceBacklogMs?: number;
  /** The node's session count shared by its workers (`Supervisor` `shared`); unset: this runtime's own. */
  sharedCapacity?: Int32Array;
  registry?: client.Registry;
  nodeId?: string;
  /** Node liveness: `src/sessions/node-reaper.ts` (beats, and ends the sessions of lost nodes). Default 20 s. */
  nodeStaleMs?: number;
  reconnectGraceMs?: number;
  /** Stored voice models (src/voices/service.ts `resolveVoice`, bound to the store). */
  resolveVoice?: VoiceResolver;
  /** Opens sealed config secrets (the custom LLM key); without it custom-LLM sessions are refused. */
  box?: SecretBox;
  /** Which node holds each live session (shared state), for resumes that reach another node. */
  sessionRegistry?: SessionRegistry;
  /** `host:port` entries the custom LLM client may reach despite the SSRF guard (`PARLEY_OUTBOUND_ALLOW`). */
  outboundAllow?: string[];
  /** Bounds of the records kept while the store is unreachable (tests shorten the backoff). */
  recordWriter?: Pick<RecordWriterOptions, 'maxPendingItems' | 'endRetryMs' | 'backoffMs'>;
  /** Per-speaker recording of sessions with `record_audio` (src/recordings/); none when unset. */
  recordings?: { start(sessionId: string, now: () => number): SessionRecorder };
}

const sha256 = (s: string) => createHash('sha256').update(s).digest();

export class SessionRuntime {
  readonly supervisor: Supervisor;
  readonly nodeId: string;
  /** The clock new sessions run on (tests swap in a `TestClock`). */
  clock: Clock;
  /** Name resolution for webhook tool calls of new sessions (default: the system's; tests inject one). */
  toolLookup?: Resolver;
  private readonly live = new Map<string, LiveSession>();
  /** Records of ended sessions still waiting for the store. */
  private readonly deferred = new Set<SessionRecordWriter>();
  /**
   * Activations whose answer was lost (the store dropped as it took them), being undone so
   * their given-back tokens can start them: session id → done (`undoActivation`).
   */
  private readonly undoing = new Map<string, Promise<void>>();
  private unsubscribe: (() => Promise<void>) | null = null;
  /** Every live session's items of this loop, written together (item-batch.ts). */
  private readonly items: ItemBatcher;

  constructor(private readonly o: RuntimeOptions) {
    this.clock = o.clock;
    this.items = new ItemBatcher(o.sql);
    this.nodeId = o.nodeId ?? `${os.hostname()}:${process.pid}`;
    this.supervisor = new Supervisor({ maxSessions: o.maxSessions, shared: o.sharedCapacity, clock: o.clock, registry: o.registry, log: o.log });
  }

  /** Subscribes to `session-control` (end messages from any node). */
  async start(): Promise<void> {
    this.unsubscribe = await this.o.state.subscribe(SESSION_CONTROL_CHANNEL, (m) => this.supervisor.control(m));
    // Pending sessions nobody joined give their up-front hold back once their token expired.
    this.sweep = setInterval(() => {
      refundExpiredHolds(this.o.sql).catch((err) => this.o.log.warn({ err }, 'expired session holds not refunded'));
    }, EXPIRED_SWEEP_MS);
    this.sweep.unref();
    if ((this.o.maxInferenceBacklogMs ?? 0) > 0) {
      // The log says when the node starts and stops refusing, with or without creations to see it.
      this.backlogCheck = setInterval(() => this.overloaded(), 1000);
      this.backlogCheck.unref();
    }
    this.o.sessionRegistry?.start();
    const staleMs = this.o.nodeStaleMs ?? STALE_MS;
    this.reaper = new NodeReaper({
      sql: this.o.sql, nodeId: this.nodeId, log: this.o.log, staleMs, beatMs: staleMs / 4, sweepMs: staleMs / 2,
      onEnded: async (ids) => { await Promise.all(ids.map((id) => this.o.state.del(registryKey(id)))); },
    });
    await this.reaper.start();
  }

  private sweep: NodeJS.Timeout | null = null;
  private reaper: NodeReaper | null = null;

  hasCapacity(): boolean {
    return this.supervisor.hasCapacity();
  }

  /** This node was refusing new sessions at the last look (`overloaded`): for the log's transitions. */
  private behind = false;
  private backlogCheck: NodeJS.Timeout | null = null;

  /**
   * Why this node takes no new session now, or null: input written to the inference backend
   * (caller audio, synthesis text) has waited longer than `maxInferenceBacklogMs` to be sent, so
   * every caller here already hears late answers and another session would add to it
   * (docs/inference.md, "Send backlog"). Logged once as it starts and once as it ends.
   */
  overloaded(): string | null {
    const max = this.o.maxInferenceBacklogMs ?? 0;
    if (!(max > 0)) return null;
    const b = this.o.inference.sendBacklog();
    const call = b.recognition.ageMs >= b.synthesis.ageMs ? 'recognition' : 'synthesis';
    const ageMs = b[call].ageMs;
    const behind = ageMs > max;
    if (behind !== this.behind) {
      this.behind = behind;
      if (behind) this.o.log.warn({ call, waitedMs: Math.round(ageMs), bytes: b.recognition.bytes, maxMs: max }, 'inference backlog past its mark: new sessions refused (503)');
      else this.o.log.info({ maxMs: max }, 'inference backlog back under its mark: new sessions admitted');
    }
    if (!behind) return null;
    const what = call === 'recognition' ? 'Caller audio' : 'Synthesis input';
    return `This node is behind: ${what} has waited ${(ageMs / 1000).toFixed(1)} s to reach its inference backend. Try again shortly`;
  }

  /**
   * Consumes a session token (single use) and starts the session's actor. Refusals carry
   * the close code: 4401 for an unknown, expired or already used token.
   */
  async connect(token: string): Promise<LiveSession> {
    if (!token) throw new ConnectRefused(4401, 'Missing token');
    let sessionId: string | null;
    try {
      sessionId = await this.o.state.take(sessionTokenKey(token));
    } catch (err) {
      // The token store cannot be reached (a Redis restart, a cut): the client may try again.
      // The token was not taken, or, if the command ran before the connection dropped, it is
      // spent and the retry is refused 4401: never admitted twice (docs/reliability.md).
      if (err instanceof ServiceError && err.code === 'unavailable') throw new ConnectRefused(4503, err.message);
      throw err;
    }
    if (!sessionId) throw new ConnectRefused(4401, 'Invalid or expired token');
    await this.o.state.del(sessionTokenOfKey(sessionId)).catch(() => false);
    const release = this.supervisor.reserve();
    if (!release) throw new ConnectRefused(4503, 'Session capacity reached on this node');
    try {
      let rt: Awaited<ReturnType<typeof getSessionRuntime>>;
      let activated: boolean;
      let activating = false;
      // The token is given back (the store's record still guards it against a second use) and
      // the client may try again.
      const tryAgain = async () => {
        await this.o.state.set(sessionTokenKey(token), sessionId, SESSION_TOKEN_TTL_MS).catch(() => {});
        return new ConnectRefused(4503, 'The database is unavailable: try again shortly');
      };
      // A lost activation of this token's session is undone first (see below).
      if (this.undoing.has(sessionId)) throw await tryAgain();
      try {
        rt = await getSessionRuntime(this.o.sql, sessionId);
        if (!rt) throw new ConnectRefused(4401, 'Invalid or expired token');
        if (rt.session.status !== 'pending' || new Date(rt.session.expires_at).getTime() <= Date.now()) throw new ConnectRefused(4401, 'Invalid or expired token');
        activating = true;
        activated = await markSessionActive(this.o.sql, sessionId, this.nodeId);
      } catch (err) {
        if (!isConnectionError(err)) throw err;
        // The store cannot be reached: the client may try again. An activation sent as the
        // connection dropped may have committed, its answer lost: the session would be active
        // on this node with nothing running it, and the token refused 4401 for good (found by
        // bench/chaos.ts --fault postgres). It is undone once the store answers, before the
        // token is taken back here.
        if (activating) this.undoActivation(sessionId);
        throw await tryAgain();
      }
      if (!activated) throw new ConnectRefused(4401, 'Invalid or expired token');
      if (rt.config.llm?.custom && !this.o.box) {
        // Without the secret box the endpoint's key cannot be opened; never fall back to a platform model.
        await markSessionEnded(this.o.sql, sessionId, { status: 'failed', reason: 'llm_endpoint_failure' });
        throw new ConnectRefused(4500, 'Custom LLM endpoints are not supported by this runtime yet');
      }
      return this.launch(rt.session, rt.config, { pinned: rt.pinned });
    } finally {
      release();
    }
  }

  /**
   * Sets a session whose activation may have committed unanswered back to pending (if it did),
   * retrying while the store is unreachable, for as long as its token lives. Connects of its
   * token on this node wait for it; it touches only a session this node activated and does not
   * run, so a session started meanwhile (by this token on another node) is left alone.
   */
  private undoActivation(sessionId: string): void {
    if (this.undoing.has(sessionId)) return;
    const until = Date.now() + SESSION_TOKEN_TTL_MS;
    const done = (async () => {
      for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
        try {
          if (!this.live.has(sessionId) && (await undoSessionActive(this.o.sql, sessionId, this.nodeId))) {
            this.o.log.info({ sessionId }, 'session activation whose answer was lost undone');
          }
          return;
        } catch (err) {
          if (!isConnectionError(err) || Date.now() > until) {
            this.o.log.warn({ err, sessionId }, 'session activation whose answer was lost not undone: its token is refused');
            return;
          }
        }
        await new Promise((r) => setTimeout(r, wait).unref());
      }
    })().finally(() => this.undoing.delete(sessionId));
    this.undoing.set(sessionId, done);
  }

  /** Reattaches a client whose socket dropped; 4401 for a wrong secret, 4404 when the session is not live here. */
  resume(sessionId: string, secret: string): LiveSession {
    const s = this.live.get(sessionId);
    if (!s) throw new ConnectRefused(4404, 'Session is not live');
    const a = sha256(secret);
    const b = sha256(s.resume);
    if (!timingSafeEqual(a, b)) throw new ConnectRefused(4401, 'Invalid resume secret');
    return s;
  }

  /**
   * For a resume of a session this node does not hold: the connect URL of the node that
   * does (the client reconnects there). 4404 when no other node holds it, 4401 for a wrong
   * secret (checked against the hash the owner registered).
   */
  async locate(sessionId: string, secret: string): Promise<string> {
    return (await this.locateOwner(sessionId, secret)).url;
  }

  /** `locate`, with the owner's node id (a sibling worker of this node relays instead). */
  async locateOwner(sessionId: string, secret: string): Promise<{ node: string; url: string }> {
    const owner = sessionId ? await this.o.sessionRegistry?.lookup(sessionId) : null;
    if (!owner || owner.node === this.nodeId) throw new ConnectRefused(4404, 'Session is not live');
    const expected = Buffer.from(owner.resume, 'hex');
    if (expected.length !== 32 || !timingSafeEqual(sha256(secret), expected)) throw new ConnectRefused(4401, 'Invalid resume secret');
    return { node: owner.node, url: owner.url };
  }

  /**
   * Starts a phone session directly (no token: the carrier's call is the connection). Refusals
   * as with `connect`: 4503 at the node's cap, 4404 when the session is not pending.
   * `tools` are offered to the model besides the plan's own (the phone's `transfer_call`).
   */
  async startCall(sessionId: string, extra: { tools?: SessionTool[]; voicemail?: boolean } = {}): Promise<LiveSession> {
    const release = this.supervisor.reserve();
    if (!release) throw new ConnectRefused(4503, 'Session capacity reached on this node');
    try {
      const rt = await getSessionRuntime(this.o.sql, sessionId);
      if (!rt || rt.session.status !== 'pending') throw new ConnectRefused(4404, 'Session is not pending');
      if (!(await markSessionActive(this.o.sql, sessionId, this.nodeId))) throw new ConnectRefused(4404, 'Session is not pending');
      if (rt.config.llm?.custom && !this.o.box) {
        await markSessionEnded(this.o.sql, sessionId, { status: 'failed', reason: 'llm_endpoint_failure' });
        throw new ConnectRefused(4500, 'Custom LLM endpoints are not supported by this runtime yet');
      }
      return this.launch(rt.session, rt.config, { ...extra, pinned: rt.pinned });
    } finally {
      release();
    }
  }

  private launch(session: SessionRow, config: StoredDraft, extra: { tools?: SessionTool[]; pinned?: unknown; voicemail?: boolean } = {}): LiveSession {
    const plan = buildPlan(session, config, extra.voicemail);
    // The closures below use the id, never the row: a closure naming `session` kept the whole
    // row (43 columns, ~4 KB) alive for the session's life (bench/README.md, idle sessions).
    const id = session.id;
    const log = this.o.log.child({ sessionId: id });
    const resume = randomBytes(24).toString('base64url');
    let link: ClientLink | null = null;
    let grace: unknown = null;
    const clock = this.clock;
    // Store writes in order, one at a time; the end waits for them. While the store is
    // unreachable they wait in memory and are retried (record-writer.ts).
    const writer = new SessionRecordWriter({ sql: this.o.sql, sessionId: session.id, log, append: this.items.append.bind(this.items), ...this.o.recordWriter });
    const record = (items: SessionItem[]) => writer.add(items);
    // Set when the custom LLM failed for good: the session ends once the apology has been spoken.
    let endWhenIdle: string | null = null;
    // Recording taps the audio outside the machine: caller frames as the session's handle takes
    // them (`onCallerAudio`, placed at their arrival), agent frames as they go out
    // (`output.audio`, placed at their play time: a stall that delayed their sending does not
    // cut the agent's speech in the recording).
    const recorder = session.record_audio ? (this.o.recordings?.start(session.id, () => clock.now()) ?? null) : null;
    const output: SessionOutput = {
      message(m) {
        link?.message(m);
        if (endWhenIdle && m.topic === 'lk.agent.state' && (m.state === 'idle' || m.state === 'listening')) handle.end(endWhenIdle);
      },
      audio(pcm, playAt) {
        recorder?.agent(pcm, playAt);
        link?.audio(pcm);
      },
    };
    const chatModel = `llm-${config.llm?.tier ?? 'medium'}`;
    // The webhook and client tools the version pinned at publish (src/tools/runtime.ts).
    const sessionTools = this.o.box
      ? createSessionTools({
        pinned: extra.pinned ?? null, config: config.tools, box: this.o.box, clock, log, output,
        outbound: { allow: this.o.outboundAllow ?? [], lookup: this.toolLookup },
        system: toolSystemValues(session, plan.language), sealedSecrets: session.secret_variables,
      })
      : null;
    const handle = this.supervisor.start(
      plan,
      { backend: withCustomLlm(inferenceBackend(this.o.inference, { teamId: session.team_id, chatModel, requestId: session.id, resolveVoice: this.o.resolveVoice, log, voiceId: plan.voiceId }), config, {
        session: { id, end_user_id: session.end_user_id }, plan, box: this.o.box, allow: this.o.outboundAllow, log,
        onFailure: (f) => {
          record([{ type: 'llm.endpoint_error', payload: { ...f, created_at: new Date(clock.now()).toISOString() } }]);
          output.message({ topic: 'agent-event', type: 'error', code: 'provider_error' });
          if (f.fatal) endWhenIdle = 'llm_endpoint_failure';
        },
      }), output, onCallerAudio: recorder ? (pcm) => recorder.user(pcm) : undefined, record, clock, log,
        // Each turn's latency split, as it starts speaking (the console's test call shows it live).
        onTurn(m) { output.message({ topic: 'agent-event', type: 'turn.metrics', ...m }); },
        retrieve: knowledgeRetriever(this.o.sql, { config, pinned: extra.pinned, log }), tools: [...(sessionTools?.tools ?? []), ...(extra.tools ?? [])] },
      async (e: SessionEnd) => {
        if (grace !== null) clock.clearTimeout(grace);
        this.live.delete(id);
        this.o.sessionRegistry?.release(id).catch((err) => log.warn({ err }, 'session registry entry not removed'));
        const l = link;
        link = null;
        // The record is final before the client hears the end: a client that reads the session
        // as soon as it is told sees it ended, with its whole transcript.
        // While the store is unreachable the client is told at once; the record follows when
        // the store is back (retried, bounded in time).
        try {
          // An endpoint that failed for good is a runtime failure, though the call ended in order.
          if (e.reason === 'llm_endpoint_failure') e = { ...e, status: 'failed' };
          if ((await writer.finish({ status: e.status, reason: e.reason, metrics: { turns: e.turns } })) === 'deferred') {
            this.deferred.add(writer);
            void writer.done.then(() => this.deferred.delete(writer));
          }
        } finally {
          if (l) {
            l.message({ topic: 'session', type: 'session.ended', reason: e.reason });
            l.close(1000, e.reason);
          }
        }
        await recorder?.finish();
        log.info({ status: e.status, reason: e.reason, turns: e.turns.length }, 'session ended');
      },
    );
    const graceMs = this.o.reconnectGraceMs ?? RECONNECT_GRACE_MS;
    // Object methods, not arrow properties, here and in the other objects a live session keeps:
    // under tsx (esbuild's keepNames) a named arrow function is wrapped in `__name`, which
    // redefines its `name` and gives it a 256-byte property dictionary (bench/README.md).
    const live: LiveSession = {
      id: session.id,
      handle,
      resume,
      clientToolResult(r) { void sessionTools?.client.deliver(r); },
      attach(l) {
        if (grace !== null) clock.clearTimeout(grace);
        grace = null;
        const previous = link;
        link = l;
        if (previous && previous !== l) previous.close(4409, 'Replaced by a newer connection');
      },
      detach(l, how) {
        if (link !== l) return;
        link = null;
        if (how === 'clean') {
          handle.end('user_hangup');
          return;
        }
        grace = clock.setTimeout(() => handle.end('connection_lost'), graceMs);
      },
    };
    this.live.set(session.id, live);
    this.o.sessionRegistry?.claim(session.id, sha256(resume).toString('hex')).catch((err) => log.warn({ err }, 'session not registered; resumes through other nodes will fail'));
    log.info({ transport: session.transport }, 'session started');
    return live;
  }

  /** Ends every live session (reason `shutdown`) and waits for their records. */
  async close(timeoutMs = 10_000): Promise<void> {
    if (this.sweep) clearInterval(this.sweep);
    if (this.backlogCheck) clearInterval(this.backlogCheck);
    await this.unsubscribe?.().catch(() => {});
    await this.supervisor.drain('shutdown', timeoutMs);
    // Records the store could not take yet get the rest of the time; what is left is logged.
    if (this.deferred.size) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all([...this.deferred].map((w) => w.done)), new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
      clearTimeout(timer);
      for (const w of this.deferred) w.stop();
    }
    await this.o.sessionRegistry?.close();
    await this.reaper?.close({ forget: this.supervisor.size === 0 });
  }
}
