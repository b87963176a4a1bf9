import { Unpackr } from 'msgpackr';
import uws from 'uWebSockets.js';
import { ServiceError } from '../errors.ts';

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

/** Parses a JSON body; invalid JSON is the spec's 400 `Malformed JSON`. */
export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new ServiceError('malformed', 'Malformed JSON');
  }
}

/** Parses a MessagePack body (binary values arrive as Buffers). */
export function parseMsgpack(body: Buffer): unknown {
  try {
    return unpackr.unpack(body);
  } catch {
    throw new ServiceError('malformed', 'Malformed MessagePack');
  }
}

export interface Part {
  name: string;
  filename?: string;
  type?: string;
  data: Buffer;
}

/** Parses multipart/form-data with uWebSockets.js' own parser. */
export function parseMultipart(body: Buffer, contentType: string): Part[] {
  const parts = uws.getParts(body, contentType);
  if (!parts) throw new ServiceError('bad_request', 'Malformed multipart body');
  return parts.map((p) => ({ name: p.name, filename: p.filename, type: p.type, data: Buffer.from(p.data) }));
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
    const value = p.data.toString('utf8');
    const prev = fields[name];
    if (prev === undefined) fields[name] = p.name.endsWith('[]') ? [value] : value;
    else fields[name] = Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return { fields, files };
}
