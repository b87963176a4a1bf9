import { Unpackr } from 'msgpackr';
import uws from 'uWebSockets.js';
import { invalidField, ServiceError } from '../errors.ts';
import { MAX_BODY_DEPTH } from '../validation.ts';

/** Default per-route body limit for JSON endpoints. */
export const JSON_BODY_LIMIT = 1024 * 1024;

const unpackr = new Unpackr({ mapsAsObjects: true, int64AsType: 'number' });

/** The media type of a Content-Type header, lower-cased, without parameters. */
export function mediaType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

export function isJson(contentType: string | undefined): boolean {
  const m = mediaType(contentType);
  return m === 'application/json' || m.endsWith('+json');
}

export function isMsgpack(contentType: string | undefined): boolean {
  const m = mediaType(contentType);
  return m === 'application/msgpack' || m === 'application/x-msgpack' || m === 'application/vnd.msgpack';
}

/** The nesting bound is a validation rule (src/validation.ts), shared with the services' walks. */
export { MAX_BODY_DEPTH };

const NUL = /\u0000/;
/** In Unicode mode a surrogate pair is one code point, so only a lone surrogate matches. */
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * Refuses what no store or encoder can keep, before any handler sees it (docs/reliability.md):
 * nesting deeper than `MAX_BODY_DEPTH` → 400; a NUL character or a lone UTF-16 surrogate in
 * any string or key → 422 naming the field (`string_nul`, `string_surrogate`). PostgreSQL
 * text and jsonb cannot hold either. The walk is iterative, so it is safe on any depth.
 */
export function checkBodyValue(value: unknown, kind: 'JSON' | 'MessagePack' = 'JSON', where: 'body' = 'body'): void {
  const stack: { v: unknown; path: (string | number)[] }[] = [{ v: value, path: [] }];
  while (stack.length) {
    const { v, path } = stack.pop()!;
    if (typeof v === 'string') {
      checkText(v, [where, ...path]);
      continue;
    }
    if (!v || typeof v !== 'object' || v instanceof Uint8Array) continue;
    if (path.length >= MAX_BODY_DEPTH) throw new ServiceError('bad_request', `${kind} body nested deeper than ${MAX_BODY_DEPTH} levels`);
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push({ v: v[i], path: [...path, i] });
      continue;
    }
    for (const k of Object.keys(v)) {
      checkText(k, [where, ...path, k]);
      stack.push({ v: (v as Record<string, unknown>)[k], path: [...path, k] });
    }
  }
}

/** Throws the 422 for a string holding a NUL or a lone surrogate. */
export function checkText(s: string, loc: (string | number)[]): void {
  if (NUL.test(s)) throw invalidField(loc, 'NUL characters (\\u0000) are not allowed', 'string_nul');
  if (LONE_SURROGATE.test(s)) throw invalidField(loc, 'Lone UTF-16 surrogates are not allowed: the text is not valid Unicode', 'string_surrogate');
}

/** Parses a JSON body; invalid JSON is the spec's 400 `Malformed JSON`; see `checkBodyValue`. */
export function parseJson(body: Buffer): unknown {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new ServiceError('malformed', 'Malformed JSON');
  }
  checkBodyValue(value, 'JSON');
  return value;
}

/** Parses a MessagePack body (binary values arrive as Buffers); see `checkBodyValue`. */
export function parseMsgpack(body: Buffer): unknown {
  let value: unknown;
  try {
    value = unpackr.unpack(body);
  } catch (err) {
    // msgpackr recurses: very deep nesting overflows its stack before our walk can measure it.
    if (err instanceof RangeError) throw new ServiceError('bad_request', `MessagePack body nested deeper than ${MAX_BODY_DEPTH} levels`);
    throw new ServiceError('malformed', 'Malformed MessagePack');
  }
  checkBodyValue(value, 'MessagePack');
  return value;
}

export interface Part {
  name: string;
  filename?: string;
  type?: string;
  data: Buffer;
}

/**
 * Parses multipart/form-data with uWebSockets.js' own parser. Every part must have a name
 * (`Content-Disposition: form-data; name="…"`), and names and file names must be text a
 * store can keep (no NUL): 400 otherwise. Field values are checked by `partText`.
 */
export function parseMultipart(body: Buffer, contentType: string): Part[] {
  const parts = uws.getParts(body, contentType);
  if (!parts) throw new ServiceError('bad_request', 'Malformed multipart body');
  return parts.map((p, i) => {
    if (typeof p.name !== 'string' || p.name === '') throw new ServiceError('bad_request', `Multipart part ${i + 1} is without a name: send Content-Disposition: form-data; name="…"`);
    if (NUL.test(p.name) || (p.filename !== undefined && NUL.test(p.filename))) throw new ServiceError('bad_request', `Multipart part ${i + 1} has a NUL character in its name or file name`);
    return { name: p.name, filename: p.filename, type: p.type, data: Buffer.from(p.data) };
  });
}

/** A text part's value as UTF-8; a NUL in it → 422 naming the field. */
export function partText(p: Part): string {
  const value = p.data.toString('utf8');
  if (NUL.test(value)) throw invalidField(['body', p.name], 'NUL characters (\\u0000) are not allowed', 'string_nul');
  return value;
}

/** A multipart form: text fields and files by name. */
export interface Form {
  fields: Record<string, string | string[]>;
  files: Record<string, Part[]>;
}

/** Form fields of a multipart body: repeated names (and `name[]`) collect into arrays. */
export function formFields(parts: Part[]): Form {
  const fields: Record<string, string | string[]> = {};
  const files: Record<string, Part[]> = {};
  for (const p of parts) {
    const name = p.name.endsWith('[]') ? p.name.slice(0, -2) : p.name;
    if (p.filename !== undefined) {
      (files[name] ??= []).push(p);
      continue;
    }
    const value = partText(p);
    const prev = fields[name];
    if (prev === undefined) fields[name] = p.name.endsWith('[]') ? [value] : value;
    else fields[name] = Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return { fields, files };
}
