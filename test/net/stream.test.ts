/** `outboundStream`: the SSRF guard of `outboundFetch`, with the body read as it arrives. */
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { OutboundError, outboundStream, type Resolver } from '../../src/net/index.ts';

async function server(t: { teardown(fn: () => unknown): void }, handler: http.RequestListener) {
  let hits = 0;
  const s = http.createServer((req, res) => {
    hits++;
    handler(req, res);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => {
    s.closeAllConnections();
    s.close(() => r());
  }));
  const port = (s.address() as AddressInfo).port;
  return { base: `http://127.0.0.1:${port}`, allow: [`127.0.0.1:${port}`], hits: () => hits, port };
}

async function failure(p: Promise<unknown>): Promise<OutboundError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof OutboundError) return err;
    throw err;
  }
  throw new Error('expected a failure');
}

const init = { method: 'POST', body: '{}', headersTimeoutMs: 2000, idleTimeoutMs: 2000 };

t.test('loopback is refused without the allow-list, before any connection', async (t) => {
  const srv = await server(t, (_q, r) => r.end('x'));
  const err = await failure(outboundStream(`${srv.base}/`, init, { allow: [] }));
  t.equal(err.reason, 'ssrf_blocked');
  t.equal(srv.hits(), 0);
});

t.test('a public name resolving to a private address is refused at connect time (DNS rebinding)', async (t) => {
  const srv = await server(t, (_q, r) => r.end('x'));
  const rebinding: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
  const err = await failure(outboundStream(`http://llm.example.com:${srv.port}/`, init, { allow: [], lookup: rebinding }));
  t.equal(err.reason, 'ssrf_blocked');
  t.match(err.message, /non-public address \(loopback\)/);
  t.equal(srv.hits(), 0);
});

t.test('the body streams: the first chunk arrives while the server is still writing', async (t) => {
  let finish!: () => void;
  const srv = await server(t, (_q, r) => {
    r.writeHead(200, { 'Content-Type': 'text/event-stream' });
    r.write('data: one\n\n');
    finish = () => r.end('data: two\n\n');
  });
  const res = await outboundStream(`${srv.base}/x`, init, { allow: srv.allow });
  t.equal(res.status, 200);
  t.equal(res.headers['content-type'], 'text/event-stream');
  const got: string[] = [];
  for await (const chunk of res.body) {
    got.push(chunk.toString());
    if (got.length === 1) finish();
  }
  t.same(got, ['data: one\n\n', 'data: two\n\n']);
});

t.test('silence longer than idleTimeoutMs fails the read with timeout; no headers within headersTimeoutMs fails the request', async (t) => {
  const srv = await server(t, (q, r) => {
    if (q.url === '/silent-headers') return; // never answers
    r.writeHead(200);
    r.write('a');
  });
  const res = await outboundStream(`${srv.base}/`, { ...init, idleTimeoutMs: 150 }, { allow: srv.allow });
  const chunks: string[] = [];
  const err = await failure((async () => {
    for await (const c of res.body) chunks.push(c.toString());
  })());
  t.same(chunks, ['a']);
  t.equal(err.reason, 'timeout');
  t.equal((await failure(outboundStream(`${srv.base}/silent-headers`, { ...init, headersTimeoutMs: 150 }, { allow: srv.allow }))).reason, 'timeout');
});

t.test('the caller signal aborts the request and the read', async (t) => {
  const srv = await server(t, (_q, r) => {
    r.writeHead(200);
    r.write('a');
  });
  const ac = new AbortController();
  const res = await outboundStream(`${srv.base}/`, { ...init, signal: ac.signal }, { allow: srv.allow });
  const err = await failure((async () => {
    for await (const _c of res.body) ac.abort();
  })());
  t.equal(err.reason, 'aborted');
  const pre = new AbortController();
  pre.abort();
  t.equal((await failure(outboundStream(`${srv.base}/`, { ...init, signal: pre.signal }, { allow: srv.allow }))).reason, 'aborted');
});

t.test('a connection cut mid-body is response_failed', async (t) => {
  const srv = await server(t, (_q, r) => {
    r.writeHead(200, { 'Content-Length': '100' });
    r.write('partial');
    setTimeout(() => r.destroy(), 20);
  });
  const res = await outboundStream(`${srv.base}/`, init, { allow: srv.allow });
  const err = await failure((async () => {
    for await (const _c of res.body) { /* read */ }
  })());
  t.equal(err.reason, 'response_failed');
});
