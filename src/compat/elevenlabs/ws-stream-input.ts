/**
 * `wss /compat/elevenlabs/v1/text-to-speech/{voice_id}/stream-input` (docs/api/compat.md
 * "Family C sockets", "Clients"; D-COMPAT-12, D-COMPAT-13).
 *
 * Handshake (HTTP answers in the family envelope, before the upgrade):
 * - `output_format` never accepted (μ-law, A-law, unparsable) → 400 `invalid_request`;
 *   `model_id` that is not a model (an unset placeholder such as `undefined` included) →
 *   400 `model_not_found`; an unknown `X-Service-` header → 400;
 * - a key in `xi-api-key` (or `Authorization: Bearer`) is checked here: invalid → 401
 *   `provider_error` `No permission`. Without one the key must come in the first message
 *   (`xi_api_key`, `xi-api-key` or `authorization`);
 * - `?token=` with a single-use `tts_websocket` token (tokens.ts) authenticates instead of a
 *   key and is used up here: unknown, used or expired → 401 `unauthorized`;
 * - `inactivity_timeout` (seconds, an integer 1 to 180, default 20) outside that range or not
 *   an integer → 400 `invalid_request`.
 *
 * After the upgrade:
 * - an output format the native rules refuse (the 22.05 kHz family) → `{error, code: 400}`
 *   and a normal close (1000);
 * - the first message initializes (`text: " "`, optional `voice_settings`,
 *   `generation_config.chunk_length_schedule`, or LiveKit 0.6.3's top-level
 *   `chunk_length_schedule`); then text, `flush` / `try_trigger_generation` to synthesize
 *   now, and an empty `text` to finish: the rest is spoken, then `{isFinal: true}` (no
 *   `audio` key) and close 1000;
 * - more than 1 MiB of unsynthesized text → `{error, code: 1009}` and close 1009;
 * - reference audio (`X-Service-References`) → `{error, code: 400}` at the first flush;
 * - any other failure → `{error, code: <HTTP status>}`, then close 1000 (client's fault),
 *   1008 (authentication) or 1011 (ours or the backend's);
 * - no client message for `inactivity_timeout` seconds → close 1000 `inactivity timeout`
 *   (no frame; text not yet flushed is dropped). After the finishing empty text the
 *   socket waits for the rest of the audio instead;
 * - the connection lifetime (docs/api/compat.md: 3600 s) reached → `{error, code: 1000}`, then
 *   close 1000 `connection lifetime reached`.
 */
import { z } from 'zod';
import { checkFormat } from '../../audio/index.ts';
import type { Authenticate, Principal } from '../../auth/principal.ts';
import type { HttpApp } from '../../http/app.ts';
import { parse } from '../../validation.ts';
import type { Logger } from '../../log.ts';
import type { TtsService } from '../../speech/tts.ts';
import type { SharedState } from '../../state/index.ts';
import { authenticateKey, ELEVENLABS_BASE, ElevenLabsError, nativeParams, parseElevenLabsFormat, speechModelFor, truthy, type ElevenLabsFormat } from './common.ts';
import { elevenLabsTtsSchema, translateTts } from './tts.ts';
import { DEFAULT_CHUNK_SCHEDULE, SpeechContext, TEXT_BUFFER_LIMIT_BYTES } from './ws-speech-context.ts';
import { authenticateKeyOrToken, type KeyIsLive } from './tokens.ts';
import { errorFrame, LazyAbort, INACTIVITY_CLOSE, LIFETIME_CLOSE, mountJsonSocket, type JsonSocket, type SocketSession, type SocketTimers, type UpgradeRequest } from './ws-socket.ts';

export interface TtsSocketDeps {
  tts: TtsService;
  authenticate: Authenticate;
  log: Logger;
  /** Single-use tokens (`?token=`). */
  state: SharedState;
  /** Whether a token's issuing key is still usable (none: not checked). */
  keyIsLive?: KeyIsLive;
  /** Lifetime and inactivity clocks; the defaults outside tests. */
  timers?: SocketTimers;
}

/** `inactivity_timeout` in seconds (vendor protocol: default 20, at most 180). */
export const INACTIVITY_TIMEOUT_S = { default: 20, min: 1, max: 180 } as const;

/** The in-band frame before a lifetime close. */
export const lifetimeFrame = () => ({ error: 'The connection reached its lifetime limit (3600 s); open a new connection', code: LIFETIME_CLOSE.code });

/** Close codes of the synthesis sockets. */
export const WS_CLOSE = { normal: 1000, policy: 1008, tooBig: 1009, internal: 1011 } as const;

const schedule = z.array(z.number().int().min(50).max(500));

/**
 * One client message of either synthesis socket. Vendor fields this layer does not use
 * (`pronunciation_dictionary_locators`, …) are accepted and dropped; a listed field of the
 * wrong type is an error.
 */
export const ttsSocketMessageSchema = z.object({
  text: z.string().nullable().optional(),
  flush: z.boolean().nullable().optional(),
  try_trigger_generation: z.boolean().nullable().optional(),
  voice_settings: elevenLabsTtsSchema.shape.voice_settings.nullable(),
  generation_config: z.object({ chunk_length_schedule: schedule.optional() }).nullable().optional(),
  generator_config: z.object({ chunk_length_schedule: schedule.optional() }).nullable().optional(),
  chunk_length_schedule: schedule.nullable().optional(),
  xi_api_key: z.string().nullable().optional(),
  'xi-api-key': z.string().nullable().optional(),
  authorization: z.string().nullable().optional(),
  context_id: z.string().nullable().optional(),
  close_context: z.boolean().nullable().optional(),
  close_socket: z.boolean().nullable().optional(),
});
export type TtsSocketMessage = z.output<typeof ttsSocketMessageSchema>;

/** What the handshake settled. */
export interface TtsSocketState {
  voiceId: string;
  format: ElevenLabsFormat;
  /** `output_format` as sent (undefined: the default). */
  outputFormat: string | undefined;
  /** `model_id` as sent. */
  modelId: string | undefined;
  syncAlignment: boolean;
  headers: Record<string, string>;
  /** Set when the upgrade carried a valid key. */
  principal?: Principal;
  /** The native rules refuse the format (the 22.05 kHz family): reported after the upgrade. */
  formatError?: unknown;
  /** `inactivity_timeout`, seconds. */
  inactivityTimeoutS: number;
}

/** Reads `inactivity_timeout` (absent or empty: the default). */
export function inactivityTimeoutS(value: string | null): number {
  if (value === null || value === '') return INACTIVITY_TIMEOUT_S.default;
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(n >= INACTIVITY_TIMEOUT_S.min && n <= INACTIVITY_TIMEOUT_S.max)) {
    throw new ElevenLabsError('invalid_request', `inactivity_timeout must be an integer number of seconds from ${INACTIVITY_TIMEOUT_S.min} to ${INACTIVITY_TIMEOUT_S.max}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/**
 * Handshake checks shared by both synthesis sockets. Without a credential (the key comes in the
 * first message) the state is returned at once, so the socket is upgraded inside uWS's callback
 * (`mountJsonSocket`); a key or token is checked first (a promise).
 */
export function acceptTtsSocket(r: UpgradeRequest, deps: TtsSocketDeps): TtsSocketState | Promise<TtsSocketState> {
  const outputFormat = r.query.get('output_format') ?? undefined;
  const format = parseElevenLabsFormat(outputFormat);
  const modelId = r.query.get('model_id') ?? undefined;
  speechModelFor(modelId);
  nativeParams(r.headers);
  const inactivity = inactivityTimeoutS(r.query.get('inactivity_timeout'));
  const state: TtsSocketState = {
    voiceId: r.params[0] ?? 'default', format, outputFormat, modelId, syncAlignment: truthy(r.query.get('sync_alignment') ?? undefined), headers: r.headers, inactivityTimeoutS: inactivity,
  };
  try {
    checkFormat(format.format, format.sampleRateHz, format.mp3BitrateKbps);
  } catch (err) {
    state.formatError = err;
  }
  if (r.query.get('token') !== null || r.headers['xi-api-key'] || r.headers['authorization']) {
    return authenticateKeyOrToken(r, 'tts_websocket', deps).then((principal) => Object.assign(state, { principal }));
  }
  return state;
}

/** Parses a text frame into a message (malformed → 400 `invalid_request`). */
export function readMessage(text: string): TtsSocketMessage {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ElevenLabsError('invalid_request', 'Messages must be JSON objects');
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new ElevenLabsError('invalid_request', 'Messages must be JSON objects');
  return parse(ttsSocketMessageSchema, raw, 'body');
}

/** The caller for a socket's first message: the handshake's, or the key the message carries. */
export function principalFor(state: TtsSocketState, msg: TtsSocketMessage, authenticate: Authenticate): Promise<Principal> {
  if (state.principal) return Promise.resolve(state.principal);
  const headers: Record<string, string> = {};
  const key = msg.xi_api_key ?? msg['xi-api-key'];
  if (key) headers['xi-api-key'] = key;
  if (msg.authorization) headers['authorization'] = /^bearer /i.test(msg.authorization) ? msg.authorization : `Bearer ${msg.authorization}`;
  return authenticateKey(headers, authenticate);
}

/**
 * A synthesis context for an initializing message: its `voice_settings` and schedule, the
 * handshake's voice, format and model, through the native request validation (voice
 * lookup and credit included).
 */
export async function openSpeechContext(
  deps: TtsSocketDeps,
  state: TtsSocketState,
  msg: TtsSocketMessage,
  o: { teamId: string; requestId: string; signal: AbortSignal; span: string; contextId?: string; send(f: Record<string, unknown>): Promise<void> | undefined; onError(err: unknown): void },
): Promise<SpeechContext> {
  const raw: Record<string, unknown> = { text: '' };
  if (state.modelId !== undefined) raw.model_id = state.modelId;
  if (msg.voice_settings) raw.voice_settings = msg.voice_settings;
  const { body, model } = translateTts(raw, state.voiceId, state.outputFormat, state.headers, true);
  let refuseAtFlush: Error | undefined;
  if (body.references !== undefined) {
    delete body.references;
    refuseAtFlush = new ElevenLabsError('invalid_request', 'Reference audio (X-Service-References) is not supported on stream-input');
  }
  const caller = { teamId: o.teamId, requestId: o.requestId, traceparent: state.headers['traceparent'], signal: o.signal };
  const prepared = await deps.tts.prepare(o.span, body, model, caller, false);
  const sched = msg.generation_config?.chunk_length_schedule ?? msg.generator_config?.chunk_length_schedule ?? msg.chunk_length_schedule;
  return new SpeechContext({
    tts: deps.tts,
    prepared,
    caller,
    syncAlignment: state.syncAlignment,
    schedule: sched && sched.length ? sched : DEFAULT_CHUNK_SCHEDULE,
    contextId: o.contextId,
    send: o.send,
    refuseAtFlush,
    onError: o.onError,
  });
}

/** The close code after an in-band error frame. */
export function closeCodeFor(code: number): number {
  if (code === 401 || code === 403) return WS_CLOSE.policy;
  return code >= 500 ? WS_CLOSE.internal : WS_CLOSE.normal;
}

export const bufferOverflow = () => ({ error: `Text buffer exceeds ${TEXT_BUFFER_LIMIT_BYTES} bytes (1 MiB)`, code: WS_CLOSE.tooBig });

const SPAN = `wss ${ELEVENLABS_BASE}/v1/text-to-speech/{voice_id}/stream-input`;

/** One `stream-input` connection. */
export class StreamInputSession implements SocketSession {
  /** The socket's cancellation (its controller made on first use). */
  private readonly cancel = new LazyAbort();
  private chain: Promise<void> = Promise.resolve();
  private ctx: SpeechContext | null = null;
  private ending = false;
  private settled = false;

  constructor(
    private readonly deps: TtsSocketDeps,
    private readonly socket: JsonSocket,
    private readonly state: TtsSocketState,
    private readonly requestId: string,
  ) {
    if (state.formatError) this.fail(state.formatError);
  }

  onMessage(text: string): void {
    if (this.socket.closed || this.ending) return;
    this.chain = this.chain.then(() => this.handle(text)).catch((err) => this.fail(err));
  }

  onClose(): void {
    this.cancel.abort('client closed');
    this.settle('cancelled');
  }

  onExpire(): void {
    this.socket.send(lifetimeFrame());
    this.close(LIFETIME_CLOSE.code, LIFETIME_CLOSE.reason);
  }

  onInactive(): void {
    // Judged once the messages already received are handled: one that came in time may still
    // wait behind a slow first message (authentication, voice lookup), e.g. the finishing one.
    const chain = this.chain;
    void chain.then(() => {
      if (this.ending || this.chain !== chain) return; // finishing: the close follows the last audio; or a newer message re-armed the clock
      this.close(INACTIVITY_CLOSE.code, INACTIVITY_CLOSE.reason);
    });
  }

  private async handle(text: string): Promise<void> {
    if (this.socket.closed || this.ending) return;
    const msg = readMessage(text);
    if (!this.ctx) {
      const principal = await principalFor(this.state, msg, this.deps.authenticate);
      this.ctx = await openSpeechContext(this.deps, this.state, msg, {
        teamId: principal.teamId,
        requestId: this.requestId,
        signal: this.cancel.signal(),
        span: SPAN,
        send: (f) => this.socket.send(f),
        onError: (err) => this.fail(err),
      });
      if (this.socket.closed) return this.settle('cancelled');
      // The initializing single space is the protocol's marker, not text to speak.
      if (msg.text && msg.text !== ' ') this.append(msg.text);
      if (msg.flush || msg.try_trigger_generation) this.ctx.flush();
      return;
    }
    if (msg.text === '') return this.end();
    if (msg.text) this.append(msg.text);
    if (msg.flush || msg.try_trigger_generation) this.ctx.flush();
  }

  private append(text: string): void {
    if (this.ctx!.wouldOverflow(text)) {
      this.settle('failed', { status: 413, message: 'text buffer too large' });
      this.socket.send(bufferOverflow());
      this.close(WS_CLOSE.tooBig, 'text buffer too large');
      return;
    }
    this.ctx!.append(text);
  }

  private end(): void {
    this.ending = true;
    const ctx = this.ctx!;
    void ctx.finish().then((ok) => {
      if (!ok || this.socket.closed) return;
      // Settled first: closing runs the close handler, which would count the socket as cancelled.
      this.settle('done');
      this.socket.send({ isFinal: true });
      this.close(WS_CLOSE.normal, 'done');
    });
  }

  private fail(err: unknown): void {
    if (this.socket.closed) return;
    const frame = errorFrame(err);
    this.settle('failed', { status: frame.code, message: frame.error });
    this.socket.send(frame);
    this.close(closeCodeFor(frame.code), 'error');
  }

  private close(code: number, reason: string): void {
    this.socket.end(code, reason);
    this.cancel.abort('closed');
  }

  private settle(outcome: 'done' | 'cancelled' | 'failed', error?: { status: number; message: string }): void {
    if (this.settled || !this.ctx) return;
    this.settled = true;
    this.ctx.settle(outcome, error);
  }
}

/** Mounts `stream-input`. */
export function mountStreamInput(http: HttpApp, deps: TtsSocketDeps): void {
  mountJsonSocket<TtsSocketState>(http, `${ELEVENLABS_BASE}/v1/text-to-speech/:voice_id/stream-input`, 1, {
    log: deps.log,
    lifetimeMs: deps.timers?.lifetimeMs,
    inactivityMs: (state) => state.inactivityTimeoutS * (deps.timers?.secondMs ?? 1000),
    keyless: (state) => !state.principal,
    accept: (r) => acceptTtsSocket(r, deps),
    open: (socket, state, requestId) => new StreamInputSession(deps, socket, state, requestId),
  });
}
