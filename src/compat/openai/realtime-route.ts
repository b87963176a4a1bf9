/**
 * `wss …/realtime?model=…` on the three bases of families A, B and Groq-style (docs/api/compat.md).
 *
 * Handshake: the key comes from `Authorization: Bearer` or `?api_key=`; `?intent=transcription`
 * opens a dedicated transcription session. Refusals before the upgrade are HTTP answers in
 * the family envelope: no key (401 `authentication_error`), an invalid key (401
 * `provider_error`), an unknown model or `X-Service-` header (400). Frames above 32 MiB
 * close the socket (docs/api/compat.md). A client that takes nothing for
 * `PARLEY_WS_STALL_TIMEOUT_MS` while more than `HIGH_WATER_BYTES` wait unsent (a response's
 * synthesis pauses there; replies to its events queue up to uWS's `maxBackpressure`) is
 * closed 4008; its response and transcriptions are cancelled (docs/reliability.md "Slow clients").
 */
import type uws from 'uWebSockets.js';
import { ServiceError } from '../../errors.ts';
import type { Authenticate } from '../../auth/principal.ts';
import { acceptUpgrade, bearerToken, readHandshake, readHeaders, readQuery, requestIdFrom, type HttpApp } from '../../http/app.ts';
import { stallWatch } from '../../http/ws-frames.ts';
import { SPEECH_AUTH_MESSAGES } from '../../speech/tts.ts';
import { fromProvider, openaiEnvelope } from '../errors.ts';
import { resolveModel } from './models.ts';
import { defaultConfig } from './realtime-config.ts';
import { HIGH_WATER_BYTES, RealtimeSession, type RealtimeDeps } from './realtime.ts';
import { nativeFromHeaders } from './speech.ts';

/** Largest client frame (docs/api/compat.md "Limits"); a bigger one closes the socket. */
export const REALTIME_MAX_FRAME_BYTES = 32 * 1024 * 1024;

/** The vendor's realtime model names: they select the default speech (or transcription) model. */
export const REALTIME_MODEL_ALIASES = new Set([
  'gpt-realtime', 'gpt-realtime-mini', 'gpt-4o-realtime-preview', 'gpt-4o-mini-realtime-preview', 'gpt-realtime-whisper',
]);

const bare = (m: string) => (m.startsWith('openai/') ? m.slice('openai/'.length) : m).trim();

/** `service/<native>` of a transcription model named in a session update. */
export function transcriptionModelId(model: string): string {
  return `service/${REALTIME_MODEL_ALIASES.has(bare(model)) ? 'transcribe-1' : resolveModel(model, 'transcription')}`;
}

export interface RealtimeRouteDeps extends RealtimeDeps {
  authenticate: Authenticate;
  /** Connection lifetime (docs/api/compat.md: 3600 s). */
  lifetimeMs?: number;
}

interface UserData {
  teamId: string;
  requestId: string;
  traceparent?: string;
  model: string;
  speechModel: string;
  transcription: boolean;
  nativeHeaders: Record<string, string>;
  session?: RealtimeSession;
  closed?: boolean;
  /** Closes the socket 4008 when its client stops reading (`stallWatch`). */
  stall?: ReturnType<typeof stallWatch>;
}

export function mountRealtime(http: HttpApp, base: string, deps: RealtimeRouteDeps): void {
  http.ws<UserData>(`${base}/realtime`, {
    compression: 0,
    maxPayloadLength: REALTIME_MAX_FRAME_BYTES,
    maxBackpressure: 64 * 1024 * 1024,
    idleTimeout: 120,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => {
      let aborted = false;
      res.onAborted(() => (aborted = true));
      // Copy everything out of `req` now: it is invalid after this callback returns.
      const query = new URLSearchParams(readQuery(req));
      const headers = readHeaders(req);
      const hs = readHandshake(req);
      // Answer with one offered subprotocol (never the whole list); prefer `realtime`.
      const protocols = hs.protocol.split(',').map((p) => p.trim()).filter(Boolean);
      const protocol = protocols.includes('realtime') ? 'realtime' : (protocols[0] ?? '');
      const requestId = requestIdFrom(headers['x-request-id']);
      const refuse = (err: unknown) => {
        if (aborted) return;
        const env = openaiEnvelope(err);
        res.cork(() => {
          res.writeStatus(String(env.status));
          for (const [k, v] of Object.entries(env.headers ?? {})) res.writeHeader(k, v);
          res.writeHeader('Content-Type', 'application/json').end(JSON.stringify(env.body));
        });
      };

      let data: Omit<UserData, 'teamId'>;
      let token: string | undefined;
      try {
        const header = headers['authorization'];
        token = header ? bearerToken(header) : query.get('api_key') || undefined;
        if (!token) throw new ServiceError('unauthenticated', header ? 'Malformed Authorization header: expected Bearer <API key>' : 'Missing API key: send Authorization: Bearer <API key> or ?api_key=');
        const transcription = query.get('intent') === 'transcription';
        const model = query.get('model') ?? '';
        const alias = model === '' || REALTIME_MODEL_ALIASES.has(bare(model));
        const speechModel = transcription || alias ? 's2.1-pro' : resolveModel(model, 'speech');
        if (transcription && !alias) transcriptionModelId(model); // validates
        nativeFromHeaders(headers); // an unknown X-Service- header is refused here
        const nativeHeaders = Object.fromEntries(Object.entries(headers).filter(([k]) => k.startsWith('x-service-')));
        data = { requestId, traceparent: headers['traceparent'] || undefined, model, speechModel, transcription, nativeHeaders };
      } catch (err) {
        return refuse(err);
      }
      fromProvider(() => deps.authenticate(token, SPEECH_AUTH_MESSAGES)).then(
        (principal) => {
          if (aborted) return;
          acceptUpgrade<UserData>(res, hs, { ...data, teamId: principal.teamId }, context, { protocol, aborted: () => aborted });
        },
        refuse,
      );
    },
    open: (ws) => {
      const d = ws.getUserData();
      const transcriptionModel = d.transcription && d.model && !REALTIME_MODEL_ALIASES.has(bare(d.model)) ? transcriptionModelId(d.model) : 'service/transcribe-1';
      const config = defaultConfig(d.transcription ? 'transcription' : 'realtime', d.model || `service/${d.speechModel}`, transcriptionModel);
      const end = (code: number, reason: string) => {
        if (d.closed) return;
        d.closed = true;
        ws.cork(() => ws.end(code, reason));
      };
      d.stall = stallWatch(http.wsStallTimeoutMs, (code, reason) => {
        deps.log.warn({ requestId: d.requestId, stallTimeoutMs: http.wsStallTimeoutMs }, 'realtime client not reading: closed 4008');
        end(code, reason);
      });
      d.session = new RealtimeSession(
        deps,
        {
          send: (text) => {
            if (d.closed) return;
            ws.cork(() => ws.send(text, false));
            d.stall?.sent(ws.getBufferedAmount(), HIGH_WATER_BYTES);
          },
          bufferedAmount: () => (d.closed ? 0 : ws.getBufferedAmount()),
          end,
        },
        {
          teamId: d.teamId,
          requestId: d.requestId,
          traceparent: d.traceparent,
          config,
          speechModel: d.speechModel,
          nativeHeaders: d.nativeHeaders,
          resolveTranscriptionModel: transcriptionModelId,
          lifetimeMs: deps.lifetimeMs,
        },
      );
    },
    message: (ws, message) => ws.getUserData().session?.onMessage(Buffer.from(message).toString('utf8')),
    drain: (ws) => {
      const d = ws.getUserData();
      d.stall?.caughtUp();
      d.session?.onDrain();
    },
    close: (ws) => {
      const d = ws.getUserData();
      d.closed = true;
      d.stall?.stop();
      d.session?.onClose();
    },
  } as uws.WebSocketBehavior<UserData>);
}

