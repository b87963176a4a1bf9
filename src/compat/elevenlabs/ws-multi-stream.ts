/**
 * `wss /compat/elevenlabs/v1/text-to-speech/{voice_id}/multi-stream-input`: several
 * independent synthesis contexts on one socket, as the LiveKit ElevenLabs plugin (1.x) and
 * the vendor's `*Multi` message types use it (docs/api/compat.md "Clients").
 *
 * Handshake and output format rules are those of `stream-input` (ws-stream-input.ts).
 * Client messages, each naming its context with `context_id` (absent: the default context,
 * whose frames carry no `contextId`):
 * - the first message for an unknown id creates the context (`text: " "` marks it, with
 *   optional `voice_settings` and `generation_config`; other text is buffered);
 * - `text` appends; `flush: true` (with or without text) synthesizes the buffer now;
 *   `{text: ""}` without flush only keeps the context alive;
 * - `close_context: true` speaks what is left, then `{isFinal: true, contextId}`; the id may
 *   be used again later for a new context;
 * - `close_socket: true` closes every context that way, then the socket (1000).
 *
 * Server frames: `{audio, alignment?, normalizedAlignment?, contextId}` and trailing
 * alignment-only frames as on `stream-input`. Times are absolute on each context's own
 * timeline (a context starts at 0; its second generation starts where its first ended).
 * A failure in one context → `{error, code, contextId}` and that context is dropped; the
 * socket stays open. More than 1 MiB of unsynthesized text in a context → `{error, code:
 * 1009}` and close 1009.
 *
 * Clocks: no client message for `inactivity_timeout` seconds (default 20, at most 180) →
 * close 1000 `inactivity timeout`, every context cancelled; any message restarts the count,
 * so `{text: "", context_id}` keeps the socket alive. After `close_socket` the socket waits
 * for the rest of the audio instead. The connection lifetime (docs/api/compat.md: 3600 s) reached →
 * `{error, code: 1000}`, then close 1000 `connection lifetime reached`.
 */
import type { Principal } from '../../auth/principal.ts';
import type { HttpApp } from '../../http/app.ts';
import { ELEVENLABS_BASE } from './common.ts';
import type { SpeechContext } from './ws-speech-context.ts';
import { errorFrame, LazyAbort, INACTIVITY_CLOSE, LIFETIME_CLOSE, mountJsonSocket, type JsonSocket, type SocketSession } from './ws-socket.ts';
import {
  acceptTtsSocket,
  bufferOverflow,
  closeCodeFor,
  lifetimeFrame,
  openSpeechContext,
  principalFor,
  readMessage,
  WS_CLOSE,
  type TtsSocketDeps,
  type TtsSocketMessage,
  type TtsSocketState,
} from './ws-stream-input.ts';

const SPAN = `wss ${ELEVENLABS_BASE}/v1/text-to-speech/{voice_id}/multi-stream-input`;
/** The map key of the context used when a message names none. */
const DEFAULT_CONTEXT = '\u0000default';

interface Entry {
  ctx: SpeechContext;
  settled: boolean;
}

/** One `multi-stream-input` connection. */
export class MultiStreamSession implements SocketSession {
  /** The socket's cancellation (its controller made on first use). */
  private readonly cancel = new LazyAbort();
  private chain: Promise<void> = Promise.resolve();
  private principal: Principal | undefined;
  private readonly contexts = new Map<string, Entry>();
  /** Contexts finishing after close_context, until their isFinal is sent. */
  private readonly closing = new Set<Entry>();
  private ending = false;

  constructor(
    private readonly deps: TtsSocketDeps,
    private readonly socket: JsonSocket,
    private readonly state: TtsSocketState,
    private readonly requestId: string,
  ) {
    this.principal = state.principal;
    if (state.formatError) this.fail(state.formatError);
  }

  onMessage(text: string): void {
    if (this.socket.closed || this.ending) return;
    this.chain = this.chain.then(() => this.handle(text)).catch((err) => this.fail(err));
  }

  onClose(): void {
    this.cancel.abort('client closed');
    for (const e of [...this.contexts.values(), ...this.closing]) this.settle(e, 'cancelled');
    this.contexts.clear();
    this.closing.clear();
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
      if (this.ending || this.chain !== chain) return; // close_socket: the close follows the last audio; or a newer message re-armed the clock
      this.close(INACTIVITY_CLOSE.code, INACTIVITY_CLOSE.reason);
    });
  }

  private async handle(text: string): Promise<void> {
    if (this.socket.closed || this.ending) return;
    const msg = readMessage(text);
    this.principal ??= await principalFor(this.state, msg, this.deps.authenticate);
    if (msg.close_socket) return this.closeSocket();
    const key = msg.context_id ?? DEFAULT_CONTEXT;
    const existing = this.contexts.get(key);
    if (msg.close_context) {
      if (existing) this.closeContext(key, existing);
      return;
    }
    if (!existing) {
      const entry = await this.open(key, msg);
      if (!entry) return;
      if (msg.text && msg.text !== ' ') this.append(entry, msg.text);
      if (msg.flush || msg.try_trigger_generation) entry.ctx.flush();
      return;
    }
    if (msg.text) this.append(existing, msg.text);
    if (msg.flush || msg.try_trigger_generation) existing.ctx.flush();
  }

  private async open(key: string, msg: TtsSocketMessage): Promise<Entry | null> {
    const contextId = key === DEFAULT_CONTEXT ? undefined : key;
    let entry: Entry | null = null;
    const ctx = await openSpeechContext(this.deps, this.state, msg, {
      teamId: this.principal!.teamId,
      requestId: this.requestId,
      signal: this.cancel.signal(),
      span: SPAN,
      contextId,
      send: (f) => this.socket.send(f),
      onError: (err) => entry && this.contextFailed(key, entry, err),
    });
    entry = { ctx, settled: false };
    if (this.socket.closed) {
      this.settle(entry, 'cancelled');
      return null;
    }
    this.contexts.set(key, entry);
    return entry;
  }

  private append(entry: Entry, text: string): void {
    if (entry.ctx.wouldOverflow(text)) {
      this.socket.send(bufferOverflow());
      this.close(WS_CLOSE.tooBig, 'text buffer too large');
      return;
    }
    entry.ctx.append(text);
  }

  /** Speaks what is left of a context, then sends its isFinal. */
  private closeContext(key: string, entry: Entry): Promise<void> {
    if (this.contexts.get(key) === entry) this.contexts.delete(key);
    this.closing.add(entry);
    const contextId = key === DEFAULT_CONTEXT ? undefined : key;
    return entry.ctx.finish().then((ok) => {
      this.closing.delete(entry);
      if (!ok || this.socket.closed) return;
      this.socket.send(contextId === undefined ? { isFinal: true } : { isFinal: true, contextId });
      this.settle(entry, 'done');
    });
  }

  private closeSocket(): void {
    this.ending = true;
    const pending = [...this.contexts.entries()].map(([key, entry]) => this.closeContext(key, entry));
    const draining = [...this.closing].map((e) => e.ctx.finish());
    void Promise.all([...pending, ...draining]).then(() => this.close(WS_CLOSE.normal, 'done'));
  }

  private contextFailed(key: string, entry: Entry, err: unknown): void {
    if (this.contexts.get(key) === entry) this.contexts.delete(key);
    this.closing.delete(entry);
    if (this.socket.closed) return;
    const frame = errorFrame(err);
    this.socket.send(key === DEFAULT_CONTEXT ? frame : { ...frame, contextId: key });
    this.settle(entry, 'failed', { status: frame.code, message: frame.error });
  }

  /** A failure of the socket as a whole (bad message, authentication, refused format). */
  private fail(err: unknown): void {
    if (this.socket.closed) return;
    const frame = errorFrame(err);
    this.socket.send(frame);
    this.close(closeCodeFor(frame.code), 'error');
  }

  private close(code: number, reason: string): void {
    this.socket.end(code, reason);
    this.onClose();
  }

  private settle(entry: Entry, outcome: 'done' | 'cancelled' | 'failed', error?: { status: number; message: string }): void {
    if (entry.settled) return;
    entry.settled = true;
    entry.ctx.settle(outcome, error);
  }
}

/** Mounts `multi-stream-input`. */
export function mountMultiStreamInput(http: HttpApp, deps: TtsSocketDeps): void {
  mountJsonSocket<TtsSocketState>(http, `${ELEVENLABS_BASE}/v1/text-to-speech/:voice_id/multi-stream-input`, 1, {
    log: deps.log,
    lifetimeMs: deps.timers?.lifetimeMs,
    inactivityMs: (state) => state.inactivityTimeoutS * (deps.timers?.secondMs ?? 1000),
    keyless: (state) => !state.principal,
    accept: (r) => acceptTtsSocket(r, deps),
    open: (socket, state, requestId) => new MultiStreamSession(deps, socket, state, requestId),
  });
}
