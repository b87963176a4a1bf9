/** Routes: `POST /v1/tts` and `POST /v1/tts/stream/with-timestamp`. */
import { replySink } from '../http/sinks.ts';
import type { HttpApp } from '../http/app.ts';
import type { Ctx } from '../http/router.ts';
import { ttsRequestSchema } from './request.ts';
import { SPEECH_AUTH_MESSAGES, type TtsService } from './tts.ts';

/** Request bodies may carry reference audio: up to 32 MiB. */
export const TTS_BODY_LIMIT = 32 * 1024 * 1024;

export function mountTtsRoutes(http: HttpApp, tts: TtsService): void {
  const handle = (spanName: string, mode: 'audio' | 'sse') => async (ctx: Ctx) => {
    const caller = { teamId: ctx.principal!.teamId, requestId: ctx.requestId, traceparent: ctx.headers['traceparent'], signal: ctx.signal };
    const prepared = await tts.prepare(spanName, ctx.body, ctx.headers['model'], caller);
    await tts.stream(prepared, caller, replySink(ctx.reply, mode), mode);
  };
  http.route({
    method: 'POST',
    path: '/v1/tts',
    auth: 'required',
    body: 'json-or-msgpack',
    bodyLimit: TTS_BODY_LIMIT,
    authMessages: SPEECH_AUTH_MESSAGES,
    doc: {
      summary: 'Text to speech: audio streamed in the chosen format',
      tags: ['speech'],
      body: ttsRequestSchema,
      responses: {
        200: { description: 'Audio (audio/mpeg, audio/wav, audio/pcm;rate=N or audio/ogg;codecs=opus), streamed', contentType: 'audio/mpeg' },
        400: { description: 'Bad parameter (sample rate, text over 20,000 characters, Reference not found)' },
        402: { description: 'Out of API credit' },
        422: { description: 'Schema violation (list of field errors)' },
      },
    },
    handler: handle('POST /v1/tts', 'audio'),
  });
  http.route({
    method: 'POST',
    path: '/v1/tts/stream/with-timestamp',
    auth: 'required',
    body: 'json-or-msgpack',
    bodyLimit: TTS_BODY_LIMIT,
    authMessages: SPEECH_AUTH_MESSAGES,
    doc: {
      summary: 'Text to speech with alignment: Server-Sent Events with audio chunks and cumulative word timings',
      tags: ['speech'],
      body: ttsRequestSchema,
      responses: { 200: { description: 'text/event-stream of `message` events (and `error` on a failure mid-stream)', contentType: 'text/event-stream' } },
    },
    handler: handle('POST /v1/tts/stream/with-timestamp', 'sse'),
  });
}
