// Acceptance: the backend process dying mid-stream gives the caller a clean 502/503, and
// the client recovers once the (supervised) backend is back.
import t from 'tap';
import { ServiceError } from '../../src/errors.ts';
import { createInferenceClient, spawnNativeBackend } from '../../src/inference/index.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('backend dies mid-stream, is restarted, and the client recovers', async (t) => {
  const events: string[] = [];
  const backend = await spawnNativeBackend({
    engine: 'synthetic',
    env: { PARLEY_SYNTHETIC_PACING: 'realtime' },
    onEvent: (e) => events.push(e.type),
    stderr: 'ignore',
  });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '', backend: { connectTimeoutMs: 300 } });
  t.teardown(async () => {
    await client.close();
    await backend.stop();
  });

  // Kill the backend while a stream is in flight. On a loaded machine a stream can fail on
  // its own before the kill (overload); then try again, so the kill really is mid-stream.
  let err: unknown = null;
  let killed = false;
  for (let attempt = 0; attempt < 5 && !killed; attempt++) {
    let chunks = 0;
    err = await (async () => {
      for await (const _ of client.synthesize({ text: 'A sentence that takes a while to play. '.repeat(10) })) {
        if (++chunks === 2) {
          killed = true;
          process.kill(backend.status().pid!, 'SIGKILL');
        }
      }
    })().then(() => null, (e: unknown) => e);
    if (!killed) await sleep(500);
  }
  t.ok(killed, 'the backend was killed mid-stream');
  t.ok(err instanceof ServiceError, 'the stream ends with a ServiceError');
  t.ok([502, 503].includes((err as ServiceError).status), `status is 502 or 503 (${(err as ServiceError).status})`);

  // While it is down (or starting), calls fail fast with 503; then they succeed again.
  let recovered = false;
  const statuses = new Set<number>();
  for (let i = 0; i < 200 && !recovered; i++) {
    try {
      for await (const c of client.synthesize({ text: 'Back again.' })) if (c.final) recovered = true;
    } catch (e) {
      statuses.add((e as ServiceError).status);
      await sleep(100);
    }
  }
  t.ok(recovered, 'a call succeeds once the backend is back');
  t.ok([...statuses].every((s) => s === 503 || s === 502), 'failures meanwhile are 502/503 only');
  // The supervisor learns the child is ready from its stdout line, which may trail the port opening.
  for (let i = 0; i < 100 && !backend.status().running; i++) await sleep(100);
  t.ok(backend.status().restarts >= 1 && backend.status().running, 'the supervisor restarted the backend', { status: backend.status() });
  t.same(events.slice(0, 3), ['running', 'exited', 'restarting'], 'the supervisor reports the exit', { events });
});
