import { createHmac } from 'node:crypto';
import t from 'tap';
import { signatureHeader, verifySignature } from '../../src/webhooks/index.ts';

const body = '{"event":"call.ended","session":{"id":"sess_1","metadata":{"b":1,"a":"ü"}}}';
const now = Date.UTC(2026, 10, 25, 12, 0, 0, 750);

t.test('the header is t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>', async (t) => {
  const h = signatureHeader('whsec', body, now);
  const t0 = Math.floor(now / 1000);
  t.equal(h, `t=${t0},v1=${createHmac('sha256', 'whsec').update(`${t0}.${body}`).digest('hex')}`);
});

t.test('a receiver verifies within ±300 s, in constant time, ignoring unknown elements', async (t) => {
  const h = signatureHeader('whsec', body, now);
  t.ok(verifySignature('whsec', h, body, { nowMs: now }));
  t.ok(verifySignature('whsec', `${h},v2=abc`, Buffer.from(body), { nowMs: now + 299_000 }), 'v2 ignored; Buffer body');
  t.notOk(verifySignature('whsec', h, body, { nowMs: now + 301_000 }), 'too old');
  t.notOk(verifySignature('other', h, body, { nowMs: now }), 'wrong secret');
  t.notOk(verifySignature('whsec', h, body.replace('ü', 'u'), { nowMs: now }), 'tampered body');
  t.notOk(verifySignature('whsec', 'v1=00', body, { nowMs: now }), 'no t');
});
