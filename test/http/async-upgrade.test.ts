// WebSocket upgrades completed after an await (authenticate, take a slot, then `acceptUpgrade`)
// while uWebSockets.js is parsing ANOTHER connection's HTTP request (docs/reliability.md "Async
// WebSocket upgrades"). uWS v20.30 keeps one "parsing HTTP" flag for the whole app: an upgrade
// made then (here: resumed in the microtasks that run at the end of another request's
// handler) is taken for that other connection's upgrade, and the process aborts ("Cork buffer
// must not be held across event loop iterations!"). Real TCP clients against a bare HttpApp.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { acceptUpgrade, HttpApp, readHandshake, readQuery } from '../../src/http/app.ts';
import { createLogger } from '../../src/log.ts';
import { Metrics } from '../../src/telemetry/metrics.ts';

const http = new HttpApp({ log: createLogger({ level: 'silent' }), metrics: new Metrics(), authenticate: async () => ({ teamId: 'team_1', keyId: 'key_1', betaAccess: false }) });

// A slot queue, as a concurrency cap would be: upgrades wait here until an HTTP request frees slots.
let waiting: (() => void)[] = [];
let abandoned = 0;
http.route({
  method: 'POST', path: '/free', auth: 'none',
  handler: () => {
    const n = waiting.length;
    for (const w of waiting.splice(0)) w();
    return { status: 200, body: { freed: n } };
  },
});
http.route({
  method: 'GET', path: '/wait', auth: 'none',
  handler: async (ctx) => {
    await new Promise<void>((resolve) => waiting.push(resolve));
    return { status: 200, body: { client: ctx.query.get('client') } };
  },
});
http.route({ method: 'GET', path: '/ping', auth: 'none', handler: () => ({ status: 200, body: { pong: true } }) });

interface UserData { client: string }
http.ws<UserData>('/slot', {
  upgrade: (res, req, context) => {
    let aborted = false;
    res.onAborted(() => (aborted = true));
    const client = new URLSearchParams(readQuery(req)).get('client') ?? '';
    const hs = readHandshake(req);
    (async () => {
      await new Promise<void>((resolve) => waiting.push(resolve));
      // No `if (aborted) return` here (the platform's routes have one): acceptUpgrade's own
      // check runs, as it does when the client leaves between this call and the upgrade.
      acceptUpgrade<UserData>(res, hs, { client }, context, { aborted: () => aborted, abandoned: () => abandoned++ });
    })();
  },
  open: (ws) => void ws.send(`hello ${ws.getUserData().client}`, false),
  message: (ws) => void ws.send(`echo ${ws.getUserData().client}`, false),
});
// The same without telling acceptUpgrade about the abort (a route that forgot it).
http.ws<UserData>('/slot-unflagged', {
  upgrade: (res, req, context) => {
    res.onAborted(() => {});
    const hs = readHandshake(req);
    (async () => {
      await new Promise<void>((resolve) => waiting.push(resolve));
      acceptUpgrade<UserData>(res, hs, { client: 'unflagged' }, context, { abandoned: () => abandoned++ });
    })();
  },
  open: (ws) => void ws.send(`hello ${ws.getUserData().client}`, false),
  message: (ws) => void ws.send(`echo ${ws.getUserData().client}`, false),
});
const port = await http.listen('127.0.0.1', 0);
t.teardown(() => http.close());

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const open = () => new Promise<Socket>((resolve, reject) => {
  const s = connect(port, '127.0.0.1', () => resolve(s));
  s.once('error', reject);
});
/** A raw connection that records every byte it receives and whether it closed. */
async function raw() {
  const s = await open();
  const c = { s, text: '', closed: false };
  s.setEncoding('latin1');
  s.on('data', (d: string) => (c.text += d));
  s.on('close', () => (c.closed = true));
  s.on('error', () => {});
  return c;
}
const until = async (what: string, ok: () => boolean) => {
  for (let i = 0; i < 400 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!ok()) throw new Error(`timed out waiting for ${what}`);
};
/** A masked client text frame (clients must mask). */
const frame = (text: string) => {
  const mask = randomBytes(4);
  const body = Buffer.from(text);
  for (let i = 0; i < body.length; i++) body[i]! ^= mask[i % 4]!;
  return Buffer.concat([Buffer.from([0x81, 0x80 | body.length]), mask, body]);
};

t.test('upgrades freed by other connections\' (pipelined) requests each get their own socket', async (t) => {
  const N = 24;
  for (let round = 0; round < 3; round++) {
    const clients = await Promise.all(Array.from({ length: N }, async (_, i) => {
      const c = await raw();
      const key = randomBytes(16).toString('base64');
      const id = `r${round}c${i}`;
      c.s.write(`GET /slot?client=${id} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
      return { ...c, id, accept: createHash('sha1').update(key + GUID).digest('base64'), get text() { return c.text; }, get closed() { return c.closed; } };
    }));
    await until('every upgrade to wait for a slot', () => waiting.length === N);
    // Three other connections free the slots, each with pipelined requests (several parsed in
    // one read): the waiting upgrades resume inside the first /free handler's microtasks.
    const others = await Promise.all([raw(), raw(), raw()]);
    const req = (m: string, p: string) => `${m} ${p} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`;
    for (const o of others) o.s.write(req('POST', '/free') + req('GET', '/ping') + req('POST', '/free') + req('GET', '/ping'));
    await until('the pipelined answers', () => others.every((o) => (o.text.match(/HTTP\/1\.1 200/g) ?? []).length === 4));
    for (const o of others) {
      t.equal((o.text.match(/"pong":true/g) ?? []).length, 2, 'each pipelined connection got both pings answered');
      o.s.destroy();
    }
    await until('every client greeted', () => clients.every((c) => c.text.includes('hello ')));
    for (const c of clients) c.s.write(frame('hi'));
    await until('every echo', () => clients.every((c) => c.text.includes('echo ')));
    for (const c of clients) {
      const head = c.text.slice(0, c.text.indexOf('\r\n\r\n'));
      t.match(head, /^HTTP\/1\.1 101 /, `${c.id}: 101`);
      t.match(head, new RegExp(`\\r\\nSec-WebSocket-Accept: ${c.accept.replace(/[+/]/g, '\\$&')}(\\r|$)`, 'i'), `${c.id}: its own Sec-WebSocket-Accept`);
      const said = [...c.text.matchAll(/(hello|echo) (r\d+c\d+)/g)].map((m) => m[2]);
      t.same(said, [c.id, c.id], `${c.id}: greeted and echoed with its own user data`);
      t.notOk(c.closed, `${c.id}: still open`);
      c.s.destroy();
    }
  }
  t.equal(abandoned, 0);
});

for (const path of ['/slot', '/slot-unflagged']) t.test(`${path}: a client that leaves while its upgrade waits is abandoned, not upgraded`, async (t) => {
  const before = abandoned;
  const c = await raw();
  c.s.write(`GET ${path}?client=gone HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  await until('the upgrade to wait', () => waiting.length === 1);
  // The client goes, then the slot frees: the deferred upgrade finds the response aborted.
  c.s.destroy();
  await until('the server to see the close', () => c.closed);
  await new Promise((r) => setTimeout(r, 50));
  const o = await raw();
  o.s.write('POST /free HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n');
  await until('the answer', () => o.text.includes('"freed":1'));
  await until('the abandoned upgrade', () => abandoned === before + 1);
  t.equal(abandoned, before + 1, 'abandoned once');
  // The server is still answering (an upgrade of an aborted response would have thrown).
  o.s.write('GET /ping HTTP/1.1\r\nHost: x\r\n\r\n');
  await until('the ping', () => o.text.includes('"pong":true'));
  o.s.destroy();
});

t.test('HTTP answers resumed inside another connection\'s request each reach their own client', async (t) => {
  // Not affected in v20.30 (a corked write of another response while one is being parsed is
  // written uncorked); held here so that a change of uWS or of Reply cannot break it unseen.
  const N = 24;
  const clients = await Promise.all(Array.from({ length: N }, async (_, i) => {
    const c = await raw();
    c.s.write(`GET /wait?client=h${i} HTTP/1.1\r\nHost: x\r\n\r\n`);
    return { c, id: `h${i}` };
  }));
  await until('every request to wait', () => waiting.length === N);
  const o = await raw();
  o.s.write('POST /free HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nGET /ping HTTP/1.1\r\nHost: x\r\n\r\n');
  await until('the pipelined answers', () => o.text.includes('"pong":true'));
  t.match(o.text, `"freed":${N}`);
  await until('every answer', () => clients.every(({ c }) => c.text.includes('"client"')));
  for (const { c, id } of clients) {
    t.match(c.text, /^HTTP\/1\.1 200 /, `${id}: 200`);
    t.same([...c.text.matchAll(/"client":"(h\d+)"/g)].map((m) => m[1]), [id], `${id}: its own answer`);
    c.s.destroy();
  }
  o.s.destroy();
});
