// Cancellation bursts and concurrency slots, against the real native backend.
//
// Rule (docs/inference.md, "Cancellation bursts"): many calls cancelled at once never cost
// the connection they share: calls in flight on it continue and a new call succeeds. The
// backend's HTTP/2 server closes a connection receiving more than ~1,000 RST_STREAM frames
// in a burst; the client keeps each connection within a reset budget.
// Rule (docs/inference.md, "The client"): a call's concurrency slot comes back when the call
// ends, is cancelled or aborted, whether or not anyone read it.
import t from 'tap';
import { startBackend } from '../../native/server.ts';
import { createInferenceClient, type SynthesisSession } from '../../src/inference/index.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(cond: () => boolean, tries = 600): Promise<boolean> {
  for (let i = 0; i < tries && !cond(); i++) await sleep(100);
  return cond();
}

/** Reads a Synthesize call to its end; 'final' when its last chunk came. */
async function playToEnd(it: AsyncIterator<{ final: boolean }>): Promise<string> {
  try {
    for (;;) {
      const r = await it.next();
      if (r.done) return 'ended without final';
      if (r.value.final) return 'final';
    }
  } catch (err) {
    return `failed: ${(err as Error).message}`;
  }
}

t.test('1,500 streams cancelled at once on one connection: the connection and its other calls survive', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', pacing: 'realtime' });
  // One connection, so every reset of the burst lands on it.
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '', backend: { channels: 1, maxConcurrentCalls: 2000 } });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const { backend: conn } = client.backendFor('speech');

  // Calls that stay in flight through the burst (about 7 s of audio each, paced in real time).
  let finished = 0;
  const survivors = await Promise.all(
    Array.from({ length: 3 }, async () => {
      const it = client.synthesize({ text: 'These calls keep playing while the others are cancelled, all at once, on the same connection.' })[Symbol.asyncIterator]();
      const first = await it.next();
      return { first, rest: playToEnd(it).finally(() => finished++) };
    }),
  );
  t.ok(survivors.every((s) => !s.first.done), 'three calls are playing');

  const N = 1500;
  const sessions: SynthesisSession[] = await Promise.all(Array.from({ length: N }, () => client.synthesizeStream({ text: '' })));
  t.ok(await until(() => backend.stats().activeCalls >= N), `the backend has all ${N} streams open`);

  t.equal(finished, 0, 'the three calls are still playing when the burst starts');
  for (const s of sessions) s.cancel();

  const fresh = await playToEnd(client.synthesize({ text: 'Still here.' })[Symbol.asyncIterator]());
  t.equal(fresh, 'final', 'a new call on the same client succeeds after the burst');
  t.same(await Promise.all(survivors.map((s) => s.rest)), ['final', 'final', 'final'], 'the calls in flight during the burst were not failed');
  t.ok(await until(() => conn.inFlight === 0), 'every slot is back');
  t.ok(await until(() => backend.stats().activeCalls === 0), 'the backend saw every cancelled call end');
});

t.test('a pool of connections: a burst across the default pool leaves every call working', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  // 1,200 calls wait for the pool's connections at once: on a loaded machine that took longer
  // than the default 1.5 s connect deadline (CI, load 13). The connect time is not this test's.
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '', backend: { maxConcurrentCalls: 2000, connectTimeoutMs: 15_000 } });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const { backend: conn } = client.backendFor('speech');
  const sessions = await Promise.all(Array.from({ length: 1200 }, () => client.synthesizeStream({ text: '' })));
  t.ok(conn.openStreams.length > 1 && conn.openStreams.every((n) => n > 0), 'calls are spread over several connections');
  for (const s of sessions) s.cancel();
  t.equal(await playToEnd(client.synthesize({ text: 'Pool is fine.' })[Symbol.asyncIterator]()), 'final', 'a new call succeeds');
  t.ok(await until(() => conn.inFlight === 0 && conn.openStreams.every((n) => n === 0)), 'every slot and stream is released');
});

t.test('cancellations over the reset budget are deferred: callers are released at once, streams end later', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', pacing: 'realtime' });
  // A budget of 5 resets, then 20 a second: most of the cancellations below wait for it.
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '', backend: { channels: 1, resetBurst: 5, resetRatePerS: 20 } });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const { backend: conn } = client.backendFor('speech');
  const sessions = await Promise.all(Array.from({ length: 40 }, () => client.synthesizeStream({})));
  const acs = Array.from({ length: 10 }, () => new AbortController());
  const plays = await Promise.all(acs.map(async (ac) => {
    const it = client.synthesize({ text: 'A call aborted while it plays.' }, { signal: ac.signal })[Symbol.asyncIterator]();
    await it.next();
    // Reads on; the abort below lands while a read waits or between reads.
    const outcome = (async () => {
      for (;;) if ((await it.next()).done) return 'not rejected';
    })().catch((e: Error) => e.name);
    return { outcome };
  }));
  for (const s of sessions) s.cancel();
  for (const ac of acs) ac.abort();
  t.equal(conn.inFlight, 0, 'every slot is back at once');
  t.same(await Promise.all(plays.map((p) => p.outcome)), Array(10).fill('AbortError'), 'aborted readers reject with the abort reason at once');
  const it = sessions[0]![Symbol.asyncIterator]();
  await t.rejects(it.next(), { status: 502, message: 'Inference backend cancelled the call' }, 'a cancelled session ends as cancelled');
  t.equal(await playToEnd(client.synthesize({ text: 'Fine.' })[Symbol.asyncIterator]()), 'final', 'a new call succeeds');
  t.ok(await until(() => conn.openStreams[0] === 0 && backend.stats().activeCalls === 0), 'the deferred streams end (by themselves or reset later)');
});

t.test('slots come back on end, cancel and abort without the stream ever being read', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '', backend: { maxConcurrentCalls: 2, queueTimeoutMs: 300 } });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const { backend: conn } = client.backendFor('speech');

  // Cancelled before any read.
  for (let round = 0; round < 3; round++) {
    const a = await client.synthesizeStream({});
    const b = await client.synthesizeStream({});
    a.cancel();
    b.cancel();
  }
  t.equal(conn.inFlight, 0, 'cancelled, never-read streams give their slots back at once');

  // Aborted before any read.
  for (let round = 0; round < 3; round++) {
    const ac = new AbortController();
    await client.synthesizeStream({}, { signal: ac.signal });
    await client.transcribeStream({ input: { sampleRateHz: 16000 } }, { signal: ac.signal });
    ac.abort();
  }
  t.equal(conn.inFlight, 0, 'aborted, never-read streams give their slots back at once');

  // Ended by the backend, never read.
  for (let round = 0; round < 3; round++) {
    const s = await client.synthesizeStream({});
    s.send('Short.');
    s.end();
    t.ok(await until(() => conn.inFlight === 0), `a stream that ended unread gave its slot back (round ${round + 1})`);
  }

  // The limit still works: two held slots make a third call wait, then 503 busy.
  const h1 = await client.synthesizeStream({});
  const h2 = await client.synthesizeStream({});
  await t.rejects(client.synthesizeStream({}), { status: 503, message: 'Inference backend busy' }, 'the limit still applies to open streams');
  h1.cancel();
  h2.cancel();
  t.equal(await playToEnd(client.synthesize({ text: 'Works.' })[Symbol.asyncIterator]()), 'final', 'calls run after all of that');
});
