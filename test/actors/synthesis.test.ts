// The synthesis-stream machine: its states and transitions as the spec's lifecycle names them.
import t from 'tap';
import { runSynthesis } from '../../actors/synthesis.ts';
import { fakeSynthesis } from '../fixtures/synthesis-deps.ts';

const tick = () => new Promise((r) => setTimeout(r, 5));

t.test('waiting_backend → streaming ⇄ waiting_client → done', async (t) => {
  const f = fakeSynthesis(3);
  const states: string[] = [];
  const { actor, result } = runSynthesis(f, undefined, (s) => states.at(-1) !== s && states.push(s));
  t.equal(states.at(-1), 'running.waiting_backend');
  f.release();
  await tick();
  t.equal(states.at(-1), 'running.streaming', 'first chunk: streaming');
  f.slow = true;
  f.release();
  await tick();
  t.equal(states.at(-1), 'running.waiting_client', 'a slow client: waiting_client');
  f.release(); // nothing is waiting for it: the stream is not pulled while the client is slow
  await tick();
  t.same(f.delivered, [1, 2], 'no chunk pulled while waiting for the client');
  f.ready();
  await tick();
  f.release();
  await tick();
  t.same(f.delivered, [1, 2, 3], 'resumed');
  const r = await result;
  t.equal(r.outcome, 'done');
  t.ok(f.finished, 'finish ran');
  t.same(states, ['running.waiting_backend', 'running.streaming', 'running.waiting_client', 'running.streaming', 'done']);
  t.equal(r.chunks, 3);
  t.equal(r.stalls, 1);
  t.equal(actor.getSnapshot().status, 'done');
});

t.test('cancel (client gone) → cancelled, and the backend stream is aborted', async (t) => {
  const f = fakeSynthesis(5);
  const ac = new AbortController();
  const { result } = runSynthesis(f, ac.signal);
  f.release();
  await tick();
  ac.abort();
  const r = await result;
  t.equal(r.outcome, 'cancelled');
  t.ok(f.aborted, 'the signal reached the backend stream');
  t.notOk(f.finished);
});

t.test('cancel while waiting for a slow client → cancelled', async (t) => {
  const f = fakeSynthesis(5, { auto: true });
  f.slow = true;
  const ac = new AbortController();
  const states: string[] = [];
  const { result } = runSynthesis(f, ac.signal, (s) => states.push(s));
  await tick();
  t.equal(states.at(-1), 'running.waiting_client');
  ac.abort();
  t.equal((await result).outcome, 'cancelled');
  t.ok(f.aborted);
});

t.test('a backend failure → failed, with the error', async (t) => {
  const f = fakeSynthesis(5, { auto: true, failAt: 3 });
  const r = await runSynthesis(f).result;
  t.equal(r.outcome, 'failed');
  t.match(String(r.error), /backend broke/);
  t.same(f.delivered, [1, 2]);
});

t.test('a failure before any chunk → failed from waiting_backend', async (t) => {
  const f = fakeSynthesis(1, { auto: true, failAt: 1 });
  const states: string[] = [];
  const r = await runSynthesis(f, undefined, (s) => states.push(s)).result;
  t.equal(r.outcome, 'failed');
  t.same(states, ['running.waiting_backend', 'failed']);
});
