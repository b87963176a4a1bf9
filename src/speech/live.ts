/**
 * `wss /v1/tts/live` (docs/api/speech.md "Live synthesis"; D-TTS-4): live synthesis over one
 * WebSocket with binary MessagePack frames.
 *
 * - Upgrade: `Authorization: Bearer`, `model` (unknown/missing → s2.1-pro), `traceparent`.
 *   A missing or bad key is answered with HTTP 401 before the upgrade; past the team's speech
 *   concurrency cap, HTTP 429 with `Retry-After` (`concurrency.ts`). The socket holds its slot
 *   from the upgrade until it ends.
 * - Client frames: `start{request}` (first, once), `text{text}`, `flush`, `stop`; unknown
 *   events are ignored.
 * - Server frames: `audio{audio: bytes in the start format}` repeated, then
 *   `finish{reason:"stop"}` and close 1000; on an error `finish{reason:"error", message}`
 *   and close 1008 (the client's fault) or 1011 (ours or the backend's).
 * - Text goes to the backend's SynthesizeStream as it arrives; the backend speaks complete
 *   sentences and cuts longer text by `chunk_length`; `flush` speaks the buffer now; `stop`
 *   half-closes, which drains it.
 * - Backpressure: the synthesis actor does not pull more audio from the backend while the
 *   socket holds more than HIGH_WATER_BYTES unsent; `drain` resumes it.
 */
import { Packr, Unpackr } from 'msgpackr';
import type uws from 'uWebSockets.js';
import { runSynthesis } from '../../actors/synthesis.ts';
import type { AudioEncoder } from '../audio/index.ts';
import { pcmBytesToInt16 } from '../audio/index.ts';
import { ServiceError, toServiceError } from '../errors.ts';
import { acceptUpgrade, bearerToken, readHandshake, requestIdFrom, type HttpApp } from '../http/app.ts';
import type { SynthesisSession } from '../inference/index.ts';
import { countChars } from './request.ts';
import { recordUsage } from './usage.ts';
import type { SpeechSlot } from './concurrency.ts';
import { join, SPEECH_AUTH_MESSAGES, type Prepared, type TtsService } from './tts.ts';
import { stallWatch, startDeadline } from '../http/ws-frames.ts';

/** Largest client frame (docs/api/speech.md). */
export const MAX_FRAME_BYTES = 32 * 1024 * 1024;
/** Unsent bytes on a socket above which the backend stream is paused. */
export const HIGH_WATER_BYTES = 1024 * 1024;

const unpackr = new Unpackr({ mapsAsObjects: true, int64AsType: 'number' });
const packr = new Packr({ useRecords: false });

interface UserData {
  teamId: string;
  /** The team's concurrency slot, taken at the upgrade and held until the socket ends. */
  slot?: SpeechSlot;
  model: string | undefined;
  traceparent: string | undefined;
  requestId: string;
  live?: LiveSession;
  /** Disarms the start deadline (the first frame came, or the socket closed). */
  started?: () => void;
  /** Closes the socket 4008 when its client stops reading (`stallWatch`). */
  stall?: ReturnType<typeof stallWatch>;
}

/** What a live session needs of its socket (uWS here; a fake in unit tests). */
export interface LiveSocket {
  /** Sends one binary frame; false when the socket is gone. */
  send(frame: Uint8Array): boolean;
  bufferedAmount(): number;
  end(code: number, reason: string): void;
}

type Phase = 'awaiting_start' | 'starting' | 'streaming' | 'stopping' | 'closed';

/** One live synthesis connection. */
export class LiveSession {
  private phase: Phase = 'awaiting_start';
  private readonly ac = new AbortController();
  private session: SynthesisSession | null = null;
  private readonly pending: ({ text: string } | { flush: true } | { stop: true })[] = [];
  private drainWaiters: (() => void)[] = [];
  private characters = 0;
  private flushes = 0;
  private prepared: Prepared | null = null;

  constructor(
    private readonly tts: TtsService,
    private readonly socket: LiveSocket,
    private readonly caller: { teamId: string; requestId: string; traceparent?: string; model?: string; slot?: SpeechSlot },
  ) {}

  /** A client frame. */
  onFrame(data: ArrayBuffer, isBinary: boolean): void {
    if (this.phase === 'closed') return;
    let msg: unknown;
    try {
      msg = unpackr.unpack(new Uint8Array(data.slice(0))); // uWS reuses `data` after this callback
    } catch {
      return this.fail(new ServiceError('bad_request', isBinary ? 'Malformed MessagePack frame' : 'Frames must be binary MessagePack'));
    }
    const ev = msg && typeof msg === 'object' ? (msg as { event?: unknown }).event : undefined;
    if (this.phase === 'awaiting_start') {
      if (ev !== 'start') return this.fail(new ServiceError('bad_request', 'The first frame must be a start event'));
      this.phase = 'starting';
      void this.start((msg as { request?: unknown }).request);
      return;
    }
    switch (ev) {
      case 'start':
        return this.fail(new ServiceError('bad_request', 'Only one start event is allowed'));
      case 'text': {
        const text = (msg as { text?: unknown }).text;
        if (typeof text !== 'string') return this.fail(new ServiceError('bad_request', 'A text event needs a text string'));
        if (this.phase === 'stopping') return;
        this.characters += countChars(text);
        return this.forward({ text });
      }
      case 'flush':
        return this.forward({ flush: true });
      case 'stop':
        if (this.phase === 'stopping') return;
        this.forward({ stop: true });
        this.phase = 'stopping';
        return;
      default:
        return; // unknown events are ignored (forward compatibility)
    }
  }

  /** The socket's send buffer drained. */
  onDrain(): void {
    const w = this.drainWaiters;
    this.drainWaiters = [];
    for (const f of w) f();
  }

  /** The client went away: cancel the backend call. */
  onClose(): void {
    this.caller.slot?.release();
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    this.ac.abort(Object.assign(new Error('client closed'), { name: 'AbortError' }));
    this.onDrain();
  }

  private forward(e: { text: string } | { flush: true } | { stop: true }): void {
    if (!this.session) {
      this.pending.push(e);
      return;
    }
    if ('text' in e) this.session.send(e.text);
    else if ('flush' in e) this.session.flush(++this.flushes);
    else this.session.end();
  }

  private async start(request: unknown): Promise<void> {
    const caller = { ...this.caller, signal: this.ac.signal };
    try {
      if (!request || typeof request !== 'object' || Array.isArray(request)) throw new ServiceError('bad_request', 'start.request must be an object');
      this.prepared = await this.tts.prepare('wss /v1/tts/live', request, this.caller.model, caller, false);
    } catch (err) {
      return this.fail(err);
    }
    if (this.phase === 'closed') return this.prepared.span.end({ status: 499, message: 'client closed' });
    if (this.phase === 'starting') this.phase = 'streaming';
    const p = this.prepared;
    const firstText = p.req.body.text;
    this.characters += p.req.characters;
    const state: { encoder?: AudioEncoder } = {};
    const tts = this.tts;
    const self = this;
    tts.stats.active++;
    const { result } = runSynthesis<Uint8Array>(
      {
        open: (signal) =>
          (async function* () {
            const call = p.span.child('inference.SynthesizeStream', { 'parley.model': p.req.model });
            signal.addEventListener('abort', () => call.span.end(), { once: true });
            const session = await tts.deps.inference.synthesizeStream({ ...p.input, text: '' }, { signal, traceparent: call.traceparent, requestId: caller.requestId, teamId: caller.teamId });
            self.session = session;
            if (firstText) session.send(firstText);
            for (const e of self.pending.splice(0)) self.forward(e);
            for await (const ev of session) {
              if (ev.event.case !== 'chunk') continue;
              const chunk = ev.event.value;
              tts.stats.chunksReceived++;
              tts.stats.audioBytesReceived += chunk.audio.length;
              state.encoder ??= await tts.encoderFor(p.req, chunk.sampleRateHz || p.req.sampleRateHz);
              const pcm = pcmBytesToInt16(chunk.audio);
              const bytes = join(pcm.length ? state.encoder.push(pcm) : []);
              if (bytes.length) yield bytes;
            }
            call.span.end();
          })(),
        deliver: (bytes) => this.sendAudio(bytes),
        finish: async () => {
          state.encoder ??= await tts.encoderFor(p.req, p.req.sampleRateHz);
          const tail = join(state.encoder.end());
          if (tail.length) await this.sendAudio(tail);
        },
      },
      this.ac.signal,
    );
    const r = await result;
    tts.stats.active--;
    tts.stats[r.outcome]++;
    if (r.outcome === 'done') {
      p.span.end();
      void recordUsage(tts.deps.sql, { teamId: this.caller.teamId, kind: 'tts_characters', amount: this.characters, model: p.req.model }, tts.deps.log, { later: true });
      this.finish({ event: 'finish', reason: 'stop' }, 1000, 'stop');
    } else if (r.outcome === 'cancelled') {
      p.span.end({ status: 499, message: 'client closed' });
    } else {
      const e = toServiceError(r.error);
      p.span.end({ status: e.status, message: e.message });
      this.fail(e);
    }
  }

  private sendAudio(audio: Uint8Array): Promise<void> | undefined {
    if (this.phase === 'closed') return undefined;
    this.socket.send(packr.pack({ event: 'audio', audio }));
    if (this.socket.bufferedAmount() <= HIGH_WATER_BYTES) return undefined;
    return new Promise<void>((resolve) => this.drainWaiters.push(resolve));
  }

  private finish(frame: Record<string, unknown>, code: number, reason: string): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    this.caller.slot?.release();
    this.socket.send(packr.pack(frame));
    this.socket.end(code, reason);
    this.ac.abort(Object.assign(new Error('finished'), { name: 'AbortError' }));
  }

  private fail(err: unknown): void {
    const e = toServiceError(err);
    if (e.code === 'internal') this.tts.deps.log.error({ err }, 'live synthesis failed');
    const clientFault = e.status < 500;
    const message = e.code === 'invalid' && e.fields?.length ? `${e.fields[0]!.loc.slice(1).join('.')}: ${e.fields[0]!.msg}` : e.message;
    this.finish({ event: 'finish', reason: 'error', message }, clientFault ? 1008 : 1011, clientFault ? 'policy violation' : 'internal error');
  }
}

/** Mounts the live socket on the platform's uWebSockets.js App. */
export function mountLiveRoute(http: HttpApp, tts: TtsService): void {
  http.ws<UserData>('/v1/tts/live', {
    compression: 0,
    maxPayloadLength: MAX_FRAME_BYTES,
    maxBackpressure: 64 * 1024 * 1024,
    idleTimeout: 120,
    upgrade: (res, req, context) => {
      let aborted = false;
      res.onAborted(() => (aborted = true));
      // Copy everything out of `req` now: it is invalid after this callback returns.
      const authorization = req.getHeader('authorization');
      const model = req.getHeader('model') || undefined;
      const traceparent = req.getHeader('traceparent') || undefined;
      const incomingId = req.getHeader('x-request-id');
      const hs = readHandshake(req);
      const requestId = requestIdFrom(incomingId);
      const refuse = (status: string, body: string | null, headers: Record<string, string> = {}) =>
        res.cork(() => {
          res.writeStatus(status);
          for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
          if (body === null) res.end();
          else res.writeHeader('Content-Type', 'application/json').end(body);
        });
      const token = bearerToken(authorization);
      if (!token) return refuse('401 Unauthorized', null, { 'WWW-Authenticate': 'Bearer' });
      // The key, then a concurrency slot of the team (429 with Retry-After before the upgrade
      // past its cap); the slot stays with the socket until it ends.
      (async () => {
        const principal = await tts.deps.authenticate(token, SPEECH_AUTH_MESSAGES);
        if (aborted) return;
        const slot = await tts.deps.concurrency?.acquire(principal.teamId);
        if (aborted) return slot?.release();
        acceptUpgrade<UserData>(res, hs, { teamId: principal.teamId, model, traceparent, requestId, slot }, context, { aborted: () => aborted, abandoned: () => slot?.release() });
      })().catch((err) => {
        if (aborted) return;
        const e = toServiceError(err);
        const status = e.status === 401 ? '401 Unauthorized' : e.status === 429 ? '429 Too Many Requests' : '503 Service Unavailable';
        refuse(status, JSON.stringify({ status: e.status, message: e.message }), e.status === 429 ? { ...e.headers } : {});
      });
    },
    open: (ws) => {
      const d = ws.getUserData();
      let closed = false;
      const socket: LiveSocket = {
        send: (frame) => {
          if (closed) return false;
          let status = 0;
          ws.cork(() => (status = ws.send(frame, true)));
          // Past the mark the synthesis waits for `drain`; a client that never takes more is closed.
          if (ws.getBufferedAmount() > HIGH_WATER_BYTES) d.stall?.behind();
          return status !== 2;
        },
        bufferedAmount: () => (closed ? 0 : ws.getBufferedAmount()),
        end: (code, reason) => {
          if (closed) return;
          closed = true;
          ws.cork(() => ws.end(code, reason));
        },
      };
      d.live = new LiveSession(tts, socket, { teamId: d.teamId, requestId: d.requestId, traceparent: d.traceparent, model: d.model, slot: d.slot });
      (d as { markClosed?: () => void }).markClosed = () => (closed = true);
      // The socket holds a concurrency slot: without its start frame in time it is closed 4408.
      d.started = startDeadline(http.wsStartTimeoutMs, socket.end);
      d.stall = stallWatch(http.wsStallTimeoutMs, socket.end);
    },
    message: (ws, message, isBinary) => {
      const d = ws.getUserData();
      d.started?.();
      d.live?.onFrame(message, isBinary);
    },
    drain: (ws) => {
      const d = ws.getUserData();
      d.stall?.caughtUp();
      d.live?.onDrain();
    },
    close: (ws) => {
      const d = ws.getUserData() as UserData & { markClosed?: () => void };
      d.started?.();
      d.stall?.stop();
      d.markClosed?.();
      d.live?.onClose();
    },
  } as uws.WebSocketBehavior<UserData>);
}
