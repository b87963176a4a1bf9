// Acceptance: a cancelled Synthesize stops producing chunks and the engine's work stops.
import t from 'tap';
import { startBackend } from '../../native/server.ts';
import { createInferenceClient } from '../../src/inference/index.ts';

const LONG = Array.from({ length: 60 }, (_, i) => `Sentence ${i + 1} keeps the engine busy for a while.`).join(' ');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const engine of ['synthetic', 'espeak'] as const) {
  t.test(`aborting a Synthesize stops the ${engine} engine`, async (t) => {
    const backend = await startBackend({ address: '127.0.0.1:0', engine, pacing: 'realtime' });
    const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
    t.teardown(async () => {
      await client.close();
      await backend.close();
    });
    const ac = new AbortController();
    let chunks = 0;
    const err = await (async () => {
      for await (const _ of client.synthesize({ text: LONG }, { signal: ac.signal })) {
        if (++chunks === 3) ac.abort(new Error('caller went away'));
      }
    })().then(() => null, (e: Error) => e);
    t.equal(err?.message, 'caller went away', 'the iteration ends with the abort reason');
    t.equal(chunks, 3, 'no chunk arrives after the abort');
    while (backend.stats().activeCalls > 0) await sleep(10);
    const done = backend.stats().segmentsSynthesized;
    await sleep(300);
    t.equal(backend.stats().segmentsSynthesized, done, 'no more segments are synthesized after the call ends');
    t.ok(done < 60, `the engine did not synthesize the whole text (${done} of 60 segments)`);
  });
}
