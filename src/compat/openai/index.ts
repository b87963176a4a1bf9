/**
 * Families A, B and Groq-style of the compatibility layer (docs/api/compat.md): one
 * implementation served at `/compat/v1`, `/compat/api/v1` (router style) and
 * `/compat/openai/v1` (the Groq client appends `/openai/v1` to `/compat`).
 *
 * Routes: `POST /audio/speech`, `/audio/transcriptions`, `/chat/completions` (chat-modality
 * audio, `chat.ts`), `/audio/translations` (404), `GET /models`, and `wss /realtime`
 * (`realtime-route.ts`).
 *
 * Routes authenticate themselves (`auth: 'none'`) so that every error, a missing or bad key
 * included, is this family's envelope. Synthesis goes through `TtsService`, transcription
 * through `AsrService`; nothing here talks to the backend.
 */
import { replySink } from '../../http/sinks.ts';
import { ServiceError, toServiceError } from '../../errors.ts';
import type { Authenticate, Principal } from '../../auth/principal.ts';
import { bearerToken, type HttpApp } from '../../http/app.ts';
import type { Ctx, Result } from '../../http/router.ts';
import { parseJson } from '../../http/body.ts';
import { newId } from '../../ids.ts';
import type { AsrService } from '../../speech/asr.ts';
import { SPEECH_AUTH_MESSAGES, type Caller, type TtsService } from '../../speech/tts.ts';
import { fromProvider, markProvider, openaiEnvelope } from '../errors.ts';
import { catalog } from './models.ts';
import { toNativeSpeech } from './speech.ts';
import { readTranscriptionRequest, transcriptionResponse } from './transcriptions.ts';
import { mountRealtime } from './realtime-route.ts';
import { Base64Pieces } from './base64-pieces.ts';
import { audioId, chunkEvent, completion, completionId, DONE_EVENT, errorEvent, expiresAt, readChatRequest, usageEvent } from './chat.ts';

export { resolveModel, catalog } from './models.ts';
export { toNativeSpeech, NATIVE_PARAMS, headerFor, PRESET_VOICES } from './speech.ts';

/** The three base paths of the one protocol. */
export const OPENAI_COMPAT_BASES = ['/compat/v1', '/compat/api/v1', '/compat/openai/v1'] as const;
/** The router-style base, where the family-B-only body fields are read. */
export const ROUTER_BASE = '/compat/api/v1';

/** Speech and chat bodies (docs/api/compat.md): 32 MiB. */
export const SPEECH_BODY_LIMIT = 32 * 1024 * 1024;
export const CHAT_BODY_LIMIT = SPEECH_BODY_LIMIT;
/** Transcription bodies (docs/api/compat.md): 140 MiB (the audio limit itself is the native one). */
export const TRANSCRIPTION_BODY_LIMIT = 140 * 1024 * 1024;

export interface OpenAiCompatDeps {
  tts: Pick<TtsService, 'prepare' | 'stream' | 'synthesize' | 'deps'>;
  asr: Pick<AsrService, 'transcribe'>;
  /** The platform's key check (`KeyVerifier.verify`). */
  authenticate: Authenticate;
  /** Realtime connection lifetime (docs/api/compat.md: 3600 s). */
  realtimeLifetimeMs?: number;
}

/** The caller's key: a missing or unparsable header is the layer's 401; a bad key the native 401. */
async function authenticate(ctx: Ctx, check: Authenticate): Promise<Principal> {
  const header = ctx.headers['authorization'];
  if (header === undefined || header.trim() === '') throw new ServiceError('unauthenticated', 'Missing Authorization header: send Authorization: Bearer <API key>');
  const token = bearerToken(header);
  if (!token) throw new ServiceError('unauthenticated', 'Malformed Authorization header: expected Bearer <API key>');
  return fromProvider(() => check(token, SPEECH_AUTH_MESSAGES));
}

/** Runs a handler; an error before the response started becomes the family's envelope. */
const enveloped = (fn: (ctx: Ctx) => Promise<Result | void>) => async (ctx: Ctx): Promise<Result | void> => {
  try {
    return await fn(ctx);
  } catch (err) {
    if (ctx.reply.started) throw err; // mid-stream: the HTTP layer cuts the response
    const e = toServiceError(err);
    if (e.code === 'internal') ctx.log.error({ err }, 'compat request failed');
    const env = openaiEnvelope(e);
    return { status: env.status, body: env.body, headers: env.headers };
  }
};

/** The JSON body of a speech or chat request (the layer's 400/415 otherwise). */
function jsonBody(ctx: Ctx): unknown {
  if (!ctx.rawBody?.length) throw new ServiceError('bad_request', 'The request has no body: send a JSON object');
  if (!/^application\/(.+\+)?json$/.test((ctx.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase())) {
    throw new ServiceError('unsupported_media_type', 'Unsupported Content-Type: send application/json');
  }
  return parseJson(ctx.rawBody); // 400 Malformed JSON; NUL, lone surrogates, deep nesting refused
}

const SSE_HEADERS = { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' };

const errorDoc = { description: 'Error envelope `{error: {code, message, type, param?, metadata?}}`' };

export function mountOpenAiCompat(http: HttpApp, deps: OpenAiCompatDeps): void {
  for (const base of OPENAI_COMPAT_BASES) {
    mountRealtime(http, base, { tts: deps.tts, asr: deps.asr, log: deps.tts.deps.log, authenticate: deps.authenticate, lifetimeMs: deps.realtimeLifetimeMs });
    const routerStyle = base === ROUTER_BASE;
    const caller = (ctx: Ctx, p: Principal): Caller => ({ teamId: p.teamId, requestId: ctx.requestId, traceparent: ctx.headers['traceparent'], signal: ctx.signal });

    http.route({
      method: 'POST',
      path: `${base}/audio/speech`,
      auth: 'none',
      body: 'any',
      bodyLimit: SPEECH_BODY_LIMIT,
      doc: {
        summary: 'Compat text to speech (OpenAI-, router- and Groq-style): audio streamed',
        tags: ['compat'],
        responses: {
          200: { description: 'Audio: audio/mpeg, audio/wav, audio/pcm;rate=N or audio/ogg;codecs=opus', contentType: 'audio/mpeg' },
          400: errorDoc,
          401: errorDoc,
          402: errorDoc,
        },
      },
      handler: enveloped(async (ctx) => {
        ctx.reply.addBaseHeader('X-Generation-Id', newId('gen'));
        const principal = await authenticate(ctx, deps.authenticate);
        const raw = jsonBody(ctx);
        const native = toNativeSpeech(raw, ctx.headers, routerStyle);
        const c = caller(ctx, principal);
        const prepared = await fromProvider(() => deps.tts.prepare(`POST ${base}/audio/speech`, native.body, native.model, c));
        await fromProvider(() => deps.tts.stream(prepared, c, replySink(ctx.reply, 'audio'), 'audio'));
      }),
    });

    http.route({
      method: 'POST',
      path: `${base}/audio/transcriptions`,
      auth: 'none',
      body: 'any',
      bodyLimit: TRANSCRIPTION_BODY_LIMIT,
      doc: {
        summary: 'Compat speech to text: multipart (file) or JSON (input_audio); json, text, verbose_json, srt, vtt',
        tags: ['compat'],
        responses: { 200: { description: 'The transcript (application/json, or text/plain for text, srt, vtt)' }, 400: errorDoc, 401: errorDoc, 413: errorDoc },
      },
      handler: enveloped(async (ctx) => {
        ctx.reply.addBaseHeader('X-Generation-Id', newId('gen'));
        const principal = await authenticate(ctx, deps.authenticate);
        const req = readTranscriptionRequest(ctx.rawBody, ctx.headers['content-type'], ctx.headers);
        const t = await fromProvider(() =>
          deps.asr.transcribe(principal.teamId, req.audio, { language: req.language, signal: ctx.signal, requestId: ctx.requestId, traceparent: ctx.headers['traceparent'] }),
        );
        const res = transcriptionResponse(t, req);
        if (typeof res.body === 'string') {
          ctx.reply.send(200, res.body, { 'Content-Type': res.contentType });
          return;
        }
        return { status: 200, body: res.body };
      }),
    });

    http.route({
      method: 'POST',
      path: `${base}/chat/completions`,
      auth: 'none',
      body: 'any',
      bodyLimit: CHAT_BODY_LIMIT,
      doc: {
        summary: 'Compat chat-modality audio: speak the last user text (modalities text+audio) or transcribe an input_audio part; stream=true gives SSE',
        tags: ['compat'],
        responses: { 200: { description: 'chat.completion (JSON) or chat.completion.chunk events (text/event-stream)' }, 400: errorDoc, 401: errorDoc, 413: errorDoc },
      },
      handler: enveloped(async (ctx) => {
        ctx.reply.addBaseHeader('X-Generation-Id', newId('gen'));
        const principal = await authenticate(ctx, deps.authenticate);
        const req = readChatRequest(jsonBody(ctx), ctx.headers, routerStyle);
        const c = caller(ctx, principal);
        const id = completionId();
        const reply = ctx.reply;

        if (req.kind === 'transcribe') {
          const texts: string[] = [];
          for (const audio of req.audio) {
            const t = await fromProvider(() => deps.asr.transcribe(principal.teamId, audio, { signal: ctx.signal, requestId: ctx.requestId, traceparent: ctx.headers['traceparent'] }));
            texts.push(t.text.trim());
          }
          const content = texts.filter(Boolean).join(' ');
          if (!req.stream) return { status: 200, body: completion(id, req.model, { content }) };
          reply.begin(200, SSE_HEADERS);
          await reply.write(chunkEvent(id, req.model, { role: 'assistant', content: '' }));
          await reply.write(chunkEvent(id, req.model, { content }));
          await reply.write(chunkEvent(id, req.model, {}, 'stop'));
          if (req.includeUsage) await reply.write(usageEvent(id, req.model));
          reply.end(DONE_EVENT);
          return;
        }

        const prepared = await fromProvider(() => deps.tts.prepare(`POST ${base}/chat/completions`, req.native.body, req.native.model, c));
        const audio = { id: audioId() };
        if (!req.stream) {
          const parts: Uint8Array[] = [];
          const outcome = await fromProvider(() => deps.tts.synthesize(prepared, c, ({ bytes }) => {
            if (bytes.length) parts.push(bytes);
          }));
          if (outcome === 'cancelled') throw new ServiceError('bad_request', 'client closed the request');
          return {
            status: 200,
            body: completion(id, req.model, { content: null, audio: { ...audio, data: Buffer.concat(parts).toString('base64'), expires_at: expiresAt(), transcript: req.transcript } }),
          };
        }
        // SSE: the transcript first, then audio pieces whose base64 concatenates, then the end.
        const pieces = new Base64Pieces();
        const send = (event: string): Promise<void> | undefined => {
          if (!reply.started) reply.begin(200, SSE_HEADERS);
          const w = reply.write(event);
          return reply.backpressured ? w : undefined;
        };
        await send(chunkEvent(id, req.model, { role: 'assistant', content: null, audio: { ...audio, transcript: req.transcript } }));
        try {
          await deps.tts.synthesize(prepared, c, ({ bytes }) => {
            if (!bytes.length) return undefined;
            const data = pieces.push(bytes);
            return data ? send(chunkEvent(id, req.model, { audio: { ...audio, data } })) : undefined;
          });
        } catch (err) {
          // Mid-stream failure: an error payload the clients raise, then the end (never a clean finish).
          const e = markProvider(err);
          await reply.write(errorEvent(e.status, e.message));
          reply.end();
          return;
        }
        const tail = pieces.end();
        if (tail) await send(chunkEvent(id, req.model, { audio: { ...audio, data: tail } }));
        await send(chunkEvent(id, req.model, { audio: { ...audio, expires_at: expiresAt() } }));
        await send(chunkEvent(id, req.model, {}, 'stop'));
        if (req.includeUsage) await send(usageEvent(id, req.model));
        reply.end(DONE_EVENT);
      }),
    });

    http.route({
      method: 'POST',
      path: `${base}/audio/translations`,
      auth: 'none',
      body: 'any',
      bodyLimit: TRANSCRIPTION_BODY_LIMIT,
      doc: { summary: 'Not offered (404)', tags: ['compat'], responses: { 404: errorDoc } },
      handler: enveloped(async () => {
        throw new ServiceError('not_found', 'Audio translation is not offered: use /audio/transcriptions');
      }),
    });

    http.route({
      method: 'GET',
      path: `${base}/models`,
      auth: 'none',
      doc: { summary: 'Model catalog (no auth); ?output_modalities=speech|text', tags: ['compat'], responses: { 200: { description: 'List of models (router Model schema)' } } },
      handler: async (ctx) => ({ status: 200, body: catalog(base, ctx.query.get('output_modalities')) }),
    });

    for (const path of [`${base}/models/{id}`, `${base}/models/{id}/{slug}`, `${base}/models/{id}/{slug}/endpoints`]) {
      http.route({
        method: 'GET',
        path,
        auth: 'none',
        doc: { summary: 'Not offered: list the catalog instead (404)', tags: ['compat'], responses: { 404: errorDoc } },
        handler: enveloped(async () => {
          throw new ServiceError('not_found', `Model lookup is not offered: list ${base}/models`);
        }),
      });
    }
  }
}
