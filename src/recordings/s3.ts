/**
 * A minimal S3-compatible object client: PUT, GET and presigned GET URLs, signed with AWS
 * Signature Version 4 using node's crypto and fetch (no SDK). Path-style addressing
 * (`<endpoint>/<bucket>/<key>`), which every S3-compatible store (MinIO, R2, Ceph, S3 itself)
 * accepts. The payload of a PUT is hashed and signed (`x-amz-content-sha256`), so a body
 * altered in transit is refused by the store.
 */
import { createHash, createHmac } from 'node:crypto';

import type { S3Config } from '../config.ts';
// Configured with the rest of the configuration (src/config.ts).
export { s3ConfigFromEnv, type S3Config } from '../config.ts';

const sha256Hex = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();

/** RFC 3986 encoding as SigV4 wants it: everything but `A-Za-z0-9-_.~` (and `/` in paths). */
export function uriEncode(s: string, keepSlash = false): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-_.~]/.test(c) || (keepSlash && c === '/')) out += c;
    else out += '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

/** `20130524T000000Z` */
export function amzDate(d: Date): string {
  return d.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

export interface SigningInput {
  method: string;
  /** Absolute URL; its path must already be URI-encoded (as sent), its query raw. */
  url: URL;
  /** Headers to sign besides `host` (names any case). */
  headers: Record<string, string>;
  /** Hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`. */
  payloadHash: string;
  region: string;
  service?: string;
  accessKeyId: string;
  secretAccessKey: string;
  date: Date;
}

function signingKey(secret: string, day: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secret}`, day), region), service), 'aws4_request');
}

function canonicalQuery(params: [string, string][]): string {
  return params
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

/** The SigV4 signature parts of a request: the string to sign and its signature. */
export function signature(i: SigningInput, query: [string, string][]): { signedHeaders: string; signature: string; scope: string } {
  const service = i.service ?? 's3';
  const headers = new Map<string, string>([['host', i.url.host]]);
  for (const [k, v] of Object.entries(i.headers)) headers.set(k.toLowerCase(), v.trim().replace(/\s+/g, ' '));
  const names = [...headers.keys()].sort();
  const signedHeaders = names.join(';');
  const canonical = [
    i.method,
    i.url.pathname || '/',
    canonicalQuery(query),
    names.map((n) => `${n}:${headers.get(n)}\n`).join(''),
    signedHeaders,
    i.payloadHash,
  ].join('\n');
  const stamp = amzDate(i.date);
  const day = stamp.slice(0, 8);
  const scope = `${day}/${i.region}/${service}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', stamp, scope, sha256Hex(canonical)].join('\n');
  const sig = createHmac('sha256', signingKey(i.secretAccessKey, day, i.region, service)).update(toSign, 'utf8').digest('hex');
  return { signedHeaders, signature: sig, scope };
}

/** Headers for a header-signed request: `Authorization`, `x-amz-date`, `x-amz-content-sha256` and the given ones. */
export function signHeaders(i: SigningInput): Record<string, string> {
  const headers = { ...i.headers, 'x-amz-date': amzDate(i.date), 'x-amz-content-sha256': i.payloadHash };
  const s = signature({ ...i, headers }, [...i.url.searchParams]);
  return { ...headers, Authorization: `AWS4-HMAC-SHA256 Credential=${i.accessKeyId}/${s.scope}, SignedHeaders=${s.signedHeaders}, Signature=${s.signature}` };
}

/** A presigned URL (query-string auth, `host` signed, payload unsigned) valid for `expiresS` seconds. */
export function presignUrl(i: Omit<SigningInput, 'headers' | 'payloadHash'> & { expiresS: number; sessionToken?: string }): string {
  const service = i.service ?? 's3';
  const stamp = amzDate(i.date);
  const url = new URL(i.url.href);
  const params: [string, string][] = [
    ...url.searchParams,
    ['X-Amz-Algorithm', 'AWS4-HMAC-SHA256'],
    ['X-Amz-Credential', `${i.accessKeyId}/${stamp.slice(0, 8)}/${i.region}/${service}/aws4_request`],
    ['X-Amz-Date', stamp],
    ['X-Amz-Expires', String(i.expiresS)],
    ['X-Amz-SignedHeaders', 'host'],
  ];
  if (i.sessionToken) params.push(['X-Amz-Security-Token', i.sessionToken]);
  const s = signature({ ...i, url, headers: {}, payloadHash: 'UNSIGNED-PAYLOAD' }, params);
  url.search = `${canonicalQuery(params)}&X-Amz-Signature=${s.signature}`;
  return url.href;
}

export class S3Error extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

/** Objects of one bucket. */
export class S3Client {
  constructor(
    readonly config: S3Config,
    private readonly now: () => Date = () => new Date(),
  ) {}

  /** The object's URL (path style; the key's segments URI-encoded). */
  objectUrl(key: string): URL {
    const full = (this.config.prefix ?? '') + key;
    return new URL(`${this.config.endpoint}/${uriEncode(this.config.bucket)}/${uriEncode(full, true)}`);
  }

  private sign(method: string, url: URL, payloadHash: string, extra: Record<string, string> = {}): Record<string, string> {
    const headers = { ...extra, ...(this.config.sessionToken ? { 'x-amz-security-token': this.config.sessionToken } : {}) };
    return signHeaders({ method, url, headers, payloadHash, region: this.config.region, accessKeyId: this.config.accessKeyId, secretAccessKey: this.config.secretAccessKey, date: this.now() });
  }

  async put(key: string, body: Uint8Array, contentType: string, signal?: AbortSignal): Promise<void> {
    const url = this.objectUrl(key);
    const headers = this.sign('PUT', url, sha256Hex(body), { 'content-type': contentType });
    const res = await fetch(url, { method: 'PUT', headers, body: body as unknown as BodyInit, signal });
    await res.arrayBuffer().catch(() => undefined);
    if (!res.ok) throw new S3Error(`S3 PUT answered ${res.status}`, res.status);
  }

  /** The object's bytes; null when it does not exist. */
  async get(key: string, signal?: AbortSignal): Promise<Uint8Array | null> {
    const url = this.objectUrl(key);
    const res = await fetch(url, { method: 'GET', headers: this.sign('GET', url, sha256Hex('')), signal });
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (res.status === 404) return null;
    if (!res.ok) throw new S3Error(`S3 GET answered ${res.status}`, res.status);
    return bytes;
  }

  /** A URL anyone holding it can GET for `expiresS` seconds. */
  presignGet(key: string, expiresS: number): string {
    const c = this.config;
    return presignUrl({ method: 'GET', url: this.objectUrl(key), region: c.region, accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey, sessionToken: c.sessionToken, date: this.now(), expiresS });
  }
}
