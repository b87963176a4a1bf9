import t from 'tap';
import { createServer } from 'node:net';
import { startTestServer } from '../helpers/server.ts';
import { startChatProvider } from '../fixtures/chat-provider.ts';

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** `npm start`'s embedded default: the native backend runs as a supervised child process. */
t.test('the native backend child: healthy, reported down when it dies, restarted', async (t) => {
  const app = await startTestServer({ config: { startNativeBackend: true, backendAddress: `127.0.0.1:${await freePort()}`, speechEngine: 'synthetic' } });
  t.teardown(() => app.close());
  const health = async () => (await app.req('GET', '/health')).body;
  const first = await health();
  t.equal(first.components.native_backend.status, 'ok');
  t.equal(first.components.inference.status, 'ok', 'the inference client reaches it over gRPC');

  // Kill the child the way a crash would.
  const before = app.nativeBackend!.status().restarts;
  process.kill(app.nativeBackend!.status().pid!, 'SIGKILL');
  const down = await until('down in /health', async () => {
    const h = await health();
    return h.components.native_backend.status === 'down' ? h : undefined;
  });
  t.match(down.components.native_backend.detail, /restarting/);
  await until('restarted', async () => {
    const st = app.nativeBackend!.status();
    return st.running && st.restarts === before + 1 ? true : undefined;
  });
  const again = await until('inference healthy again', async () => {
    const h = await health();
    return h.components.inference.status === 'ok' && h.components.native_backend.status === 'ok' ? h : undefined;
  });
  t.match(again.components.native_backend.detail, /restarts 1/);
});


/**
 * `npm start` launches the backend with the platform's environment: the provider settings
 * (docs/providers.md) reach it without being passed one by one.
 */
t.test('the native backend child reads the provider settings from the environment it inherits', async (t) => {
  const chat = await startChatProvider();
  const vars = { PARLEY_LLM_PROVIDER: 'openai', PARLEY_LLM_BASE_URL: chat.base, PARLEY_LLM_API_KEY: 'sk-inherited', PARLEY_LLM_MODEL: 'fixture' };
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  t.teardown(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await chat.close();
  });
  const app = await startTestServer({ config: { startNativeBackend: true, backendAddress: `127.0.0.1:${await freePort()}`, speechEngine: 'synthetic' } });
  t.teardown(() => app.close());
  const probe = await until('the provider probed', async () => chat.requests.find((r) => r.url === '/v1/models'));
  t.equal(probe.headers.authorization, 'Bearer sk-inherited', 'the child probed the chat provider with its key');
  const caps = await app.inference.capabilities();
  t.match(caps.models.find((m) => m.name === 'llm-medium')?.description, /served by the openai provider at 127\.0\.0\.1/, 'and serves the agent tiers with it');
});
