/**
 * One realtime socket of families A, B and Groq-style (docs/api/compat.md "Realtime"
 * and "Limits"): JSON text frames in the vendor's event protocol, translated into the native
 * speech services. There is no language model: `response.create` speaks text (what it
 * speaks: D-COMPAT-9), and committed input audio is
 * transcribed.
 *
 * Contracts:
 * - Client events: `session.update`, `transcription_session.update`,
 *   `conversation.item.create` / `.delete`, `input_audio_buffer.append` / `.commit` /
 *   `.clear`, `response.create` / `.cancel`; `conversation.item.truncate` is a silent no-op;
 *   anything else is an `unknown_event_type` error. Refusals are `error` events; the socket
 *   stays open.
 * - One response at a time (`response_already_active`); its audio goes out as
 *   `response.output_audio.delta` pieces whose base64 concatenates, paced by the socket
 *   (the backend is not pulled while the socket holds more than `HIGH_WATER_BYTES`).
 * - Limits: text per item 1 MiB and 1024 items (`conversation_too_large`), 100 MiB of
 *   uncommitted audio (`input_audio_buffer_too_large`, the append is dropped), lifetime
 *   3600 s (an `error` event `session_expired`, then close 1000).
 */
import { randomBytes } from 'node:crypto';
import { wavHeader } from '../../audio/index.ts';
import { toServiceError } from '../../errors.ts';
import type { Logger } from '../../log.ts';
import type { AsrService } from '../../speech/asr.ts';
import type { Caller, TtsService } from '../../speech/tts.ts';
import { applyUpdate, readSpeed, readVoice, RealtimeRefusal, sessionObject, type SessionConfig } from './realtime-config.ts';
import { toNativeSpeech } from './speech.ts';
import { describe, paramOf } from '../errors.ts';
import { Base64Pieces } from './base64-pieces.ts';

/** Limits of the socket (docs/api/compat.md "Limits"). */
export const REALTIME_LIMITS = {
  itemTextBytes: 1024 * 1024,
  items: 1024,
  uncommittedAudioBytes: 100 * 1024 * 1024,
  lifetimeMs: 3600 * 1000,
} as const;

/** Unsent bytes on the socket above which synthesis waits for `drain`. */
export const HIGH_WATER_BYTES = 1024 * 1024;

/** What a realtime session needs of its socket (uWS in production). */
export interface RealtimeSocket {
  send(text: string): void;
  bufferedAmount(): number;
  end(code: number, reason: string): void;
}

export interface RealtimeDeps {
  tts: Pick<TtsService, 'prepare' | 'synthesize'>;
  asr: Pick<AsrService, 'transcribe'>;
  log: Logger;
}

export interface RealtimeOptions {
  teamId: string;
  requestId: string;
  traceparent?: string;
  /** The config the socket starts with (model, type from `?intent=`). */
  config: SessionConfig;
  /** Native speech model for synthesis (`s2.1-pro`, …). */
  speechModel: string;
  /** `X-Service-` headers of the handshake (applied to synthesis; commit refuses them). */
  nativeHeaders: Record<string, string>;
  resolveTranscriptionModel: (model: string) => string;
  lifetimeMs?: number;
}

interface Part {
  type: string;
  text?: string;
  transcript?: string | null;
  audio?: string;
}
interface Item {
  id: string;
  type: 'message';
  object: 'realtime.item';
  role: string;
  status: 'completed' | 'in_progress' | 'incomplete';
  content: Part[];
}

const rid = (prefix: string) => `${prefix}_${randomBytes(10).toString('hex')}`;
const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
const TEXT_TYPES = new Set(['input_text', 'text', 'output_text']);
const PART_TYPES = new Set([...TEXT_TYPES, 'input_audio', 'audio', 'output_audio']);
const ROLES = new Set(['user', 'assistant', 'system']);

/** Text of a message item: its text parts, else the transcripts of its audio parts. */
function itemText(item: Item): string {
  const texts = item.content.filter((p) => TEXT_TYPES.has(p.type)).map((p) => p.text ?? '');
  const joined = texts.join('');
  if (joined.trim()) return joined;
  return item.content.map((p) => p.transcript ?? '').join(' ').trim();
}

export class RealtimeSession {
  readonly id = rid('sess');
  private config: SessionConfig;
  private readonly items: Item[] = [];
  private audio: Buffer[] = [];
  private audioBytes = 0;
  private active: { id: string; ac: AbortController } | null = null;
  private closed = false;
  /** Aborted when the socket goes: transcriptions in flight stop. */
  private readonly gone = new AbortController();
  private drainWaiters: (() => void)[] = [];
  private readonly lifetime: NodeJS.Timeout;
  private readonly expiresAtS: number;

  constructor(private readonly deps: RealtimeDeps, private readonly socket: RealtimeSocket, private readonly o: RealtimeOptions) {
    this.config = o.config;
    const lifetimeMs = o.lifetimeMs ?? REALTIME_LIMITS.lifetimeMs;
    this.expiresAtS = Math.floor((Date.now() + lifetimeMs) / 1000);
    this.lifetime = setTimeout(() => this.expire(), lifetimeMs);
    this.lifetime.unref();
    this.emit({ type: 'session.created', session: this.session() });
  }

  /** One client frame. */
  onMessage(text: string): void {
    if (this.closed) return;
    let e: Record<string, unknown>;
    try {
      const v: unknown = JSON.parse(text);
      if (!isObject(v)) throw new Error('not an object');
      e = v;
    } catch {
      return this.refuse(new RealtimeRefusal('invalid_json', 'Frames must be JSON objects with a type'));
    }
    const eventId = typeof e.event_id === 'string' ? e.event_id : undefined;
    try {
      this.handle(e);
    } catch (err) {
      if (err instanceof RealtimeRefusal) return this.refuse(err, eventId);
      const e = toServiceError(err);
      if (e.status < 500) return this.refuse(new RealtimeRefusal('invalid_value', describe(e), paramOf(e)), eventId);
      this.deps.log.error({ err }, 'realtime event failed');
      this.refuse(new RealtimeRefusal('server_error', 'The event could not be processed'), eventId, 'server_error');
    }
  }

  onDrain(): void {
    const w = this.drainWaiters;
    this.drainWaiters = [];
    for (const f of w) f();
  }

  /** The client went away: stop the response in flight. */
  onClose(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.lifetime);
    this.gone.abort();
    this.active?.ac.abort();
    this.onDrain();
  }

  private handle(e: Record<string, unknown>): void {
    switch (e.type) {
      case 'session.update':
        this.config = applyUpdate(this.config, e.session, this.o.resolveTranscriptionModel);
        return this.emit({ type: 'session.updated', session: this.session() });
      case 'transcription_session.update':
        this.config = applyUpdate({ ...this.config, type: 'transcription' }, e.session, this.o.resolveTranscriptionModel);
        return this.emit({ type: 'transcription_session.updated', session: this.session() });
      case 'conversation.item.create':
        return this.createItem(e.item, e.previous_item_id);
      case 'conversation.item.delete': {
        const i = this.items.findIndex((it) => it.id === e.item_id);
        if (i < 0) throw new RealtimeRefusal('item_not_found', `No item ${JSON.stringify(e.item_id)} in the conversation`, 'item_id');
        this.items.splice(i, 1);
        return this.emit({ type: 'conversation.item.deleted', item_id: e.item_id });
      }
      case 'conversation.item.truncate':
        return; // a silent no-op: nothing is played back server-side
      case 'input_audio_buffer.append':
        return this.append(e.audio);
      case 'input_audio_buffer.clear':
        this.audio = [];
        this.audioBytes = 0;
        return this.emit({ type: 'input_audio_buffer.cleared' });
      case 'input_audio_buffer.commit':
        return this.commit();
      case 'response.create':
        return this.respond(isObject(e.response) ? e.response : {});
      case 'response.cancel':
        if (!this.active) throw new RealtimeRefusal('response_cancel_not_active', 'There is no response in progress to cancel');
        this.active.ac.abort();
        return;
      default:
        throw new RealtimeRefusal('unknown_event_type', `Unknown event type ${JSON.stringify(e.type)}`, 'type');
    }
  }

  private session(): Record<string, unknown> {
    return sessionObject(this.id, this.config, this.expiresAtS);
  }

  private emit(event: Record<string, unknown>): void {
    if (this.closed) return;
    this.socket.send(JSON.stringify({ event_id: rid('event'), ...event }));
  }

  private refuse(r: RealtimeRefusal, eventId?: string, type = 'invalid_request_error'): void {
    this.emit({ type: 'error', error: { type, code: r.code, message: r.message, param: r.param ?? null, event_id: eventId ?? null } });
  }

  private expire(): void {
    if (this.closed) return;
    this.refuse(new RealtimeRefusal('session_expired', 'The session reached its maximum duration of 3600 seconds'));
    this.socket.end(1000, 'session expired');
    this.onClose();
  }

  // ---------------------------------------------------------------------------------------
  // Conversation

  private add(item: Item, previousItemId?: unknown): void {
    if (this.items.length >= REALTIME_LIMITS.items) {
      throw new RealtimeRefusal('conversation_too_large', `The conversation holds at most ${REALTIME_LIMITS.items} items: delete some first`);
    }
    let at = this.items.length;
    if (typeof previousItemId === 'string') {
      const i = this.items.findIndex((it) => it.id === previousItemId);
      if (i < 0) throw new RealtimeRefusal('item_not_found', `No item ${JSON.stringify(previousItemId)} in the conversation`, 'previous_item_id');
      at = i + 1;
    } else if (previousItemId === 'root') at = 0;
    const previous = at > 0 ? this.items[at - 1]!.id : null;
    this.items.splice(at, 0, item);
    this.emit({ type: 'conversation.item.added', previous_item_id: previous, item });
    this.emit({ type: 'conversation.item.done', previous_item_id: previous, item });
  }

  private createItem(raw: unknown, previousItemId: unknown): void {
    if (!isObject(raw)) throw new RealtimeRefusal('invalid_value', 'item must be an object', 'item');
    if (raw.type !== undefined && raw.type !== 'message') throw new RealtimeRefusal('unsupported_item_type', `Item type ${JSON.stringify(raw.type)} is not supported: only message items`, 'item.type');
    if (typeof raw.role !== 'string' || !ROLES.has(raw.role)) throw new RealtimeRefusal('invalid_value', 'item.role must be user, assistant or system', 'item.role');
    if (!Array.isArray(raw.content)) throw new RealtimeRefusal('invalid_value', 'item.content must be an array of parts', 'item.content');
    const content: Part[] = raw.content.map((p, i) => {
      if (!isObject(p) || typeof p.type !== 'string' || !PART_TYPES.has(p.type)) throw new RealtimeRefusal('invalid_value', 'A content part needs a type: input_text, text, output_text, input_audio or audio', `item.content.${i}`);
      const part: Part = { type: p.type };
      if (typeof p.text === 'string') part.text = p.text;
      if (typeof p.transcript === 'string') part.transcript = p.transcript;
      if (typeof p.audio === 'string') part.audio = p.audio;
      return part;
    });
    const textBytes = content.reduce((n, p) => n + Buffer.byteLength(p.text ?? '') + Buffer.byteLength(p.transcript ?? ''), 0);
    if (textBytes > REALTIME_LIMITS.itemTextBytes) {
      throw new RealtimeRefusal('conversation_too_large', `An item holds at most ${REALTIME_LIMITS.itemTextBytes} bytes of text`, 'item.content');
    }
    const id = typeof raw.id === 'string' && raw.id !== '' ? raw.id : rid('item');
    if (this.items.some((it) => it.id === id)) throw new RealtimeRefusal('invalid_value', `Item id ${JSON.stringify(id)} is already in the conversation`, 'item.id');
    this.add({ id, type: 'message', object: 'realtime.item', role: raw.role, status: 'completed', content }, previousItemId);
  }

  // ---------------------------------------------------------------------------------------
  // Input audio and transcription

  private append(audio: unknown): void {
    if (typeof audio !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(audio)) throw new RealtimeRefusal('invalid_value', 'audio must be base64', 'audio');
    const bytes = Buffer.from(audio, 'base64');
    if (this.audioBytes + bytes.length > REALTIME_LIMITS.uncommittedAudioBytes) {
      throw new RealtimeRefusal('input_audio_buffer_too_large', `The uncommitted input audio would exceed ${REALTIME_LIMITS.uncommittedAudioBytes} bytes: commit or clear the buffer. This append was dropped`, 'audio');
    }
    this.audio.push(bytes);
    this.audioBytes += bytes.length;
  }

  private commit(): void {
    if (Object.keys(this.o.nativeHeaders).length) {
      throw new RealtimeRefusal('unsupported_native_options', 'Native synthesis parameters (X-Service- headers on the handshake) do not apply to transcription: open the socket without them to transcribe');
    }
    if (this.audioBytes === 0) throw new RealtimeRefusal('input_audio_buffer_commit_empty', 'The input audio buffer is empty');
    const pcm = Buffer.concat(this.audio, this.audioBytes);
    this.audio = [];
    this.audioBytes = 0;
    const itemId = rid('item');
    const previous = this.items.length ? this.items[this.items.length - 1]!.id : null;
    this.emit({ type: 'input_audio_buffer.committed', previous_item_id: previous, item_id: itemId });
    const part: Part = { type: 'input_audio', transcript: null };
    const item: Item = { id: itemId, type: 'message', object: 'realtime.item', role: 'user', status: 'completed', content: [part] };
    if (this.config.type === 'realtime') this.add(item);
    // A container format is passed as it came; raw PCM gets a WAV header with its declared rate.
    const input = this.config.input;
    const upload = input.kind === 'pcm' ? Buffer.concat([wavHeader(input.rateHz, pcm.length), pcm]) : pcm;
    const language = this.config.transcription.language ?? undefined;
    this.deps.asr.transcribe(this.o.teamId, new Uint8Array(upload), { language, signal: this.gone.signal, requestId: this.o.requestId, traceparent: this.o.traceparent }).then(
      (t) => {
        part.transcript = t.text;
        this.emit({
          type: 'conversation.item.input_audio_transcription.completed',
          item_id: itemId,
          content_index: 0,
          transcript: t.text,
          usage: { type: 'duration', seconds: Math.round(t.durationMs) / 1000 },
        });
      },
      (err) => {
        // The item (and its audio) stays in the conversation; only the transcript is missing.
        const e = toServiceError(err);
        if (e.code === 'internal') this.deps.log.error({ err }, 'realtime transcription failed');
        this.emit({
          type: 'conversation.item.input_audio_transcription.failed',
          item_id: itemId,
          content_index: 0,
          error: { type: e.status >= 500 ? 'server_error' : 'invalid_request_error', code: e.code, message: e.message },
        });
      },
    );
  }

  // ---------------------------------------------------------------------------------------
  // Responses

  /** What `response.create` speaks: `instructions`, else the last text of `input` or of the conversation. */
  private textFor(r: Record<string, unknown>): string {
    if (typeof r.instructions === 'string' && r.instructions.trim() !== '') return r.instructions;
    const items = Array.isArray(r.input) ? r.input.filter(isObject).map((i) => ({ content: Array.isArray(i.content) ? i.content.filter(isObject) : [] }) as unknown as Item) : this.items;
    for (let i = items.length - 1; i >= 0; i--) {
      const text = itemText(items[i]!);
      if (text) return text;
    }
    return '';
  }

  private respond(r: Record<string, unknown>): void {
    if (this.config.type === 'transcription') throw new RealtimeRefusal('invalid_session_type', 'A transcription session creates no responses');
    if (this.active) throw new RealtimeRefusal('response_already_active', `Response ${this.active.id} is still in progress: wait for response.done or cancel it`);
    const modalities = r.output_modalities ?? r.modalities;
    if (modalities !== undefined && (!Array.isArray(modalities) || !modalities.includes('audio'))) {
      throw new RealtimeRefusal('unsupported_output_modalities', 'Only audio output is offered: output_modalities must include "audio"', 'response.output_modalities');
    }
    const out = isObject(r.audio) && isObject(r.audio.output) ? r.audio.output : {};
    const voice = out.voice !== undefined ? readVoice(out.voice, 'response.audio.output.voice') : r.voice !== undefined ? readVoice(r.voice, 'response.voice') : this.config.voice;
    const speed = out.speed !== undefined ? readSpeed(out.speed, 'response.audio.output.speed') : this.config.speed;
    const text = this.textFor(r);
    if (!text.trim()) throw new RealtimeRefusal('no_text_to_speak', 'Nothing to speak: add a text item (or an audio item with a transcript) or give response.instructions');
    const native = toNativeSpeech(
      { model: `service/${this.o.speechModel}`, input: text, voice, speed, response_format: this.config.output.kind, sample_rate: this.config.output.rateHz },
      this.o.nativeHeaders,
      false,
    );
    const ac = new AbortController();
    const responseId = rid('resp');
    this.active = { id: responseId, ac };
    void this.run(responseId, ac, native, text);
  }

  private async run(responseId: string, ac: AbortController, native: { model: string; body: Record<string, unknown> }, text: string): Promise<void> {
    const itemId = rid('item');
    const base = { object: 'realtime.response', id: responseId, conversation_id: null, output_modalities: ['audio'], metadata: null };
    const refs = { response_id: responseId, item_id: itemId, output_index: 0, content_index: 0 };
    const item: Item = { id: itemId, type: 'message', object: 'realtime.item', role: 'assistant', status: 'in_progress', content: [] };
    this.emit({ type: 'response.created', response: { ...base, status: 'in_progress', status_details: null, output: [], usage: null } });
    this.emit({ type: 'response.output_item.added', response_id: responseId, output_index: 0, item });
    this.emit({ type: 'response.content_part.added', ...refs, part: { type: 'audio', transcript: '' } });
    this.emit({ type: 'response.output_audio_transcript.delta', ...refs, delta: text });

    const caller: Caller = { teamId: this.o.teamId, requestId: this.o.requestId, traceparent: this.o.traceparent, signal: ac.signal };
    const pieces = new Base64Pieces();
    let status: 'completed' | 'cancelled' | 'failed' = 'completed';
    let error: Record<string, unknown> | null = null;
    try {
      const prepared = await this.deps.tts.prepare('wss /compat/realtime response', native.body, native.model, caller);
      const outcome = await this.deps.tts.synthesize(prepared, caller, ({ bytes }) => {
        if (!bytes.length) return undefined;
        const delta = pieces.push(bytes);
        if (delta) this.emit({ type: 'response.output_audio.delta', ...refs, delta });
        if (this.closed || this.socket.bufferedAmount() <= HIGH_WATER_BYTES) return undefined;
        return new Promise<void>((resolve) => this.drainWaiters.push(resolve));
      });
      if (outcome === 'cancelled') status = 'cancelled';
    } catch (err) {
      if (ac.signal.aborted) status = 'cancelled';
      else {
        const e = toServiceError(err);
        status = 'failed';
        error = { type: e.status >= 500 ? 'server_error' : 'invalid_request_error', code: e.code, message: e.message };
      }
    }
    this.active = null;
    if (this.closed) return;
    const tail = pieces.end();
    if (tail && status === 'completed') this.emit({ type: 'response.output_audio.delta', ...refs, delta: tail });
    const done: Item = { ...item, status: status === 'completed' ? 'completed' : 'incomplete', content: [{ type: 'output_audio', transcript: text }] };
    if (status === 'completed') {
      this.emit({ type: 'response.output_audio.done', ...refs });
      this.emit({ type: 'response.output_audio_transcript.done', ...refs, transcript: text });
      this.emit({ type: 'response.content_part.done', ...refs, part: { type: 'audio', transcript: text } });
      this.emit({ type: 'response.output_item.done', response_id: responseId, output_index: 0, item: done });
      try {
        this.add(done);
      } catch (err) {
        if (err instanceof RealtimeRefusal) this.refuse(err);
      }
    }
    const statusDetails = status === 'completed' ? null : status === 'cancelled' ? { type: 'cancelled', reason: 'client_cancelled' } : { type: 'failed', error };
    this.emit({ type: 'response.done', response: { ...base, status, status_details: statusDetails, output: status === 'completed' ? [done] : [], usage: null } });
  }
}
