// The speech concurrency cap (docs/api/speech.md "Concurrency": a 429 past the spend
// tier's cap, and every 429 carries Retry-After), run by concurrency-memory.test.ts and concurrency-redis.test.ts:
// the same cases on the in-memory shared state and on Redis (concurrency-redis.test.ts runs
// when REDIS_URL is set). The cap is fixed with PARLEY_SPEECH_CONCURRENCY=2, so the
// platform starts here with that environment (the shared test helper passes none).
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import WebSocket from 'ws';
import { startBackend } from '../../native/server.ts';
import { createLogger } from '../../src/log.ts';
import { randomSchema, startPlatform, type Platform } from '../../src/platform.ts';
import { createSharedState, type SharedState } from '../../src/state/index.ts';

const REDIS = process.env.REDIS_URL ?? '';
const CAP = 2;
const MESSAGE = `Too many concurrent requests: this team may run ${CAP} speech requests at once`;

type Kind = 'memory' | 'redis';

async function startServer(kind: Kind): Promise<{ app: Platform; key: string; close(): Promise<void> }> {
  // Real-time pacing: a long synthesis stays in flight until the test ends or aborts it.
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', pacing: 'realtime' });
  const key = `pk_test_${randomBytes(24).toString('base64url')}`;
  const useReal = !!process.env.DATABASE_URL;
  const app = await startPlatform({
    env: { PARLEY_SPEECH_CONCURRENCY: String(CAP) },
    config: {
      host: '127.0.0.1',
      port: 0,
      dataDir: 'memory',
      databaseUrl: useReal ? process.env.DATABASE_URL : undefined,
      redisUrl: kind === 'redis' ? REDIS : undefined,
      bootstrapKey: key,
      logLevel: 'silent',
      startNativeBackend: false,
      backendAddress: backend.address,
    },
    dbSchema: useReal ? randomSchema() : undefined,
    statePrefix: `test:${randomBytes(4).toString('hex')}:`,
    log: createLogger({ level: 'silent' }),
  });
  return {
    app,
    key,
    close: async () => {
      await app.close();
      await backend.close();
    },
  };
}

const LONG = Array.from({ length: 200 }, (_, i) => `Sentence number ${i + 1} is here.`).join(' ');

export function concurrencySuite(kind: Kind): void {
  t.test(`speech concurrency cap on ${kind} shared state`, async (t) => {
    const { app, key, close } = await startServer(kind);
    t.teardown(close);
    t.equal(app.state.kind, kind);
    const auth = { Authorization: `Bearer ${key}` };
    const open: AbortController[] = [];
    // Kept referenced: fetch cancels the body of a response that is garbage collected unread.
    const responses: Response[] = [];
    t.teardown(() => {
      open.forEach((ac) => ac.abort());
      responses.length = 0;
    });

    /** A streaming synthesis the test holds open (it reads nothing past the headers). */
    const stream = async (path = '/v1/tts') => {
      const ac = new AbortController();
      open.push(ac);
      const res = await fetch(app.url + path, { method: 'POST', signal: ac.signal, headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: LONG, format: 'pcm', sample_rate: 16000, chunk_length: 100 }) });
      responses.push(res);
      return { res, ac };
    };
    const short = () => fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'One more.', format: 'wav' }) });
    /** Retries a request while it is refused with 429 (the slot is freed just after the response ends). */
    const admitted = async (send: () => Promise<Response>) => {
      let last: Response | undefined;
      for (let i = 0; i < 100; i++) {
        last = await send();
        if (last.status !== 429) return last;
        await last.arrayBuffer();
        await sleep(50);
      }
      return last!;
    };
    const asr = () => {
      const form = new FormData();
      form.append('audio', new Blob([new Uint8Array(64)]), 'a.wav');
      return fetch(app.url + '/v1/asr', { method: 'POST', headers: auth, body: form });
    };

    const first = await stream();
    const second = await stream('/v1/tts/stream/with-timestamp');

    t.test('N concurrent streaming requests run; the N+1th gets 429 with Retry-After', async (t) => {
      t.equal(first.res.status, 200, 'first stream (POST /v1/tts)');
      t.equal(second.res.status, 200, 'second stream (with-timestamp)');
      const third = await short();
      t.equal(third.status, 429);
      t.same(await third.json(), { status: 429, message: MESSAGE });
      const retry = Number(third.headers.get('retry-after'));
      t.ok(Number.isInteger(retry) && retry >= 1, `Retry-After ${third.headers.get('retry-after')}`);
      t.ok(third.headers.get('access-control-expose-headers')?.includes('Retry-After'), 'browsers can read it');
      // docs/api/speech.md "Tracing": a trace context changes no rate limit.
      const traced = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }, body: JSON.stringify({ text: 'One more.', format: 'wav' }) });
      t.equal(traced.status, 429, 'with a valid traceparent: the same cap');
      t.same(await traced.json(), { status: 429, message: MESSAGE });
    });

    t.test('the cap covers every speech surface: with-timestamp and /v1/asr are refused too', async (t) => {
      const sse = await fetch(app.url + '/v1/tts/stream/with-timestamp', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'Hi.' }) });
      t.equal(sse.status, 429);
      t.same(await sse.json(), { status: 429, message: MESSAGE });
      t.ok(sse.headers.get('retry-after'));
      const r = await asr();
      t.equal(r.status, 429);
      t.same(await r.json(), { status: 429, message: MESSAGE });
      t.ok(r.headers.get('retry-after'));
    });

    t.test('compat families show the 429 in their envelopes, with Retry-After', async (t) => {
      const a = await fetch(app.url + '/compat/v1/audio/speech', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'tts-1', voice: '', input: 'Hi.', response_format: 'wav' }) });
      t.equal(a.status, 429, 'family A');
      const aBody = (await a.json()) as any;
      t.same(aBody, { error: { code: 429, message: MESSAGE, type: 'rate_limit_error' } });
      t.ok(a.headers.get('retry-after'), 'family A Retry-After');
      const c = await fetch(app.url + '/compat/elevenlabs/v1/text-to-speech/default?output_format=mp3_44100_128', { method: 'POST', headers: { 'xi-api-key': key, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'Hi.' }) });
      t.equal(c.status, 429, 'family C');
      t.same(await c.json(), { detail: { status: 'rate_limit_error', message: MESSAGE } });
      t.ok(c.headers.get('retry-after'), 'family C Retry-After');
    });

    t.test('live synthesis socket over the cap: HTTP 429 with Retry-After before the upgrade', async (t) => {
      const ws = new WebSocket(app.url.replace('http://', 'ws://') + '/v1/tts/live', { headers: auth });
      const refused = await new Promise<{ status: number; retryAfter?: string; body: string }>((resolve, reject) => {
        ws.once('open', () => reject(new Error('the upgrade was accepted')));
        ws.once('error', () => {});
        ws.once('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body }));
        });
      });
      ws.terminate();
      t.equal(refused.status, 429);
      t.ok(Number(refused.retryAfter) >= 1, `Retry-After ${refused.retryAfter}`);
      t.same(JSON.parse(refused.body), { status: 429, message: MESSAGE });
    });

    t.test('another team is not affected by this team’s cap', async (t) => {
      const { createTeam } = await import('../../src/auth/store-teams.ts');
      const { createKey } = await import('../../src/auth/keys.ts');
      const team = await createTeam(app.db.sql, { id: `team_${randomUUID()}`, name: 'other', betaAccess: true, creditMicros: 10_000_000n });
      const { key: other } = await createKey(app.db.sql, team.id);
      const r = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { Authorization: `Bearer ${other}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'Other team.', format: 'wav' }) });
      t.equal(r.status, 200);
      await r.arrayBuffer();
    });

    t.test('after the client aborts, a new one is admitted; after it finishes, another', async (t) => {
      second.ac.abort();
      const r = await admitted(short);
      t.equal(r.status, 200, 'the aborted stream freed its slot');
      await r.arrayBuffer(); // read to its end: the response finished
      const again = await stream();
      t.equal(again.res.status, 200, 'the finished request freed its slot too');
      const full = await short();
      t.equal(full.status, 429, 'full again: the first stream and the new one');
      await full.arrayBuffer();
      again.ac.abort();
      first.ac.abort();
    });

    t.test('a live socket holds a slot from the upgrade until it closes', async (t) => {
      /** Opens a live socket, retrying while the upgrade is refused (earlier requests' slots are freed just after they end). */
      const connect = async (): Promise<WebSocket> => {
        for (let attempt = 0; ; attempt++) {
          const ws = new WebSocket(app.url.replace('http://', 'ws://') + '/v1/tts/live', { headers: auth });
          ws.on('error', () => {});
          const status = await new Promise<number>((resolve) => {
            ws.once('open', () => resolve(101));
            ws.once('unexpected-response', (_q, res) => resolve(res.statusCode ?? 0));
          });
          if (status === 101) return ws;
          ws.terminate();
          if (status !== 429 || attempt >= 100) throw new Error(`upgrade refused: ${status}`);
          await sleep(50);
        }
      };
      const sockets: WebSocket[] = [];
      for (let i = 0; i < CAP; i++) sockets.push(await connect());
      const full = await short();
      t.equal(full.status, 429, `${CAP} open live sockets use the whole cap`);
      await full.arrayBuffer();
      const closed = new Promise((resolve) => sockets[0]!.once('close', resolve));
      sockets[0]!.close(1000);
      await closed;
      const r = await admitted(short);
      t.equal(r.status, 200, 'closing a socket frees its slot');
      await r.arrayBuffer();
      for (const ws of sockets.slice(1)) ws.terminate();
    });

    t.test('a failed request frees its slot (a refused voice, after the slot was taken)', async (t) => {
      // Both slots free again: a request that fails after acquiring (unknown voice → 400) must not keep one.
      await admitted(short).then((r) => r.arrayBuffer());
      for (let i = 0; i < CAP + 1; i++) {
        const r = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ text: 'x', reference_id: 'no-such-voice' }) });
        t.equal(r.status, 400, `attempt ${i + 1}: Reference not found, never 429`);
        await r.arrayBuffer();
      }
    });
  });

  t.test(`the shared-state semaphore on ${kind}: atomic, per key, leases expire`, async (t) => {
    let now = Date.now();
    const prefix = `test:${randomBytes(4).toString('hex')}:`;
    const make = () => createSharedState({ redisUrl: kind === 'redis' ? REDIS : undefined, prefix, now: () => now });
    const a: SharedState = await make();
    t.teardown(() => a.close());

    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => a.acquireSlot('k', `h${i}`, 5, 60_000)));
    t.equal(results.filter((r) => r.acquired).length, 5, '20 concurrent acquires with limit 5 admit exactly 5');
    const holders = results.map((r, i) => (r.acquired ? `h${i}` : null)).filter((h): h is string => h !== null);
    t.same(await a.acquireSlot('k', holders[0]!, 5, 60_000), { acquired: true, held: 5 }, 'a holder acquiring again keeps its slot');
    t.same(await a.acquireSlot('other', 'x', 1, 60_000), { acquired: true, held: 1 }, 'keys are independent');
    t.equal(await a.releaseSlot('k', holders[0]!), true);
    t.equal(await a.releaseSlot('k', holders[0]!), false, 'releasing twice is harmless');
    t.same(await a.acquireSlot('k', 'late', 5, 60_000), { acquired: true, held: 5 }, 'a released slot is free');
    t.equal(await a.renewSlot('k', 'never-held', 1000), false);

    // A crashed holder: its lease runs out unless renewed.
    const lease = kind === 'redis' ? 300 : 1000;
    t.same(await a.acquireSlot('crash', 'dead', 1, lease), { acquired: true, held: 1 });
    t.same(await a.acquireSlot('crash', 'alive', 1, lease), { acquired: false, held: 1 }, 'full while the lease lives');
    t.equal(await a.renewSlot('crash', 'dead', lease), true, 'a live lease renews');
    now += lease + 1;
    if (kind === 'redis') await sleep(lease + 50); // Redis expires on its own clock
    t.same(await a.acquireSlot('crash', 'alive', 1, lease), { acquired: true, held: 1 }, 'the expired lease freed its slot');
    t.equal(await a.renewSlot('crash', 'dead', lease), false, 'an expired lease cannot be renewed');

    if (kind === 'redis') {
      const b = await make();
      t.teardown(() => b.close());
      t.same(await b.acquireSlot('crash', 'second-node', 1, 60_000), { acquired: false, held: 1 }, 'another node sees the same slots');
      await a.releaseSlot('crash', 'alive');
      t.same(await b.acquireSlot('crash', 'second-node', 1, 60_000), { acquired: true, held: 1 });
      await b.releaseSlot('crash', 'second-node');
    }
    for (const h of [...holders.slice(1), 'late']) await a.releaseSlot('k', h);
    await a.releaseSlot('other', 'x');
  });
}
