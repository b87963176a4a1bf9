/**
 * What the HTTP parser (uWebSockets.js) does with malformed requests, measured on a raw TCP
 * socket against the platform's HTTP layer: the answer (a status line, a reset, a close
 * without an answer, or nothing until the idle timeout) and how long it took. Prints one
 * JSON object; docs/reliability.md quotes it. Run: `npx tsx bench/malformed-http.ts`.
 */
import net from 'node:net';
import { HttpApp } from '../src/http/app.ts';
import { createLogger } from '../src/log.ts';
import { Metrics } from '../src/telemetry/metrics.ts';

const WAIT_MS = Number(process.env.WAIT_MS ?? 15_000);

const http = new HttpApp({ log: createLogger({ level: 'silent' }), metrics: new Metrics({ processMetrics: false }), authenticate: async () => ({ teamId: 't', keyId: 'k', betaAccess: true }) });
http.route({ method: 'GET', path: '/health', auth: 'none', handler: () => ({ status: 200, body: { ok: true } }) });
http.route({ method: 'POST', path: '/echo', auth: 'none', body: 'any', bodyOptional: true, handler: () => ({ status: 200, body: { ok: true } }) });
const port = await http.listen('127.0.0.1', 0);

const long = (n: number) => 'a'.repeat(n);
const cases: Record<string, Buffer | string> = {
  valid: 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n',
  nul_in_header_value: 'GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n',
  bare_cr_in_header: 'GET /health HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n',
  header_without_colon: 'GET /health HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n',
  space_in_path: 'GET /hea lth HTTP/1.1\r\nHost: x\r\n\r\n',
  http10_without_host: 'GET /health HTTP/1.0\r\n\r\n',
  http11_without_host: 'GET /health HTTP/1.1\r\n\r\n',
  get_with_4kb_body: `GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n${long(4096)}`,
  get_with_1kb_body: `GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n${long(1024)}`,
  path_100kb: `GET /health/${long(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
  query_100kb: `GET /health?q=${long(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
  get_with_64kb_body: `GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n${long(65536)}`,
  path_1mb: `GET /health/${long(1_000_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
  header_64kb: `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${long(65536)}\r\n\r\n`,
  headers_200: `GET /health HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 200 }, (_, i) => `X-H${i}: v\r\n`).join('')}\r\n`,
  path_3kb: `GET /health/${long(3000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
  header_8kb: `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${long(8192)}\r\n\r\n`,
  content_length_not_a_number: 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
  two_content_lengths: 'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
  not_http: 'HELLO\r\n\r\n',
  binary_garbage: Buffer.from(Array.from({ length: 256 }, (_, i) => (i * 7919) % 256)),
};

function probe(payload: Buffer | string): Promise<{ outcome: string; status?: number; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    let done = false;
    const finish = (outcome: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(data);
      resolve({ outcome: m ? 'status' : outcome, ...(m ? { status: Number(m[1]) } : {}), ms: Math.round(performance.now() - started) });
    };
    const timer = setTimeout(() => finish('no_answer'), WAIT_MS);
    sock.on('data', (d) => {
      data += d.toString('latin1');
      if (/\r\n\r\n/.test(data)) finish('status');
    });
    sock.on('error', (e: NodeJS.ErrnoException) => finish(e.code === 'ECONNRESET' ? 'reset' : `error_${e.code}`));
    sock.on('end', () => finish('closed_without_answer'));
    sock.on('close', () => finish('closed_without_answer'));
    sock.write(payload);
  });
}

const results: Record<string, unknown> = {};
await Promise.all(Object.entries(cases).map(async ([name, payload]) => (results[name] = await probe(payload))));
await http.close();
console.log(JSON.stringify({ waitMs: WAIT_MS, results }, null, 1));
