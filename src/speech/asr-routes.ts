import { z } from 'zod';
import type { HttpApp } from '../http/app.ts';
import { ASR_BODY_LIMIT, asrResponseBody, asrResponseSchema, readAsrRequest, type AsrService } from './asr.ts';
import { errorBody } from '../http/openapi.ts';

/** Speech endpoints answer a bad key with `Invalid Token` (docs/api/auth-errors.md). */
export const SPEECH_AUTH_MESSAGES = { invalid: 'Invalid Token', expired: 'Token expired' };

/** POST /v1/asr (docs/api/asr.md). */
export function mountAsrRoutes(http: HttpApp, asr: AsrService): void {
  http.route({
    method: 'POST', path: '/v1/asr', auth: 'required', body: 'any', bodyLimit: ASR_BODY_LIMIT, authMessages: SPEECH_AUTH_MESSAGES,
    doc: {
      summary: 'Transcribe audio (multipart/form-data or application/msgpack; JSON is refused)', tags: ['Speech'],
      responses: {
        200: { description: 'The transcript', schema: asrResponseSchema },
        400: { description: 'Undecodable audio, shorter than 1 s or longer than 60 min; real speech when the backend has no recognizer for it (the message names the settings that enable one)', schema: errorBody },
        413: { description: 'Audio over 20 MB', schema: errorBody },
        415: { description: 'Neither multipart/form-data nor application/msgpack (bare)' },
        422: { description: 'Missing audio or a field of the wrong type', schema: z.array(z.object({ type: z.string(), loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), ctx: z.record(z.string(), z.unknown()) })) },
        503: { description: 'Inference backend unavailable', schema: errorBody },
      },
    },
    handler: async (ctx) => {
      const req = readAsrRequest(ctx.rawBody, ctx.headers['content-type']);
      const t = await asr.transcribe(ctx.principal!.teamId, req.audio, {
        language: req.language, signal: ctx.signal, requestId: ctx.requestId, traceparent: ctx.headers['traceparent'],
      });
      return { status: 200, body: asrResponseBody(t, req.ignore_timestamps) };
    },
  });
}
