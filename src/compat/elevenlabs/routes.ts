/**
 * Family C REST routes under `/compat/elevenlabs` (docs/api/compat.md "Family C",
 * D-COMPAT-11). Routes are mounted with `auth: 'none'` and a raw body so that every
 * failure, authentication and body parsing included, answers in the family's envelope
 * `{detail: {status, message}}`. Each route translates into the native speech services.
 */
import { replySink } from '../../http/sinks.ts';
import type { Authenticate, Principal } from '../../auth/principal.ts';
import type { HttpApp } from '../../http/app.ts';
import { newId } from '../../ids.ts';
import type { Ctx, RouteSpec } from '../../http/router.ts';
import type { Logger } from '../../log.ts';
import type { AsrService } from '../../speech/asr.ts';
import type { Caller, TtsService } from '../../speech/tts.ts';
import type { SharedState } from '../../state/index.ts';
import type { Sql } from '../../store/db.ts';
import { authenticateKey, ELEVENLABS_BASE, ElevenLabsError, sendElevenLabsError } from './common.ts';
import { readSttRequest, sttResponse } from './stt.ts';
import { ELEVENLABS_JSON_LIMIT, ndjsonLine, readJsonBody, timestampsJson, translateTts, synthesizeTimed } from './tts.ts';
import { authenticateKeyOrToken, issueSingleUseToken, type KeyIsLive, type SingleUseTokenType } from './tokens.ts';
import { getVoice, listVoicesV1, modelCatalog, ownVoiceCount, searchVoicesV2, userStub } from './voices.ts';
import type { SocketTimers } from './ws-socket.ts';
import { mountMultiStreamInput } from './ws-multi-stream.ts';
import { mountRealtimeStt } from './ws-realtime-stt.ts';
import { mountStreamInput } from './ws-stream-input.ts';

export interface ElevenLabsDeps {
  tts: TtsService;
  asr: AsrService;
  sql: Sql;
  /** The platform's key check (`KeyVerifier.verify`). */
  authenticate: Authenticate;
  log: Logger;
  /** Single-use tokens (tokens.ts). */
  state: SharedState;
  /** Whether a token's issuing key is still usable (none: not checked). */
  keyIsLive?: KeyIsLive;
  /** The sockets' lifetime and inactivity clocks (tests shorten them). */
  timers?: SocketTimers;
}

/** Transcription uploads (docs/api/compat.md: 140 MiB body; the native service caps the audio). */
export const ELEVENLABS_STT_LIMIT = 140 * 1024 * 1024;

type Handler = (ctx: Ctx, teamId: string, principal: Principal) => Promise<unknown>;

/** Every synthesis and transcription response carries an `X-Generation-Id` (docs/api/compat.md). */
const generation = (ctx: Ctx) => ctx.reply.addBaseHeader('X-Generation-Id', newId('gen'));

/** Mounts every family C REST route on `http`. */
export function mountElevenLabsRoutes(http: HttpApp, deps: ElevenLabsDeps): void {
  const tags = ['Compat: ElevenLabs-style'];
  /** Authenticates, runs the handler, answers JSON results and errors in the family envelope. */
  const route = (method: RouteSpec['method'], path: string, summary: string, handler: Handler, bodyLimit?: number, tokenType?: SingleUseTokenType) =>
    http.route({
      method,
      path: ELEVENLABS_BASE + path,
      auth: 'none',
      body: method === 'GET' ? 'none' : 'any',
      ...(bodyLimit ? { bodyLimit } : {}),
      doc: { summary, tags },
      handler: async (ctx) => {
        try {
          const principal = tokenType ? await authenticateKeyOrToken(ctx, tokenType, deps) : await authenticateKey(ctx.headers, deps.authenticate);
          const result = await handler(ctx, principal.teamId, principal);
          if (result !== undefined && !ctx.reply.started) ctx.reply.json(200, result);
        } catch (err) {
          if (!sendElevenLabsError(ctx.reply, err, ctx.log)) throw err; // mid-stream: the HTTP layer cuts the response
        }
      },
    });

  const caller = (ctx: Ctx, teamId: string): Caller => ({ teamId, requestId: ctx.requestId, traceparent: ctx.headers['traceparent'], signal: ctx.signal });

  const prepare = async (ctx: Ctx, teamId: string, span: string, allowReferences: boolean) => {
    generation(ctx);
    const { body, model } = translateTts(readJsonBody(ctx), ctx.params.voice_id ?? 'default', ctx.query.get('output_format') ?? undefined, ctx.headers, allowReferences);
    const c = caller(ctx, teamId);
    return { c, prepared: await deps.tts.prepare(span, body, model, c) };
  };

  // Audio: the same streamed body for both paths (the non-stream one is a stream the client collects).
  for (const suffix of ['', '/stream']) {
    const path = `/v1/text-to-speech/{voice_id}${suffix}`;
    route('POST', path, suffix ? 'Text to speech, streamed audio' : 'Text to speech', async (ctx, teamId) => {
      const { c, prepared } = await prepare(ctx, teamId, `POST ${ELEVENLABS_BASE}${path}`, true);
      await deps.tts.stream(prepared, c, replySink(ctx.reply, 'audio'), 'audio');
      return undefined;
    }, ELEVENLABS_JSON_LIMIT);
  }

  route('POST', '/v1/text-to-speech/{voice_id}/with-timestamps', 'Text to speech with character timestamps (JSON)', async (ctx, teamId) => {
    const { c, prepared } = await prepare(ctx, teamId, `POST ${ELEVENLABS_BASE}/v1/text-to-speech/{voice_id}/with-timestamps`, false);
    return timestampsJson(deps.tts, prepared, c);
  }, ELEVENLABS_JSON_LIMIT);

  route('POST', '/v1/text-to-speech/{voice_id}/stream/with-timestamps', 'Text to speech with character timestamps (NDJSON stream)', async (ctx, teamId) => {
    const { c, prepared } = await prepare(ctx, teamId, `POST ${ELEVENLABS_BASE}/v1/text-to-speech/{voice_id}/stream/with-timestamps`, false);
    const reply = ctx.reply;
    await synthesizeTimed(deps.tts, prepared, c, (chunk) => {
      if (!reply.started) reply.begin(200, { 'Content-Type': 'application/x-ndjson', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
      const w = reply.write(ndjsonLine(chunk));
      return reply.backpressured ? w : undefined; // a promise only while the socket is full
    });
    reply.end();
    return undefined;
  }, ELEVENLABS_JSON_LIMIT);

  route('POST', '/v1/speech-to-text', 'Speech to text (multipart)', async (ctx, teamId) => {
    if (Object.keys(ctx.headers).some((h) => h.startsWith('x-service-'))) {
      throw new ElevenLabsError('invalid_request', 'Native parameter headers (X-Service-*) do not apply to speech to text');
    }
    const req = readSttRequest(ctx.rawBody, ctx.headers['content-type'], ctx.query);
    generation(ctx);
    const t = await deps.asr.transcribe(teamId, req.audio, {
      language: req.languageCode || undefined, signal: ctx.signal, requestId: ctx.requestId, traceparent: ctx.headers['traceparent'],
    });
    return sttResponse(t, req);
  }, ELEVENLABS_STT_LIMIT, 'batch_scribe');

  route('POST', '/v1/single-use-token/{token_type}', 'Single-use token (15 minutes) for a frontend client', (ctx, _teamId, principal) =>
    issueSingleUseToken(deps.state, ctx.params, principal));

  route('GET', '/v1/voices', 'The caller\'s voices', (_ctx, teamId) => listVoicesV1(deps.sql, teamId));
  route('GET', '/v2/voices', 'Search the caller\'s voices (paged)', (ctx, teamId) => searchVoicesV2(deps.sql, teamId, ctx.query));
  route('GET', '/v1/voices/{voice_id}', 'One of the caller\'s voices', (ctx, teamId) => getVoice(deps.sql, teamId, ctx.params.voice_id!));
  route('GET', '/v1/models', 'Model catalog', async () => modelCatalog());
  route('GET', '/v1/user', 'User stub (health checks)', async (_ctx, teamId) => userStub(teamId, await ownVoiceCount(deps.sql, teamId)));

  // WebSockets (ws-*.ts): realtime input streaming (single and multi-context) and realtime speech to text.
  mountStreamInput(http, deps);
  mountMultiStreamInput(http, deps);
  mountRealtimeStt(http, deps);
}
