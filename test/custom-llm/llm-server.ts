/** A chat-completions server for the custom LLM tests: real HTTP on loopback, scripted per request. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Step = (req: http.IncomingMessage, res: http.ServerResponse, body: any) => void;

/** A chat-completions server on 127.0.0.1:0; each request takes the next step (the last one repeats). */
export async function llmServer(t: { teardown(fn: () => unknown): void }) {
  const seen: { headers: http.IncomingHttpHeaders; url: string; body: any }[] = [];
  let steps: Step[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
      seen.push({ headers: req.headers, url: req.url ?? '', body });
      const step = steps[Math.min(seen.length - 1, steps.length - 1)];
      step(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  const port = (server.address() as AddressInfo).port;
  return {
    seen,
    port,
    entry: `127.0.0.1:${port}`,
    base: `http://127.0.0.1:${port}/v1`,
    script(...s: Step[]) {
      steps = s;
      seen.length = 0;
    },
  };
}

export const sse = (res: http.ServerResponse) => res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
export const chunk = (delta: object, finish: string | null = null) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

/** Streams `text` in small deltas, then a stop and [DONE]. */
export const reply = (text: string): Step => (_req, res) => {
  sse(res);
  res.write(chunk({ role: 'assistant', content: '' }));
  const parts = text.match(/.{1,7}/gs) ?? [];
  let i = 0;
  const next = () => {
    if (i < parts.length) {
      res.write(chunk({ content: parts[i++] }));
      setTimeout(next, 5);
      return;
    }
    res.write(chunk({}, 'stop'));
    res.end('data: [DONE]\n\n');
  };
  next();
};
export const status = (code: number): Step => (_req, res) => res.writeHead(code, { 'Content-Type': 'application/json' }).end('{"error":{"message":"nope"}}');
