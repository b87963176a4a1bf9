import { createHmac, timingSafeEqual } from 'node:crypto';

/** The header every signed post-call webhook carries (docs/api/webhooks.md "Signature"). */
export const SIGNATURE_HEADER = 'X-Service-Webhook-Signature';

/**
 * `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." ‖ raw body)>` (docs/api/webhooks.md).
 * Each attempt is signed again with its own `t`; the body bytes never change.
 */
export function signatureHeader(secret: string, body: string | Buffer, nowMs = Date.now()): string {
  const t = Math.floor(nowMs / 1000);
  const mac = createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');
  return `t=${t},v1=${mac}`;
}

/**
 * What a receiver does: parse the header (unknown elements such as a future `v2=` are
 * ignored), require `t` within `toleranceS` of now, and compare `v1` in constant time.
 */
export function verifySignature(secret: string, header: string, body: string | Buffer, opts: { nowMs?: number; toleranceS?: number } = {}): boolean {
  const parts = new Map<string, string[]>();
  for (const el of header.split(',')) {
    const i = el.indexOf('=');
    if (i <= 0) continue;
    const k = el.slice(0, i).trim();
    parts.set(k, [...(parts.get(k) ?? []), el.slice(i + 1).trim()]);
  }
  const t = Number(parts.get('t')?.[0]);
  if (!Number.isInteger(t)) return false;
  if (Math.abs((opts.nowMs ?? Date.now()) / 1000 - t) > (opts.toleranceS ?? 300)) return false;
  const expected = createHmac('sha256', secret).update(`${t}.`).update(body).digest();
  return (parts.get('v1') ?? []).some((v) => {
    const got = Buffer.from(v, 'hex');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}
