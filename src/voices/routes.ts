import { ServiceError } from '../errors.ts';
import { isJson, isMsgpack, mediaType, parseJson, parseMsgpack, parseMultipart, partText } from '../http/body.ts';
import { z } from 'zod';
import type { HttpApp } from '../http/app.ts';
import type { Ctx } from '../http/router.ts';
import { SPEECH_AUTH_MESSAGES } from '../speech/asr-routes.ts';
import { modelEntity, modelListBody, modelListQuery, modelListQueryDoc, parseModelCreate, parseModelPatch, VOICE_BODY_LIMIT, type ModelListQuery, type VoiceService } from './service.ts';
import { parse } from '../validation.ts';
import { errorBody } from '../http/openapi.ts';

const fieldErrors = z.array(z.object({ type: z.string(), loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), ctx: z.record(z.string(), z.unknown()) }));
const team = (ctx: Ctx) => ctx.principal!.teamId;
const notFound = { description: 'Missing, deleted, or another team\'s private voice', schema: errorBody };
const tags = ['Voice models'];
const common = { auth: 'required' as const, authMessages: SPEECH_AUTH_MESSAGES };

/** /model and /model/{id} (docs/api/voices.md), plus the sample and cover paths the entity points to. */
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
    handler: async (ctx) => ({ status: 200, body: await voices.list(team(ctx), readModelListQuery(ctx.query)) }),
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

// ---------------------------------------------------------------------------------------
// Request bodies: the wire forms a `/model` body comes in, read here, once

type Body = Record<string, unknown>;
type Kind = 'multipart' | 'json' | 'msgpack' | 'form';
const FILE_FIELDS = new Set(['voices', 'cover_image']);

/**
 * Reads a `/model` body into a plain object. Multipart: repeated fields become arrays and
 * the file fields (`voices`, `cover_image`) stay bytes whether or not a part names a file.
 * Missing body (PATCH): `{}`.
 */
export function readModelBody(raw: Buffer | undefined, contentType: string | undefined, optional: boolean): { body: Body; kind: Kind } {
  const type = mediaType(contentType);
  if (!raw || raw.length === 0) {
    if (optional) return { body: {}, kind: 'json' };
    throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
  }
  let body: Body;
  let kind: Kind;
  if (type === 'multipart/form-data') {
    kind = 'multipart';
    body = {};
    for (const p of parseMultipart(raw, contentType!)) {
      const name = p.name.replace(/\[\d*\]$/, '');
      const value = FILE_FIELDS.has(name) ? new Uint8Array(p.data) : partText(p);
      append(body, name, value);
    }
  } else if (type === 'application/x-www-form-urlencoded') {
    kind = 'form';
    body = {};
    for (const [k, v] of new URLSearchParams(raw.toString('utf8'))) append(body, k.replace(/\[\d*\]$/, ''), v);
  } else if (isJson(contentType) || isMsgpack(contentType)) {
    kind = isJson(contentType) ? 'json' : 'msgpack';
    const v = kind === 'json' ? parseJson(raw) : parseMsgpack(raw);
    if (!v || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) throw new ServiceError('bad_request', 'The body must be an object');
    body = { ...(v as Body) };
  } else {
    throw new ServiceError('unsupported_media_type', 'Unsupported Media Type');
  }
  for (const [k, v] of Object.entries(body)) if (v === null || v === undefined) delete body[k];
  // Files given as text (JSON, urlencoded, or a MessagePack str) are standard base64.
  for (const name of FILE_FIELDS) {
    const v = body[name];
    if (typeof v === 'string') body[name] = base64(v, [name]);
    else if (Array.isArray(v)) body[name] = v.map((x, i) => (typeof x === 'string' ? base64(x, [name, i]) : x));
  }
  return { body, kind };
}

function append(body: Body, name: string, value: unknown): void {
  const prev = body[name];
  if (prev === undefined) body[name] = value;
  else body[name] = Array.isArray(prev) ? [...prev, value] : [prev, value];
}

function base64(s: string, loc: (string | number)[]): Uint8Array {
  if (!/^[A-Za-z0-9+/\s]*={0,2}\s*$/.test(s)) {
    throw new ServiceError('invalid', 'Expected standard base64', { fields: [{ type: 'base64', loc: ['body', ...loc], msg: 'Expected a file, or standard base64 in JSON and urlencoded bodies', ctx: {} }] });
  }
  return new Uint8Array(Buffer.from(s, 'base64'));
}

const ARRAY_PARAMS = new Set(['tag', 'language', 'title_language']);

/** The `/model` list query: `tag`, `language`, `title_language` repeat (also as `name[]`); other keys take their first value. */
function readModelListQuery(query: URLSearchParams): ModelListQuery {
  const raw: Record<string, unknown> = {};
  for (const [k0, v] of query) {
    const k = k0.replace(/\[\d*\]$/, '');
    if (ARRAY_PARAMS.has(k)) ((raw[k] ??= []) as string[]).push(v);
    else if (!(k in raw)) raw[k] = v;
  }
  return parse(modelListQuery, raw, 'query');
}
