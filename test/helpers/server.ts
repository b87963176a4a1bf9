import { randomBytes } from 'node:crypto';
import { createKey } from '../../src/auth/keys.ts';
import type { ConfigOverrides } from '../../src/config.ts';
import { newId } from '../../src/ids.ts';
import { createLogger, type Logger } from '../../src/log.ts';
import { randomSchema, startPlatform, type Platform } from '../../src/platform.ts';
import { createTeam } from '../../src/auth/store-teams.ts';
import { startBackend, type Backend as NativeBackend, type BackendOptions } from '../../native/server.ts';

export interface TestServer extends Platform {
  /** The in-process native backend, when `backend` was asked for. */
  backend?: NativeBackend;
  key: string;
  auth: Record<string, string>;
  /** JSON request helper: `req('POST', '/v1/agent/agents', {name: 'x'})`. */
  req(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; headers: Headers; body: any; text: string }>;
  /** Another team with its own key (beta access and credit unless told otherwise). */
  newTeam(opts?: { beta?: boolean; creditMicros?: bigint }): Promise<{ teamId: string; key: string; auth: Record<string, string> }>;
}

/**
 * A real platform on port 0 for one test file: the embedded store (PGlite, ephemeral), or
 * a fresh schema on DATABASE_URL when set; a key prefix of its own on REDIS_URL when set.
 */
export async function startTestServer(
  opts: { config?: ConfigOverrides; embedded?: boolean; backend?: 'synthetic' | 'espeak'; backendOptions?: Omit<BackendOptions, 'address' | 'engine'>; webDir?: string; log?: Logger } = {},
): Promise<TestServer> {
  // A real native backend over real gRPC on a free loopback port, in this process.
  const backend = opts.backend ? await startBackend({ address: '127.0.0.1:0', engine: opts.backend, ...opts.backendOptions }) : undefined;
  const key = `pk_test_${randomBytes(24).toString('base64url')}`;
  const useReal = !opts.embedded && !!process.env.DATABASE_URL;
  const platform = await startPlatform({
    env: {},
    config: {
      host: '127.0.0.1',
      port: 0,
      dataDir: 'memory',
      databaseUrl: useReal ? process.env.DATABASE_URL : undefined,
      redisUrl: process.env.REDIS_URL || undefined,
      bootstrapKey: key,
      logLevel: process.env.TEST_LOG_LEVEL ?? 'silent',
      startNativeBackend: false,
      ...(backend ? { backendAddress: backend.address } : {}),
      ...opts.config,
    },
    dbSchema: useReal ? randomSchema() : undefined,
    webDir: opts.webDir,
    statePrefix: `test:${randomBytes(4).toString('hex')}:`,
    log: opts.log ?? createLogger({ level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
  });
  const auth = { Authorization: `Bearer ${key}` };
  const req: TestServer['req'] = async (method, path, body, headers = {}) => {
    const init: RequestInit = { method, headers: { ...auth, ...headers } };
    if (body !== undefined) {
      init.body = typeof body === 'string' || body instanceof Uint8Array ? (body as BodyInit) : JSON.stringify(body);
      if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) (init.headers as Record<string, string>)['Content-Type'] = 'application/json';
    }
    const res = await fetch(platform.url + path, init);
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  };
  const newTeam: TestServer['newTeam'] = async (o = {}) => {
    const team = await createTeam(platform.db.sql, { id: newId('team'), name: 'other', betaAccess: o.beta ?? true, creditMicros: o.creditMicros ?? 100_000_000n });
    const { key: k } = await createKey(platform.db.sql, team.id);
    return { teamId: team.id, key: k, auth: { Authorization: `Bearer ${k}` } };
  };
  if (backend) {
    const close = platform.close;
    platform.close = async () => {
      await close();
      await backend.close();
    };
  }
  return Object.assign(platform, { key, auth, req, newTeam, backend });
}
