import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { OutboundError, outboundFetch, type Resolver } from '../../src/net/index.ts';
import { ServiceError } from '../../src/errors.ts';

interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
  body: Buffer;
}

/** A real HTTP server on 127.0.0.1:0 that records what it receives; closed in teardown. */
async function startServer(t: { teardown(fn: () => unknown): void }, handler: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method ?? '', url: req.url ?? '', rawHeaders: req.rawHeaders, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const port = (server.address() as AddressInfo).port;
  return { port, base: `http://127.0.0.1:${port}`, allow: [`127.0.0.1:${port}`], seen };
}

async function failure(p: Promise<unknown>): Promise<OutboundError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OutboundError) return err;
    throw err;
  }
  throw new Error('expected the request to fail');
}

/** The header as it crossed the wire, name case included: `[name, value]`, or undefined. */
function rawHeader(rawHeaders: string[], name: string): [string, string] | undefined {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() === name.toLowerCase()) return [rawHeaders[i], rawHeaders[i + 1]];
  }
  return undefined;
}

const toLoopback: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];

t.test('loopback server is refused without an allow-list', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end('secret'));
  const err = await failure(outboundFetch(`${srv.base}/`, { timeoutMs: 5000 }, { allow: [] }));
  t.ok(err instanceof ServiceError, 'a ServiceError');
  t.equal(err.code, 'bad_request');
  t.equal(err.status, 400);
  t.equal(err.reason, 'ssrf_blocked');
  t.match(err.message, /loopback/);
  t.equal(srv.seen.length, 0, 'the server received nothing');
});

t.test('loopback server is reached when host:port is allow-listed', async (t) => {
  const srv = await startServer(t, (_req, res) => {
    res.setHeader('X-Reply', 'yes');
    res.end('hello');
  });
  const res = await outboundFetch(`${srv.base}/ping?q=1`, { timeoutMs: 5000 }, { allow: srv.allow });
  t.equal(res.status, 200);
  t.equal(res.body.toString(), 'hello');
  t.equal(res.headers['x-reply'], 'yes');
  t.equal(res.truncated, false);
  t.equal(res.url, `${srv.base}/ping?q=1`);
  t.type(res.latencyMs, 'number');
  t.equal(srv.seen[0].url, '/ping?q=1');
});

t.test('allow-list read from PARLEY_OUTBOUND_ALLOW', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end('ok'));
  const saved = process.env.PARLEY_OUTBOUND_ALLOW;
  t.teardown(() => {
    if (saved === undefined) delete process.env.PARLEY_OUTBOUND_ALLOW;
    else process.env.PARLEY_OUTBOUND_ALLOW = saved;
  });
  process.env.PARLEY_OUTBOUND_ALLOW = `127.0.0.1:${srv.port}`;
  const res = await outboundFetch(`${srv.base}/`, { timeoutMs: 5000 });
  t.equal(res.body.toString(), 'ok');
});

t.test('a public-looking name resolving to 127.0.0.1 is refused at connect time', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end('secret'));
  const url = `http://tools.example.com:${srv.port}/`;
  for (const allow of [[], srv.allow]) {
    const err = await failure(outboundFetch(url, { timeoutMs: 5000 }, { allow, lookup: toLoopback }));
    t.equal(err.reason, 'ssrf_blocked', `allow-list ${JSON.stringify(allow)}`);
    t.equal(err.code, 'bad_request');
    t.match(err.message, /resolves to a non-public address \(loopback\)/);
    t.notMatch(err.message, /127\.0\.0\.1/, 'the message does not reveal the address');
  }
  t.equal(srv.seen.length, 0, 'no request reached the server');
});

t.test('one private address among public ones refuses the name', async (t) => {
  const mixed: Resolver = async () => [
    { address: '93.184.216.34', family: 4 },
    { address: '10.0.0.7', family: 4 },
  ];
  const err = await failure(outboundFetch('http://mixed.example.com/', { timeoutMs: 5000 }, { allow: [], lookup: mixed }));
  t.equal(err.reason, 'ssrf_blocked');
  t.match(err.message, /private/);
});

t.test('a name resolving to a mapped IPv6 loopback is refused', async (t) => {
  const mapped: Resolver = async () => [{ address: '::ffff:127.0.0.1', family: 6 }];
  const err = await failure(outboundFetch('http://v6.example.com/', { timeoutMs: 5000 }, { allow: [], lookup: mapped }));
  t.equal(err.reason, 'ssrf_blocked');
});

t.test('an allow-listed name may resolve to loopback', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end('dev'));
  const res = await outboundFetch(`http://dev.test:${srv.port}/`, { timeoutMs: 5000 }, { allow: [`dev.test:${srv.port}`], lookup: toLoopback });
  t.equal(res.body.toString(), 'dev');
  t.same(rawHeader(srv.seen[0].rawHeaders, 'Host'), ['Host', `dev.test:${srv.port}`]);
});

t.test('a name that does not resolve is an upstream dns failure', async (t) => {
  const none: Resolver = async () => {
    throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  };
  const err = await failure(outboundFetch('http://nowhere.example.com/', { timeoutMs: 5000 }, { allow: [], lookup: none }));
  t.equal(err.code, 'upstream');
  t.equal(err.reason, 'dns_failed');
});

t.test('redirect from an allowed host to a disallowed address is refused', async (t) => {
  const other = await startServer(t, (_req, res) => res.end('internal'));
  const srv = await startServer(t, (req, res) => {
    const to = req.url === '/meta' ? 'http://169.254.169.254/latest/meta-data/' : `${other.base}/`;
    res.writeHead(302, { Location: to }).end();
  });
  const toPort = await failure(outboundFetch(`${srv.base}/`, { timeoutMs: 5000 }, { allow: srv.allow }));
  t.equal(toPort.reason, 'ssrf_blocked', 'another loopback port');
  t.equal(other.seen.length, 0, 'the redirect target received nothing');
  const toMeta = await failure(outboundFetch(`${srv.base}/meta`, { timeoutMs: 5000 }, { allow: srv.allow }));
  t.equal(toMeta.reason, 'ssrf_blocked', 'metadata address');
  t.match(toMeta.message, /metadata/);
});

t.test('redirect to a name resolving to loopback is refused', async (t) => {
  const srv = await startServer(t, (_req, res) => res.writeHead(307, { Location: `http://rebind.example.com:${srv.port}/` }).end());
  const err = await failure(outboundFetch(`${srv.base}/`, { timeoutMs: 5000 }, { allow: srv.allow, lookup: toLoopback }));
  t.equal(err.reason, 'ssrf_blocked');
  t.equal(srv.seen.length, 1, 'only the first hop was sent');
});

t.test('allowed redirects are followed; 303 becomes GET; 307 keeps method and body', async (t) => {
  const srv = await startServer(t, (req, res) => {
    if (req.url === '/see-other') res.writeHead(303, { Location: '/done' }).end();
    else if (req.url === '/temporary') res.writeHead(307, { Location: '/done' }).end();
    else res.end(`${req.method} ${req.url}`);
  });
  const a = await outboundFetch(`${srv.base}/see-other`, { method: 'POST', body: 'x=1', headers: { 'Content-Type': 'text/plain' }, timeoutMs: 5000 }, { allow: srv.allow });
  t.equal(a.body.toString(), 'GET /done');
  t.equal(a.url, `${srv.base}/done`);
  t.equal(srv.seen[1].body.length, 0, '303 drops the body');
  const b = await outboundFetch(`${srv.base}/temporary`, { method: 'PUT', body: 'y=2', timeoutMs: 5000 }, { allow: srv.allow });
  t.equal(b.body.toString(), 'PUT /done');
  t.equal(srv.seen[3].body.toString(), 'y=2', '307 resends the body');
});

t.test('a redirect to another origin drops credential headers', async (t) => {
  const other = await startServer(t, (_req, res) => res.end('there'));
  const srv = await startServer(t, (_req, res) => res.writeHead(302, { Location: `${other.base}/x` }).end());
  const res = await outboundFetch(
    `${srv.base}/`,
    { headers: { Authorization: 'Bearer s3cret', 'X-Api-Key': 'k', Accept: 'application/json' }, timeoutMs: 5000 },
    { allow: [...srv.allow, ...other.allow] },
  );
  t.equal(res.body.toString(), 'there');
  const names = other.seen[0].rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  t.notOk(names.includes('authorization'), 'Authorization dropped');
  t.notOk(names.includes('x-api-key'), 'custom header dropped');
  t.ok(names.includes('accept'), 'Accept kept');
  t.same(rawHeader(srv.seen[0].rawHeaders, 'Authorization'), ['Authorization', 'Bearer s3cret'], 'the first hop had it');
});

t.test('more redirects than maxRedirects is an error', async (t) => {
  const srv = await startServer(t, (req, res) => res.writeHead(301, { Location: `/r${Number(req.url?.slice(2) || 0) + 1}` }).end());
  const err = await failure(outboundFetch(`${srv.base}/r0`, { timeoutMs: 5000, maxRedirects: 2 }, { allow: srv.allow }));
  t.equal(err.reason, 'too_many_redirects');
  t.equal(err.code, 'upstream');
  t.equal(srv.seen.length, 3, 'the first request and two redirects');
});

t.test('timeout cancels the request', async (t) => {
  let serverSocketClosed!: Promise<void>;
  const srv = await startServer(t, (req) => {
    serverSocketClosed = new Promise((resolve) => req.socket.on('close', () => resolve())); // never answers
  });
  const err = await failure(outboundFetch(`${srv.base}/slow`, { timeoutMs: 150 }, { allow: srv.allow }));
  t.equal(err.code, 'timeout');
  t.equal(err.status, 504);
  t.equal(err.reason, 'timeout');
  await serverSocketClosed;
  t.pass('the server saw its connection close');
});

t.test('abort signal cancels the socket', async (t) => {
  const ac = new AbortController();
  let serverSocketClosed!: Promise<void>;
  const srv = await startServer(t, (req) => {
    serverSocketClosed = new Promise((resolve) => req.socket.on('close', () => resolve()));
    ac.abort(new Error('session ended')); // the request is in flight and unanswered
  });
  const err = await failure(outboundFetch(`${srv.base}/hang`, { timeoutMs: 60_000, signal: ac.signal }, { allow: srv.allow }));
  t.equal(err.reason, 'aborted');
  t.equal(err.code, 'upstream');
  t.match((err.cause as Error).message, 'session ended', 'the abort reason is kept as cause');
  await serverSocketClosed;
  t.pass('the server saw its connection close');
});

t.test('an already aborted signal sends nothing', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end());
  const err = await failure(outboundFetch(`${srv.base}/`, { timeoutMs: 5000, signal: AbortSignal.abort() }, { allow: srv.allow }));
  t.equal(err.reason, 'aborted');
  t.equal(srv.seen.length, 0);
});

t.test('response capture is capped at maxResponseBytes', async (t) => {
  const big = Buffer.alloc(256 * 1024, 'a');
  const srv = await startServer(t, (req, res) => res.end(req.url === '/exact' ? big.subarray(0, 1000) : big));
  const cut = await outboundFetch(`${srv.base}/big`, { timeoutMs: 5000, maxResponseBytes: 1000 }, { allow: srv.allow });
  t.equal(cut.status, 200);
  t.equal(cut.body.length, 1000);
  t.equal(cut.truncated, true);
  t.ok(cut.body.equals(big.subarray(0, 1000)), 'the first bytes, unchanged');
  const exact = await outboundFetch(`${srv.base}/exact`, { timeoutMs: 5000, maxResponseBytes: 1000 }, { allow: srv.allow });
  t.equal(exact.body.length, 1000);
  t.equal(exact.truncated, false, 'a body exactly at the cap is whole');
});

t.test('method, headers and body are sent exactly', async (t) => {
  const srv = await startServer(t, (_req, res) => res.writeHead(201, { 'Content-Type': 'application/json' }).end('{"ok":true}'));
  const body = JSON.stringify({ text: 'héllo — 世界', n: 1 });
  const res = await outboundFetch(
    `${srv.base}/tools/run?x=%20y`,
    {
      method: 'PATCH',
      headers: { 'Content-Type': 'application/json; charset=utf-8', Authorization: 'Bearer abc.DEF-123', 'X-Custom-Header': '  spaced value  ', 'x-lower': 'v' },
      body,
      timeoutMs: 5000,
    },
    { allow: srv.allow },
  );
  t.equal(res.status, 201);
  t.equal(res.headers['content-type'], 'application/json');
  t.equal(res.body.toString(), '{"ok":true}');
  const seen = srv.seen[0];
  t.equal(seen.method, 'PATCH');
  t.equal(seen.url, '/tools/run?x=%20y');
  t.ok(seen.body.equals(Buffer.from(body, 'utf8')), 'body bytes');
  t.same(rawHeader(seen.rawHeaders, 'Content-Type'), ['Content-Type', 'application/json; charset=utf-8']);
  t.same(rawHeader(seen.rawHeaders, 'Authorization'), ['Authorization', 'Bearer abc.DEF-123']);
  t.same(rawHeader(seen.rawHeaders, 'X-Custom-Header'), ['X-Custom-Header', 'spaced value'], 'header name case kept (HTTP trims value whitespace)');
  t.same(rawHeader(seen.rawHeaders, 'x-lower'), ['x-lower', 'v']);
  t.same(rawHeader(seen.rawHeaders, 'Content-Length'), ['Content-Length', String(Buffer.byteLength(body))]);
});

t.test('a binary body is sent byte for byte', async (t) => {
  const srv = await startServer(t, (_req, res) => res.end());
  const bytes = new Uint8Array([0, 255, 1, 254, 10, 13]);
  await outboundFetch(`${srv.base}/bin`, { method: 'POST', body: bytes, timeoutMs: 5000 }, { allow: srv.allow });
  t.same([...srv.seen[0].body], [...bytes]);
});

t.test('connection refused is an upstream failure', async (t) => {
  const probe = http.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve())); // nothing listens there now
  const err = await failure(outboundFetch(`http://127.0.0.1:${port}/`, { timeoutMs: 5000 }, { allow: [`127.0.0.1:${port}`] }));
  t.equal(err.code, 'upstream');
  t.equal(err.reason, 'connect_failed');
});

t.test('invalid URL and invalid header are bad requests', async (t) => {
  const a = await failure(outboundFetch('ftp://example.com/', { timeoutMs: 5000 }, { allow: [] }));
  t.equal(a.reason, 'invalid_url');
  t.equal(a.code, 'bad_request');
  const srv = await startServer(t, (_req, res) => res.end());
  const b = await failure(outboundFetch(`${srv.base}/`, { headers: { 'X-Bad': 'line\r\nInjected: 1' }, timeoutMs: 5000 }, { allow: srv.allow }));
  t.equal(b.reason, 'invalid_request');
  t.equal(srv.seen.length, 0);
});
