/**
 * Helpers for tool-runtime tests: a real platform (native backend with the scripted chat model
 * and synthetic speech) whose allow-list lets it reach a local HTTP endpoint started by the
 * test, agents with tools attached, and a caller that sees every frame the server sends.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket from 'ws';
import type { WebSocketFactory } from '../../src/client/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { agentWith, connect, createSession, sleep, type Caller } from '../e2e/session-helpers.ts';

export { sleep };

/** A request the endpoint received. */
export interface Hit {
  method: string;
  url: string;
  /** Header names and values as sent (name case kept). */
  raw: [string, string][];
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Settles when the request's connection closes (answered, or dropped by the caller). */
  closed: Promise<void>;
}

/**
 * How the endpoint answers a path: status and body, after `delayMs` or once `gate` settles
 * (the test decides when); `hang` never answers.
 */
export type Answer = { status?: number; body?: string; delayMs?: number; gate?: Promise<unknown>; contentType?: string } | 'hang';

/** A promise the test settles by hand (an endpoint's `gate`). */
export function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

export interface Endpoint {
  url: string;
  port: number;
  hits: Hit[];
  /** Answers by path prefix (first match); default 200 `{"ok":true}`. */
  routes: Map<string, Answer>;
  waitFor(n: number, path?: string): Promise<Hit[]>;
  close(): Promise<void>;
}

export async function startEndpoint(): Promise<Endpoint> {
  const hits: Hit[] = [];
  const routes = new Map<string, Answer>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let closed!: () => void;
    const hit: Hit = { method: req.method!, url: req.url!, raw: [], headers: req.headers, body: '', closed: new Promise((r) => (closed = r)) };
    res.on('close', () => closed());
    for (let i = 0; i < req.rawHeaders.length; i += 2) hit.raw.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      hit.body = Buffer.concat(chunks).toString('utf8');
      hits.push(hit);
      const answer = [...routes.entries()].find(([p]) => req.url!.startsWith(p))?.[1] ?? {};
      if (answer === 'hang') return;
      const send = () => {
        if (!res.destroyed) res.writeHead(answer.status ?? 200, { 'Content-Type': answer.contentType ?? 'application/json' }).end(answer.body ?? '{"ok":true}');
      };
      if (answer.gate) void answer.gate.then(send);
      else if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    hits,
    routes,
    async waitFor(n, path = '') {
      const until = Date.now() + 15_000;
      for (;;) {
        const got = hits.filter((h) => h.url.startsWith(path));
        if (got.length >= n) return got;
        if (Date.now() > until) throw new Error(`endpoint: ${got.length} of ${n} requests to ${path || '/'}`);
        await sleep(20);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The platform and the endpoint it may reach (`outboundAllow`); tools are written through the API. */
export async function startToolsPlatform(t: { teardown(fn: () => unknown): void }): Promise<{ app: TestServer; endpoint: Endpoint }> {
  const endpoint = await startEndpoint();
  // The write-time URL check reads PARLEY_OUTBOUND_ALLOW; calls use the platform's `outboundAllow`.
  const saved = process.env.PARLEY_OUTBOUND_ALLOW;
  process.env.PARLEY_OUTBOUND_ALLOW = `127.0.0.1:${endpoint.port}`;
  const app = await startTestServer({ backend: 'synthetic', config: { outboundAllow: [`127.0.0.1:${endpoint.port}`] } });
  t.teardown(async () => {
    await app.close();
    await endpoint.close();
    if (saved === undefined) delete process.env.PARLEY_OUTBOUND_ALLOW;
    else process.env.PARLEY_OUTBOUND_ALLOW = saved;
  });
  return { app, endpoint };
}

/** Creates a workspace tool; returns its id. */
export async function makeTool(app: TestServer, body: Record<string, unknown>): Promise<string> {
  const r = await app.req('POST', '/v1/agent/tools', { tool_type: 'webhook', description: 'A test tool', ...body });
  if (r.status !== 201) throw new Error(`tool: ${r.status} ${r.text}`);
  return r.body.tool_id as string;
}

/** A published agent (silent opener, eager) with `toolIds` attached. */
export function toolAgent(app: TestServer, toolIds: string[], config: Record<string, unknown> = {}): Promise<string> {
  // Recording off: these tests are about tools, and need no audio files.
  return agentWith(app, { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager', record_audio: false }, tools: { tool_ids: toolIds }, ...config });
}

/** A server frame of the `agent-event` topic. */
export type AgentEvent = Record<string, any> & { type: string };

export interface ToolCaller extends Caller {
  sessionId: string;
  /** Every `agent-event` frame the server sent, in order. */
  events: AgentEvent[];
  /** Sends a raw client-event frame. */
  sendRaw(m: Record<string, unknown>): void;
  /** Typed user turn (spoken reply unless `audio: false`). */
  say(text: string, audio?: boolean): void;
  /** Waits for the agent's n-th final transcript and returns it. */
  reply(n: number, timeoutMs?: number): Promise<string>;
  toolEvents(): AgentEvent[];
}

/** Creates a session of `agentId` and joins it with the client SDK, tapping the socket. */
export async function join(app: TestServer, agentId: string, extra: Record<string, unknown> = {}): Promise<ToolCaller> {
  const session = await createSession(app, agentId, extra);
  const events: AgentEvent[] = [];
  let socket: WebSocket | null = null;
  class Tapped extends WebSocket {
    constructor(url: string) {
      super(url);
      socket = this;
      this.on('message', (data, binary) => {
        if (binary) return;
        const m = JSON.parse(String(data));
        if (m.topic === 'agent-event') events.push(m);
      });
    }
  }
  const caller = await connect(session, { WebSocket: Tapped as unknown as WebSocketFactory, reconnect: false });
  // These tests answer client tools by hand over the raw socket: a listener tells the SDK not
  // to answer unhandled calls itself.
  caller.convo.on('clientToolCall', () => {});
  const reply = async (n: number, timeoutMs = 20_000) => {
    await caller.waitFor(() => caller.finals('agent').length >= n, timeoutMs, `agent reply ${n}`);
    return caller.finals('agent')[n - 1]!;
  };
  return Object.assign(caller, {
    sessionId: session.session_id as string,
    events,
    sendRaw: (m: Record<string, unknown>) => socket!.send(JSON.stringify({ topic: 'client-event', ...m })),
    say: (text: string, audio = true) => caller.convo.sendUserMessage(text, audio ? {} : { audio: false }),
    reply,
    toolEvents: () => events.filter((e) => e.type.startsWith('tool.')),
  });
}

/** The session record's tool items (waits until `pred` holds on them). */
export async function toolItems(app: TestServer, sessionId: string, pred: (items: any[]) => boolean = () => true): Promise<any[]> {
  const until = Date.now() + 15_000;
  for (;;) {
    const r = await app.req('GET', `/v1/agent/sessions/${sessionId}`);
    if (r.status !== 200) throw new Error(`session: ${r.status} ${r.text}`);
    const items = r.body.items.filter((i: any) => i.type === 'tool_call' || i.type === 'tool_result');
    if (pred(items)) return items;
    if (Date.now() > until) throw new Error(`tool items never matched: ${JSON.stringify(items)}`);
    await sleep(50);
  }
}

/** Waits until `pred` holds. */
export async function until(pred: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
