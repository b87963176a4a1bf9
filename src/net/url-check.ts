/**
 * The static half of the SSRF guard: what a URL says, before any lookup. Used when a tool or
 * webhook URL is written (the caller turns a failure into a 422 field error) and again on
 * every request and redirect hop. The resolved address is checked later, at connect time
 * (`fetch.ts`), because a public name may resolve to a private address.
 */
import { isIPv4 } from 'node:net';
import { blockedHostName, classifyAddress, describeRange } from './address.ts';
import { outboundAllowVariable } from '../config.ts';

/**
 * `kind` on failure: `invalid` (unparsable, wrong scheme, credentials, no host) or `blocked`
 * (a destination the guard refuses). Callers that only need a field error read `reason`.
 */
export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string; kind: 'invalid' | 'blocked' };

export interface CheckOptions {
  /** `host:port` entries reachable even when private; defaults to `PARLEY_OUTBOUND_ALLOW`. */
  allow?: string[];
}

/**
 * Parse `PARLEY_OUTBOUND_ALLOW`: comma-separated `host:port` entries (`127.0.0.1:8080`,
 * `[::1]:9000`, `localhost:3000`). Off (empty) by default. Hosts are normalised the way the
 * URL parser normalises them, so `LOCALHOST:3000` matches `http://localhost:3000/`.
 * An entry without an explicit port is ignored: the list opens single endpoints, not hosts.
 */
export function parseAllowList(env: string | undefined = outboundAllowVariable()): string[] {
  if (!env) return [];
  const out: string[] = [];
  for (const raw of env.split(',')) {
    const entry = raw.trim();
    const m = /^(.+):(\d{1,5})$/.exec(entry);
    if (!m) continue;
    const port = Number(m[2]);
    if (port < 1 || port > 65535) continue;
    let host: string;
    try {
      host = new URL(`http://${m[1]}/`).hostname;
    } catch {
      continue;
    }
    out.push(`${host}:${port}`);
  }
  return out;
}

/** The `host:port` key of a URL as the allow-list spells it (explicit default port). */
export function endpointKey(url: URL): string {
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  return `${url.hostname}:${port}`;
}

/** Whether the URL's host and port match an allow-list entry exactly. */
export function isAllowListed(url: URL, allow: string[]): boolean {
  if (allow.length === 0) return false;
  const key = endpointKey(url);
  return allow.some((entry) => entry === key);
}

/**
 * Check a URL's scheme, credentials and host. IP literals in every spelling the WHATWG
 * parser accepts (decimal, octal, hex, short, percent-encoded, full-width digits, IPv6 with
 * an embedded IPv4) are normalised by the parser first, then classified by range.
 * The reason on failure is a sentence fit for a field error; it never echoes the URL.
 */
export function checkUrl(raw: string, opts: CheckOptions = {}): UrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'URL is not valid', kind: 'invalid' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { ok: false, reason: 'URL scheme must be http or https', kind: 'invalid' };
  }
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'URL must not contain credentials', kind: 'invalid' };
  }
  if (url.hostname === '') return { ok: false, reason: 'URL has no host', kind: 'invalid' };
  if (isAllowListed(url, opts.allow ?? parseAllowList())) return { ok: true, url };

  const host = url.hostname;
  if (host.startsWith('[') || isIPv4(host)) {
    const verdict = classifyAddress(host.replace(/^\[|\]$/g, ''));
    if (!verdict.allowed) return { ok: false, reason: `URL host is not a public address (${describeRange(verdict.range)})`, kind: 'blocked' };
    return { ok: true, url };
  }
  const blocked = blockedHostName(host);
  if (blocked) return { ok: false, reason: `URL host is not a public name (${blocked})`, kind: 'blocked' };
  return { ok: true, url };
}
