import { ServiceError } from '../errors.ts';
import { isMsgpack, mediaType, parseMsgpack, parseMultipart, partText } from '../http/body.ts';
import { parse } from '../validation.ts';
import { z } from 'zod';
import type { HttpApp } from '../http/app.ts';
import { ASR_BODY_LIMIT, asrResponseBody, asrResponseSchema, ASR_MAX_AUDIO_BYTES, asrRequestSchema, type AsrRequest, type AsrService } from './asr.ts';
import { errorBody } from '../http/openapi.ts';

/** Speech endpoints answer a bad key with `Invalid Token` (docs/api/auth-errors.md). */
export { SPEECH_AUTH_MESSAGES } from '../auth/principal.ts';
import { SPEECH_AUTH_MESSAGES } from '../auth/principal.ts';

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

/** Reads the body of `POST /v1/asr`: multipart parts or a MessagePack map. */
export function readAsrRequest(raw: Buffer | undefined, contentType: string | undefined): AsrRequest {
  const type = mediaType(contentType);
  let body: Record<string, unknown>;
  if (type === 'multipart/form-data') {
    if (!raw || raw.length === 0) throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
    body = {};
    for (const p of parseMultipart(raw, contentType!)) {
      const name = p.name.endsWith('[]') ? p.name.slice(0, -2) : p.name;
      if (name in body) continue; // the first of a repeated field wins
      // The audio part is binary whether or not it names a file; other parts are text.
      body[name] = name === 'audio' ? new Uint8Array(p.data) : partText(p);
    }
  } else if (isMsgpack(contentType)) {
    if (!raw || raw.length === 0) throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
    const v = parseMsgpack(raw);
    if (!v || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) throw new ServiceError('bad_request', 'The MessagePack body must be a map');
    body = { ...(v as Record<string, unknown>) };
  } else {
    // JSON with base64 audio included (docs/api/asr.md: rejected).
    throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
  }
  for (const [k, v] of Object.entries(body)) if (v === null || v === undefined) delete body[k];
  if (typeof body.audio === 'string') throw new ServiceError('invalid', 'Input should be binary audio', { fields: [{ type: 'bytes_type', loc: ['body', 'audio'], msg: 'Input should be binary audio, not text', ctx: {} }] });
  const req = parse(asrRequestSchema, body);
  if (req.audio.byteLength > ASR_MAX_AUDIO_BYTES) throw new ServiceError('payload_too_large', `audio exceeds ${ASR_MAX_AUDIO_BYTES} bytes (20 MB)`);
  return req;
}
