import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../../src/log.ts';
import { startPlatform, type Platform } from '../../src/platform.ts';
import { markSessionActive, markSessionEnded } from '../../src/sessions/store.ts';
import type { TestServer } from '../helpers/server.ts';

export interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Header names and values as sent (name case kept). */
  rawHeaders: string[];
  body: string;
}

/** A local HTTP endpoint that records every request and answers from a script (then 200). */
export interface Receiver {
  port: number;
  url: string;
  requests: Received[];
  /** Statuses for the next requests, in order; afterwards every request gets 200. */
  script: number[];
  /** Resolves once `n` requests have arrived. */
  waitFor(n: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(handler?: (r: Received, res: http.ServerResponse) => boolean): Promise<Receiver> {
  const requests: Received[] = [];
  const waiters: { n: number; resolve: () => void }[] = [];
  const rec: Receiver = {
    port: 0,
    url: '',
    requests,
    script: [],
    waitFor: (n) =>
      new Promise((resolve) => {
        if (requests.length >= n) return resolve(requests.slice(0, n));
        waiters.push({ n, resolve: () => resolve(requests.slice(0, n)) });
      }),
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = { method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks).toString('utf8') };
      requests.push(r);
      for (const w of waiters.filter((w) => requests.length >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      if (handler?.(r, res)) return;
      const status = rec.script.shift() ?? 200;
      res.writeHead(status, { 'Content-Type': 'text/plain' }).end(status < 300 ? 'ok' : 'nope');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  rec.port = (server.address() as AddressInfo).port;
  rec.url = `http://127.0.0.1:${rec.port}`;
  return rec;
}

/**
 * Lets the platform's write-time URL check accept loopback endpoints of this test (the
 * `PARLEY_OUTBOUND_ALLOW` it reads); delivery itself uses the platform's `outboundAllow`.
 */
export function allowWrites(t: { teardown(fn: () => void): void }, ...entries: string[]): void {
  const saved = process.env.PARLEY_OUTBOUND_ALLOW;
  t.teardown(() => {
    if (saved === undefined) delete process.env.PARLEY_OUTBOUND_ALLOW;
    else process.env.PARLEY_OUTBOUND_ALLOW = saved;
  });
  process.env.PARLEY_OUTBOUND_ALLOW = entries.join(',');
}

type App = Pick<TestServer, 'req' | 'db'>;

/** An agent whose published version posts to `endpoints`; a session of it, started and ended (as the runtime does). */
export async function endedSession(
  app: App,
  endpoints: { url: string; secret?: string }[],
  session: Record<string, unknown> = {},
  end: { status: 'completed' | 'failed'; reason: string } = { status: 'completed', reason: 'hangup' },
): Promise<{ agentId: string; sessionId: string }> {
  const created = await app.req('POST', '/v1/agent/agents', { name: 'Webhook agent', config: { webhooks: { post_call: endpoints } } });
  if (created.status !== 201) throw new Error(`agent create: ${created.status} ${created.text}`);
  const agentId = created.body.agent_id as string;
  const pub = await app.req('POST', `/v1/agent/agents/${agentId}/publish`);
  if (pub.status !== 200) throw new Error(`publish: ${pub.status} ${pub.text}`);
  const s = await app.req('POST', '/v1/agent/sessions', { agent_id: agentId, ...session });
  if (s.status !== 200) throw new Error(`session: ${s.status} ${s.text}`);
  const sessionId = s.body.session_id as string;
  await markSessionActive(app.db.sql, sessionId, 'node-test');
  await markSessionEnded(app.db.sql, sessionId, end);
  return { agentId, sessionId };
}

/** Polls the delivery log until `pred` holds (tests never assert on timing, only wait). */
export async function waitForLog(app: App, sessionId: string, pred: (deliveries: any[]) => boolean): Promise<any[]> {
  for (;;) {
    const r = await app.req('GET', `/v1/agent/sessions/${sessionId}/webhook-deliveries`);
    if (r.status !== 200) throw new Error(`log: ${r.status} ${r.text}`);
    if (pred(r.body.deliveries)) return r.body.deliveries;
    await new Promise((res) => setTimeout(res, 50));
  }
}

export interface DurablePlatform extends Platform, App {}

/**
 * A platform that can be stopped and started again on the same durable store: a fixed schema
 * on DATABASE_URL when set, else the embedded store in `dataDir` (which also holds the secret
 * key, so sealed webhook secrets open after the restart). Inference goes to `backendAddress`
 * (analysis and recordings tests start a native backend for it).
 */
export async function startDurablePlatform(o: { dataDir: string; schema: string; key: string; allow: string[]; env?: Record<string, string>; backendAddress?: string }): Promise<DurablePlatform> {
  const real = !!process.env.DATABASE_URL;
  const platform = await startPlatform({
    env: o.env ?? {},
    config: {
      host: '127.0.0.1',
      port: 0,
      dataDir: o.dataDir,
      databaseUrl: real ? process.env.DATABASE_URL : undefined,
      redisUrl: process.env.REDIS_URL || undefined,
      bootstrapKey: o.key,
      logLevel: process.env.TEST_LOG_LEVEL ?? 'silent',
      startNativeBackend: false,
      backendAddress: o.backendAddress,
      outboundAllow: o.allow,
    },
    dbSchema: real ? o.schema : undefined,
    statePrefix: `test:${o.schema}:`,
    log: createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
  });
  const auth = { Authorization: `Bearer ${o.key}` };
  const req: App['req'] = async (method, path, body, headers = {}) => {
    const init: RequestInit = { method, headers: { ...auth, ...headers } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)['Content-Type'] = 'application/json';
    }
    const res = await fetch(platform.url + path, init);
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };
  return Object.assign(platform, { req });
}

export const testKey = () => `pk_test_${randomBytes(24).toString('base64url')}`;
