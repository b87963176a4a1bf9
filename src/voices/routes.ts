import { z } from 'zod';
import type { HttpApp } from '../http/app.ts';
import type { Ctx } from '../http/router.ts';
import { SPEECH_AUTH_MESSAGES } from '../speech/asr-routes.ts';
import { modelEntity, modelListBody, modelListQueryDoc, parseModelCreate, parseModelPatch, readModelBody, VOICE_BODY_LIMIT, type VoiceService } from './service.ts';
import { errorBody } from '../http/openapi.ts';

const fieldErrors = z.array(z.object({ type: z.string(), loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), ctx: z.record(z.string(), z.unknown()) }));
const team = (ctx: Ctx) => ctx.principal!.teamId;
const notFound = { description: 'Missing, deleted, or another team\'s private voice', schema: errorBody };
const tags = ['Voice models'];
const common = { auth: 'required' as const, authMessages: SPEECH_AUTH_MESSAGES };

/** /model and /model/{id} (GAPS §11.5), plus the sample and cover paths the entity points to. */
export function mountVoiceRoutes(http: HttpApp, voices: VoiceService): void {
  http.route({
    ...common, method: 'POST', path: '/model', body: 'any', bodyLimit: VOICE_BODY_LIMIT,
    doc: {
      summary: 'Create a voice from 1–20 samples (multipart/form-data preferred; JSON, MessagePack and urlencoded take base64 or bytes)', tags,
      responses: {
        201: { description: 'The voice, trained', schema: modelEntity },
        400: { description: 'A sample is undecodable, shorter than 1 s, or all exceed 10 min; cover not an image', schema: errorBody },
        413: { description: 'Body over 50 MB or cover over 5 MB', schema: errorBody },
        415: { description: 'Unsupported body type (bare)' },
        422: { description: 'Missing or invalid fields; a public voice without a cover', schema: fieldErrors },
      },
    },
    handler: async (ctx) => {
      const { body } = readModelBody(ctx.rawBody, ctx.headers['content-type'], false);
      const req = parseModelCreate(body);
      return { status: 201, body: await voices.create(team(ctx), req, { signal: ctx.signal, requestId: ctx.requestId }) };
    },
  });
  http.route({
    ...common, method: 'GET', path: '/model',
    doc: {
      summary: 'List voices: the team\'s own, and every team\'s public voices (newest first)', tags, query: modelListQueryDoc,
      responses: { 200: { description: 'A page of voices', schema: modelListBody }, 400: { description: 'Offset past 100,000 rows', schema: errorBody }, 422: { description: 'Query out of range', schema: fieldErrors } },
    },
    handler: async (ctx) => ({ status: 200, body: await voices.list(team(ctx), ctx.query) }),
  });
  http.route({
    ...common, method: 'GET', path: '/model/{id}',
    doc: { summary: 'Read a voice (own, public or unlisted)', tags, responses: { 200: { description: 'The voice', schema: modelEntity }, 404: notFound } },
    handler: async (ctx) => ({ status: 200, body: await voices.get(team(ctx), ctx.params.id!) }),
  });
  http.route({
    ...common, method: 'PATCH', path: '/model/{id}', body: 'any', bodyLimit: VOICE_BODY_LIMIT,
    doc: {
      summary: 'Update title, description, cover_image, visibility or tags of the team\'s own voice', tags,
      responses: { 200: { description: 'The updated voice', schema: modelEntity }, 404: { description: 'Missing, deleted, or another team\'s voice', schema: errorBody }, 415: { description: 'Unsupported body type (bare)' }, 422: { description: 'Invalid fields', schema: fieldErrors } },
    },
    handler: async (ctx) => {
      const { body } = readModelBody(ctx.rawBody, ctx.headers['content-type'], true);
      return { status: 200, body: await voices.update(team(ctx), ctx.params.id!, parseModelPatch(body)) };
    },
  });
  http.route({
    ...common, method: 'DELETE', path: '/model/{id}',
    doc: { summary: 'Delete the team\'s own voice (immediate)', tags, responses: { 200: { description: 'Deleted', schema: z.object({ _id: z.string(), deleted: z.literal(true) }) }, 404: { description: 'Missing, deleted, or another team\'s voice', schema: errorBody } } },
    handler: async (ctx) => {
      await voices.delete(team(ctx), ctx.params.id!);
      return { status: 200, body: { _id: ctx.params.id!, deleted: true } };
    },
  });
  http.route({
    ...common, method: 'GET', path: '/model/{id}/samples/{index}',
    doc: { summary: 'A stored sample as WAV (24 kHz mono 16-bit)', tags, responses: { 200: { description: 'audio/wav' }, 404: { description: 'No such voice or sample', schema: errorBody } } },
    handler: async (ctx) => {
      const wav = await voices.sampleWav(team(ctx), ctx.params.id!, ctx.params.index!);
      ctx.reply.send(200, wav, { 'Content-Type': 'audio/wav' });
    },
  });
  http.route({
    ...common, method: 'GET', path: '/model/{id}/cover',
    doc: { summary: 'The voice\'s cover image', tags, responses: { 200: { description: 'The image bytes' }, 404: { description: 'No such voice or no cover', schema: errorBody } } },
    handler: async (ctx) => {
      const c = await voices.cover(team(ctx), ctx.params.id!);
      ctx.reply.send(200, c.bytes, { 'Content-Type': c.type });
    },
  });
}
