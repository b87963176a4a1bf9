/**
 * Property-based fuzzing of the HTTP API from its own `/openapi.json` (docs/reliability.md).
 * Requests are generated with fast-check from a fixed seed: bodies from each operation's
 * schema with wrong types, nulls, huge strings, deep nesting, out-of-range numbers, lone
 * surrogates, prototype keys and unknown fields; truncated JSON and MessagePack; broken
 * multipart; wrong content types; bad percent-encoding in paths and queries.
 *
 * The property: never a 5xx, never a hang, the process alive, and the stored state
 * unchanged by a refused (4xx) write. Used by test/reliability/fuzz.test.ts (bounded) and
 * bench/fuzz.ts (long runs).
 */
import fc from 'fast-check';
import { pack } from 'msgpackr';
import type { Sql } from 'postgres';

type Schema = Record<string, any>;
interface Operation {
  method: string;
  path: string;
  query: { name: string; schema: Schema }[];
  bodyTypes: string[];
  bodySchema?: Schema;
}

export interface FuzzRequest {
  method: string;
  template: string;
  url: string;
  headers: Record<string, string>;
  body?: Uint8Array;
  variant: string;
}

export interface FuzzOutcome {
  requests: number;
  statuses: Record<string, number>;
  /** Requests answered 5xx, hung past the timeout, or whose write changed stored state while refused. */
  failures: { kind: '5xx' | 'hang' | 'state_changed' | 'crash'; method: string; template: string; variant: string; status?: number; detail?: string }[];
  /** Connections closed without an answer (counted, not failures: e.g. an early 413 while the client still writes). */
  connectionErrors: number;
}

/** Operations of an OpenAPI document. */
export function operations(doc: { paths: Record<string, Record<string, any>> }): Operation[] {
  const out: Operation[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const content = op.requestBody?.content ?? {};
      const bodyTypes = Object.keys(content);
      out.push({
        method: method.toUpperCase(),
        path,
        query: (op.parameters ?? []).filter((p: any) => p.in === 'query').map((p: any) => ({ name: p.name, schema: p.schema ?? {} })),
        bodyTypes,
        bodySchema: bodyTypes.length ? content[bodyTypes[0]!]?.schema : undefined,
      });
    }
  }
  return out;
}

const deepArray = (n: number): unknown => JSON.parse('['.repeat(n) + ']'.repeat(n));
const deepObject = (n: number): unknown => JSON.parse('{"a":'.repeat(n) + '1' + '}'.repeat(n));

/** Values no schema should accept, and values that stress what accepts them. */
const evilValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, '', 'x'.repeat(100_000), '\ud800', 'a\udc00b', 'a\u0000b', -1, 0, 1e308, -1e308, 2 ** 53 + 1, 1.5, true, false, [], {}, '1', 'true', 'null'),
  fc.constant(null).map(() => JSON.parse('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}')),
  fc.integer({ min: 20, max: 200 }).map(deepArray),
  fc.integer({ min: 20, max: 200 }).map(deepObject),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

/** A value for `schema`: usually close to valid (so requests reach deep), sometimes evil. */
function fromSchema(schema: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 6) return evilValue;
  const near = nearValid(schema, depth);
  return fc.oneof({ arbitrary: near, weight: 4 }, { arbitrary: evilValue, weight: 1 });
}

function nearValid(schema: Schema, depth: number): fc.Arbitrary<unknown> {
  const alts = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(alts) && alts.length) return fc.oneof(...alts.map((s: Schema) => fromSchema(s, depth + 1)));
  if (Array.isArray(schema.enum) && schema.enum.length) return fc.oneof(fc.constantFrom(...schema.enum), fc.string({ maxLength: 8 }));
  if (schema.const !== undefined) return fc.constant(schema.const);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'string':
      return fc.oneof(
        fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 24, 24) }),
        fc.string({ unit: 'grapheme', maxLength: 12 }),
        fc.constant('x'.repeat((schema.maxLength ?? 1000) + 1)),
      );
    case 'integer':
    case 'number': {
      const min = schema.minimum ?? schema.exclusiveMinimum ?? -1e6;
      const max = schema.maximum ?? schema.exclusiveMaximum ?? 1e6;
      return fc.oneof(fc.integer({ min: Math.ceil(Math.max(min, -1e9)), max: Math.floor(Math.min(max, 1e9)) }), fc.constantFrom(min - 1, max + 1, 0.5, -0));
    }
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(fromSchema(schema.items, depth + 1), { maxLength: 3 });
    case 'object': {
      const props: Record<string, Schema> = schema.properties ?? {};
      const required: string[] = schema.required ?? [];
      const keys = Object.keys(props);
      const record = fc.record(Object.fromEntries(keys.map((k) => [k, fromSchema(props[k], depth + 1)])), { requiredKeys: required.filter((k) => k in props) });
      return fc.tuple(record, fc.option(fc.tuple(fc.constantFrom('__proto__', 'constructor', 'prototype', 'unknown_field', 'a\u0000', '\ud800'), evilValue), { freq: 4 })).map(([r, extra]) => {
        if (!extra) return r;
        const out: Record<string, unknown> = JSON.parse(JSON.stringify(r));
        Object.defineProperty(out, extra[0], { value: extra[1], enumerable: true, writable: true, configurable: true });
        return out;
      });
    }
    default:
      return fc.oneof(evilValue, fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }));
  }
}

/** Path parameter values: real ids (of the fuzzing team or another one) or broken ones. */
function pathValue(ids: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: ids.length ? fc.constantFrom(...ids).map(encodeURIComponent) : fc.constant('x'), weight: 4 },
    { arbitrary: fc.constantFrom('%', '%zz', '%ED%A0%80', '%00', 'a%00b', '..%2F..%2Fetc', '%2F', '%C0%AF', 'x'.repeat(5000), '0', '-1', '1e308', 'null', '__proto__', 'constructor'), weight: 2 },
    { arbitrary: fc.string({ maxLength: 20 }).map(encodeURIComponent), weight: 1 },
  );
}

const queryValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('%', '%zz', '%00', '%ED%A0%80', '-1', '0', '1e308', '99999999999999999999', 'true', '', 'x'.repeat(10_000), '2026-13-45T99:99:99Z', 'a,b,,c'),
  fc.string({ maxLength: 12 }).map(encodeURIComponent),
);

function multipart(fields: [string | null, string | Uint8Array, string | null][], boundary: string, broken: number): Uint8Array {
  const chunks: Buffer[] = [];
  for (const [name, value, filename] of fields) {
    let disp = 'Content-Disposition: form-data';
    if (name !== null) disp += `; name="${name}"`;
    if (filename !== null) disp += `; filename="${filename}"`;
    chunks.push(Buffer.from(`--${boundary}\r\n${disp}\r\n${filename !== null ? 'Content-Type: application/octet-stream\r\n' : ''}\r\n`), Buffer.from(value), Buffer.from('\r\n'));
  }
  if (broken !== 1) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  const all = Buffer.concat(chunks);
  return broken === 2 ? all.subarray(0, Math.floor(all.length / 2)) : all;
}

/** A WAV header that claims `claimed` data bytes, followed by `actual` bytes of noise. */
export function lyingWav(claimed: number, actual: number, rate = 16_000, channels = 1, bits = 16): Uint8Array {
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE((36 + claimed) >>> 0, 4);
  h.write('WAVEfmt ', 8);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(channels, 22);
  h.writeUInt32LE(rate >>> 0, 24);
  h.writeUInt32LE((rate * channels * (bits / 8)) >>> 0, 28);
  h.writeUInt16LE(((channels * bits) / 8) & 0xffff, 32);
  h.writeUInt16LE(bits, 34);
  h.write('data', 36);
  h.writeUInt32LE(claimed >>> 0, 40);
  return Buffer.concat([h, Buffer.alloc(actual, 0x11)]);
}

/** Audio a decoder must refuse cleanly: random, empty, truncated, or with a lying WAV header. */
export const audioArbitrary: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.uint8Array({ maxLength: 2048 }),
  fc.constant(new Uint8Array(0)),
  fc.tuple(fc.constantFrom(0, 1, 0xffffffff, 1_000_000), fc.integer({ min: 0, max: 4000 }), fc.constantFrom(0, 1, 8000, 16_000, 0xffffffff), fc.constantFrom(0, 1, 2, 65535), fc.constantFrom(0, 8, 16, 24, 7)).map(([c, a, r, ch, b]) => lyingWav(c, a, r, ch, b)),
  fc.tuple(fc.integer({ min: 0, max: 43 })).map(([n]) => lyingWav(100, 100).subarray(0, n)),
  fc.constant(Buffer.concat([Buffer.from('ID3'), Buffer.alloc(64, 0xff)])),
  fc.constant(Buffer.concat([Buffer.from('OggS'), Buffer.alloc(64, 0)])),
);

function bodyFor(op: Operation): fc.Arbitrary<{ type?: string; body?: Uint8Array; variant: string }> {
  const enc = (v: unknown) => new Uint8Array(Buffer.from(JSON.stringify(v) ?? 'null'));
  const value = fromSchema(op.bodySchema ?? { type: 'object', properties: {} });
  const json = value.map((v) => ({ type: 'application/json', body: enc(v), variant: 'json' }));
  const truncated = fc.tuple(value, fc.double({ min: 0, max: 1, noNaN: true })).map(([v, f]) => {
    const b = enc(v);
    return { type: 'application/json', body: b.subarray(0, Math.floor(b.length * f)), variant: 'json-truncated' };
  });
  const msgpack = fc.tuple(value, fc.boolean(), fc.double({ min: 0, max: 1, noNaN: true })).map(([v, cut, f]) => {
    let b = new Uint8Array(pack(v));
    if (cut) b = b.subarray(0, Math.floor(b.length * f));
    return { type: 'application/msgpack', body: b, variant: cut ? 'msgpack-truncated' : 'msgpack' };
  });
  const wrongType = fc.tuple(fc.constantFrom('text/plain', 'application/xml', 'multipart/form-data', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', ''), value).map(([type, v]) => ({ type: type || undefined, body: enc(v), variant: 'wrong-content-type' }));
  const fieldName = fc.oneof(fc.constantFrom('audio', 'file', 'name', 'type', 'text', 'title', 'voices', 'model', 'model_id', 'language', 'prompt', 'url', 'visibility', 'description', 'response_format', 'texts'), fc.string({ maxLength: 10 }));
  const part = fc.tuple(fc.option(fieldName, { freq: 8 }), fc.oneof(fc.string({ maxLength: 30 }), audioArbitrary), fc.option(fc.constantFrom('a.wav', 'a.mp3', 'a\u0000.wav', '../../x', 'x'.repeat(300)), { freq: 2 })) as fc.Arbitrary<[string | null, string | Uint8Array, string | null]>;
  const form = fc.tuple(fc.array(part, { minLength: 0, maxLength: 5 }), fc.constantFrom('B0undary', 'x'), fc.integer({ min: 0, max: 3 }), fc.boolean()).map(([parts, boundary, broken, lie]) => ({
    type: `multipart/form-data; boundary=${lie ? 'other' : boundary}`,
    body: multipart(parts, boundary, broken),
    variant: broken ? 'multipart-broken' : 'multipart',
  }));
  const junk = fc.uint8Array({ maxLength: 512 }).map((b) => ({ type: 'application/json', body: b, variant: 'random-bytes' }));
  const none = fc.constant({ variant: 'no-body' });
  const arbs: fc.Arbitrary<{ type?: string; body?: Uint8Array; variant: string }>[] = [json, truncated, msgpack, wrongType, form, junk, none];
  return fc.oneof(...arbs);
}

/** Headers the platform reads, with values a client may send (long, Latin-1 bytes, empty, garbage). */
const extraHeaders: fc.Arbitrary<Record<string, string>> = fc.dictionary(
  fc.constantFrom('Idempotency-Key', 'model', 'X-Request-Id', 'traceparent', 'Origin', 'Accept', 'xi-api-key', 'X-Service-Speed', 'Accept-Language'),
  fc.oneof(fc.constantFrom('', 'x'.repeat(8000), '\u00ff\u00fe\u0080', '00-zz-zz-01', 'null', 'text/html', '*/*', 'https://evil.example.com', '{"a":1}', '-1'), fc.string({ maxLength: 16 }).map((v) => v.replace(/[^\x20-\x7e]/g, ''))),
  { maxKeys: 2 },
);

/** A fuzzed request for one of `ops`; `ids` are path parameter values that exist. */
export function requestArbitrary(ops: Operation[], ids: string[], auth: Record<string, string>): fc.Arbitrary<FuzzRequest> {
  return fc.constantFrom(...ops).chain((op) => {
    const params = op.path.match(/\{[^}]+\}/g) ?? [];
    const body = op.method === 'GET' || op.method === 'DELETE' ? fc.constant({ variant: 'no-body' } as { type?: string; body?: Uint8Array; variant: string }) : bodyFor(op);
    const query = fc.array(fc.tuple(fc.oneof(fc.constantFrom(...(op.query.length ? op.query.map((q) => q.name) : ['x'])), fc.constantFrom('unknown', '%zz', '__proto__')), queryValue), { maxLength: 3 });
    const authHeader = fc.oneof({ arbitrary: fc.constant(auth), weight: 9 }, { arbitrary: fc.constantFrom<Record<string, string>>({}, { Authorization: 'Bearer nope' }, { Authorization: 'Basic x' }), weight: 1 });
    return fc.tuple(fc.tuple(...params.map(() => pathValue(ids))), body, query, authHeader, extraHeaders).map(([values, b, q, a, x]) => {
      let path = op.path;
      values.forEach((v) => (path = path.replace(/\{[^}]+\}/, v)));
      const qs = q.map(([k, v]) => `${k}=${v}`).join('&');
      const headers: Record<string, string> = { ...x, ...a };
      if (b.type) headers['Content-Type'] = b.type;
      return { method: op.method, template: op.path, url: path + (qs ? `?${qs}` : ''), headers, body: b.body, variant: b.variant };
    });
  });
}

/**
 * A fingerprint of every table of the store's schema: equal before and after a refused
 * write, or the refusal changed state. Tables that record attempts by design are left out.
 */
export async function stateFingerprint(sql: Sql, skip: string[] = []): Promise<string> {
  const tables = await sql<{ t: string }[]>`select table_name as t from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE' order by 1`;
  const names = tables.map((r) => r.t).filter((t) => !skip.includes(t));
  if (!names.length) return '';
  const q = names.map((t) => `select '${t}' as t, md5(coalesce(string_agg(x::text, ',' order by x::text), '')) as h from "${t}" x`).join(' union all ');
  const rows = await sql.unsafe<{ t: string; h: string }[]>(q);
  return rows.map((r) => `${r.t}:${r.h}`).join('\n');
}

export interface RunOptions {
  baseUrl: string;
  doc: { paths: Record<string, Record<string, any>> };
  ids: string[];
  auth: Record<string, string>;
  seed: number;
  count: number;
  timeoutMs?: number;
  concurrency?: number;
  /** Check that a refused write left the store unchanged (sequential runs only). */
  fingerprint?: () => Promise<string>;
  /** Skip operations (method + ' ' + path) that cannot be fuzzed here. */
  skip?: (op: Operation) => boolean;
  alive?: () => Promise<boolean>;
}

/** Sends `count` fuzzed requests; returns what happened. */
export async function runFuzz(o: RunOptions): Promise<FuzzOutcome> {
  const ops = operations(o.doc).filter((op) => !o.skip?.(op));
  const reqs = fc.sample(requestArbitrary(ops, o.ids, o.auth), { seed: o.seed, numRuns: o.count });
  const out: FuzzOutcome = { requests: 0, statuses: {}, failures: [], connectionErrors: 0 };
  const timeoutMs = o.timeoutMs ?? 15_000;
  let next = 0;
  const worker = async () => {
    while (next < reqs.length) {
      const r = reqs[next++]!;
      const write = r.method !== 'GET';
      const before = write && o.fingerprint ? await o.fingerprint() : undefined;
      let status: number | undefined;
      try {
        const res = await fetch(o.baseUrl + r.url, { method: r.method, headers: r.headers, body: r.body as BodyInit | undefined, signal: AbortSignal.timeout(timeoutMs) });
        await res.arrayBuffer();
        status = res.status;
      } catch (err) {
        const name = (err as Error).name;
        if (name === 'TimeoutError' || name === 'AbortError') out.failures.push({ kind: 'hang', method: r.method, template: r.template, variant: r.variant });
        else out.connectionErrors++;
      }
      out.requests++;
      if (status !== undefined) {
        const k = String(status);
        out.statuses[k] = (out.statuses[k] ?? 0) + 1;
        if (status >= 500 && status !== 503) out.failures.push({ kind: '5xx', method: r.method, template: r.template, variant: r.variant, status, detail: r.url.slice(0, 200) });
        if (before !== undefined && status >= 400 && status < 500) {
          const after = await o.fingerprint!();
          if (after !== before) out.failures.push({ kind: 'state_changed', method: r.method, template: r.template, variant: r.variant, status, detail: diffLines(before, after) });
        }
      }
      if (o.alive && out.requests % 100 === 0 && !(await o.alive())) {
        out.failures.push({ kind: 'crash', method: r.method, template: r.template, variant: r.variant });
        return;
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency ?? 1 }, worker));
  return out;
}

function diffLines(a: string, b: string): string {
  const x = new Set(a.split('\n'));
  return b
    .split('\n')
    .filter((l) => !x.has(l))
    .map((l) => l.split(':')[0])
    .join(',');
}
