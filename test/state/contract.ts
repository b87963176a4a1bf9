import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import t from 'tap';
import { ServiceError } from '../../src/errors.ts';
import type { MessageHandler, SharedState } from '../../src/state/index.ts';

type TapTest = Parameters<Extract<Parameters<typeof t.test>[0], (...args: never[]) => unknown>>[0];

/** One implementation under test. */
export interface Backend {
  kind: 'redis' | 'memory';
  /** Instances with the same prefix share data and messages (Redis) or each is a node of its own (memory). */
  shared: boolean;
  /** Expiry also runs on a clock the test does not control (the Redis server's): advancing must wait. */
  realTimeExpiry: boolean;
  make(options: { prefix: string; now: () => number }): Promise<SharedState>;
  /** Removes whatever a test left under `prefix` (keys without expiry stay in a real Redis). */
  cleanup?(prefix: string): Promise<void>;
}

/** A start time aligned to every window the tests use. */
const T0 = 1_800_000_000_000;

/** A fresh clock and instance factory for one test; instances are closed in teardown. */
function setup(t: TapTest, backend: Backend) {
  let now = T0;
  const basePrefix = `test:${randomUUID()}:`;
  const instances: SharedState[] = [];
  t.teardown(async () => {
    await Promise.all(instances.map((s) => s.close()));
    await backend.cleanup?.(basePrefix);
  });
  return {
    prefix: basePrefix,
    async create(prefix = basePrefix): Promise<SharedState> {
      const state = await backend.make({ prefix, now: () => now });
      instances.push(state);
      return state;
    },
    /** Moves the test clock; against Redis also lets that much real time pass. */
    async advance(ms: number): Promise<void> {
      now += ms;
      if (backend.realTimeExpiry) await sleep(ms);
    },
  };
}

/** Collects the messages of one subscription. */
class Inbox {
  readonly messages: [message: string, channel: string][] = [];
  private waiters: { count: number; resolve: () => void }[] = [];
  readonly handler: MessageHandler = (message, channel) => {
    this.messages.push([message, channel]);
    this.waiters = this.waiters.filter((w) => (this.messages.length >= w.count ? (w.resolve(), false) : true));
  };
  /** Resolves once `count` messages have arrived in total. */
  until(count: number): Promise<void> {
    if (this.messages.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }
}

function resourceCounts(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

/** The behaviour every SharedState implementation must show. */
export function sharedStateContract(t: TapTest, backend: Backend): void {
  t.test('kind and ping', async (t) => {
    const s = await setup(t, backend).create();
    t.equal(s.kind, backend.kind);
    await t.resolves(s.ping());
  });

  t.test('hit counts within a fixed window and resets at its boundary', async (t) => {
    const env = setup(t, backend);
    const s = await env.create();
    await env.advance(250); // 250 ms into a 1,000 ms window
    t.same(await s.hit('ip:1', 1000, 3), { allowed: true, count: 1, retryAfterMs: 0 });
    t.same(await s.hit('ip:1', 1000, 3), { allowed: true, count: 2, retryAfterMs: 0 });
    t.same(await s.hit('ip:1', 1000, 3), { allowed: true, count: 3, retryAfterMs: 0 });
    t.same(await s.hit('ip:1', 1000, 3), { allowed: false, count: 4, retryAfterMs: 750 }, 'over the limit: retry when the window ends');
    t.same(await s.hit('ip:2', 1000, 3), { allowed: true, count: 1, retryAfterMs: 0 }, 'keys count separately');
    t.same(await s.hit('ip:1', 2000, 3), { allowed: true, count: 1, retryAfterMs: 0 }, 'window sizes count separately');
    await env.advance(500);
    t.same(await s.hit('ip:1', 1000, 3), { allowed: false, count: 5, retryAfterMs: 250 });
    await env.advance(250); // the next window begins
    t.same(await s.hit('ip:1', 1000, 3), { allowed: true, count: 1, retryAfterMs: 0 }, 'a new window starts at zero');
  });

  t.test('hit with limit 0 rejects every hit', async (t) => {
    const s = await setup(t, backend).create();
    t.same(await s.hit('k', 1000, 0), { allowed: false, count: 1, retryAfterMs: 1000 });
  });

  t.test('100 concurrent hits with limit 10 allow exactly 10', async (t) => {
    const env = setup(t, backend);
    const nodes = backend.shared ? [await env.create(), await env.create()] : [await env.create()];
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => nodes[i % nodes.length].hit('agent:a', 60_000, 10)));
    t.equal(results.filter((r) => r.allowed).length, 10);
    t.same(results.map((r) => r.count).sort((a, b) => a - b), Array.from({ length: 100 }, (_, i) => i + 1), 'every hit counted once');
    t.ok(results.filter((r) => !r.allowed).every((r) => r.retryAfterMs === 60_000));
  });

  t.test('setIfAbsent stores once until the value expires', async (t) => {
    const env = setup(t, backend);
    const s = await env.create();
    t.equal(await s.setIfAbsent('idem:1', 'first', 1000), true);
    t.equal(await s.setIfAbsent('idem:1', 'second', 1000), false);
    t.equal(await s.get('idem:1'), 'first');
    await env.advance(1100);
    t.equal(await s.get('idem:1'), null, 'expired');
    t.equal(await s.setIfAbsent('idem:1', 'third', 1000), true, 'free again after expiry');
    t.equal(await s.get('idem:1'), 'third');
  });

  t.test('50 concurrent setIfAbsent: exactly one wins', async (t) => {
    const env = setup(t, backend);
    const nodes = backend.shared ? [await env.create(), await env.create()] : [await env.create()];
    const won = await Promise.all(Array.from({ length: 50 }, (_, i) => nodes[i % nodes.length].setIfAbsent('race', `v${i}`, 10_000)));
    t.equal(won.filter(Boolean).length, 1);
    t.equal(await nodes[0].get('race'), `v${won.indexOf(true)}`, 'the winner’s value is stored');
  });

  t.test('take consumes a value exactly once', async (t) => {
    const env = setup(t, backend);
    const s = await env.create();
    t.equal(await s.take('missing'), null);
    await s.set('token:1', 'session-1', 10_000);
    t.equal(await s.take('token:1'), 'session-1');
    t.equal(await s.take('token:1'), null, 'second take finds nothing');
    t.equal(await s.get('token:1'), null);
    await s.setIfAbsent('token:2', 'session-2', 1000);
    await env.advance(1100);
    t.equal(await s.take('token:2'), null, 'an expired token cannot be taken');
  });

  t.test('concurrent takes: exactly one winner', async (t) => {
    const env = setup(t, backend);
    const nodes = backend.shared ? [await env.create(), await env.create()] : [await env.create()];
    await nodes[0].setIfAbsent('token', 'secret', 10_000);
    const taken = await Promise.all(Array.from({ length: 20 }, (_, i) => nodes[i % nodes.length].take('token')));
    t.same(taken.filter((v) => v !== null), ['secret']);
  });

  t.test('get, set, del and expiry', async (t) => {
    const env = setup(t, backend);
    const s = await env.create();
    t.equal(await s.get('a'), null);
    await s.set('a', 'forever');
    await s.set('b', 'short', 1000);
    await s.set('c', 'was short', 1000);
    await s.set('c', 'now forever'); // a plain set removes the earlier expiry
    await env.advance(400);
    t.equal(await s.get('b'), 'short', 'not yet expired');
    await env.advance(700);
    t.equal(await s.get('a'), 'forever');
    t.equal(await s.get('b'), null, 'expired');
    t.equal(await s.get('c'), 'now forever');
    t.equal(await s.del('a'), true);
    t.equal(await s.del('a'), false);
    t.equal(await s.del('b'), false, 'an expired key is not there to delete');
    t.equal(await s.get('a'), null);
  });

  t.test('incrBy counts; its expiry is set once', async (t) => {
    const env = setup(t, backend);
    const s = await env.create();
    t.equal(await s.incrBy('n', 5), 5);
    t.equal(await s.incrBy('n', -2), 3);
    t.equal(await s.get('n'), '3');
    await s.set('m', '10');
    t.equal(await s.incrBy('m', 1), 11, 'works on an integer set as a string');
    t.equal(await s.incrBy('live', 1, 1000), 1);
    await env.advance(600);
    t.equal(await s.incrBy('live', 1, 1000), 2, 'a later ttl does not extend the first');
    await env.advance(500);
    t.equal(await s.get('live'), null, 'expired with the first ttl');
    t.equal(await s.incrBy('live', 1), 1, 'counts from zero again');
    await s.set('text', 'abc');
    await t.rejects(s.incrBy('text', 1), { name: 'ServiceError', code: 'internal', message: 'Value is not an integer' });
  });

  t.test('misuse is rejected with code internal', async (t) => {
    const s = await setup(t, backend).create();
    await t.rejects(s.setIfAbsent('k', 'v', 0), { code: 'internal' });
    await t.rejects(s.set('k', 'v', -5), { code: 'internal' });
    await t.rejects(s.hit('k', 0, 1), { code: 'internal' });
    await t.rejects(s.hit('k', 1000, -1), { code: 'internal' });
    await t.rejects(s.incrBy('k', 1.5), { code: 'internal' });
  });

  t.test('publish reaches subscribers on the same instance; unsubscribe stops delivery', async (t) => {
    const s = await setup(t, backend).create();
    const first = new Inbox();
    const second = new Inbox();
    const other = new Inbox();
    const unsubscribeFirst = await s.subscribe('control', first.handler);
    await s.subscribe('control', second.handler);
    await s.subscribe('elsewhere', other.handler);
    await s.subscribe('control', () => {
      throw new Error('a failing subscriber');
    });
    await s.publish('control', 'end:1');
    await Promise.all([first.until(1), second.until(1)]);
    t.same(first.messages, [['end:1', 'control']]);
    t.same(second.messages, [['end:1', 'control']], 'every subscriber gets it, despite one that throws');

    await unsubscribeFirst();
    await unsubscribeFirst(); // a second call does nothing
    await s.publish('control', 'end:2');
    await s.publish('control', 'end:3');
    await second.until(3); // delivery is in order: when end:3 arrived, end:2 would have reached `first`
    t.same(first.messages, [['end:1', 'control']], 'no delivery after unsubscribe');
    t.same(second.messages.map(([m]) => m), ['end:1', 'end:2', 'end:3'], 'in publish order');
    t.same(other.messages, [], 'other channels see nothing');
  });

  t.test('sync: every message published before it has been delivered when it resolves', async (t) => {
    const env = setup(t, backend);
    const reader = await env.create();
    const writer = backend.shared ? await env.create() : reader;
    await reader.sync(); // nothing subscribed yet: resolves at once
    const inbox = new Inbox();
    await reader.subscribe('changed', inbox.handler);
    for (let round = 1; round <= 20; round++) {
      await writer.publish('changed', `agent:${round}`);
      // Several readers at once share one barrier; each sees the message published before it.
      await Promise.all([reader.sync(), reader.sync(), reader.sync()]);
      t.equal(inbox.messages.length, round, `round ${round}: delivered before sync resolved`);
    }
    t.same(inbox.messages.at(-1), ['agent:20', 'changed']);
  });

  t.test('the last unsubscribe of a channel ends it; subscribing again works', async (t) => {
    const s = await setup(t, backend).create();
    const a = new Inbox();
    const unsubscribe = await s.subscribe('c', a.handler);
    await unsubscribe();
    const b = new Inbox();
    await s.subscribe('c', b.handler);
    await s.publish('c', 'hello');
    await b.until(1);
    t.same(a.messages, []);
    t.same(b.messages, [['hello', 'c']]);
  });

  if (backend.shared) {
    t.test('instances with the same prefix share values and messages', async (t) => {
      const env = setup(t, backend);
      const a = await env.create();
      const b = await env.create();
      const inbox = new Inbox();
      await a.subscribe('node:a', inbox.handler);
      await b.publish('node:a', 'reconnect');
      await inbox.until(1);
      t.same(inbox.messages, [['reconnect', 'node:a']]);
      await a.set('session:1', 'node-a');
      t.equal(await b.get('session:1'), 'node-a');
      t.equal(await b.take('session:1'), 'node-a');
      t.equal(await a.get('session:1'), null);
    });
  } else {
    t.test('each instance is a node of its own', async (t) => {
      const env = setup(t, backend);
      const a = await env.create();
      const b = await env.create();
      await a.set('k', 'v');
      t.equal(await b.get('k'), null);
    });
  }

  t.test('prefixes isolate keys, counters and channels', async (t) => {
    const env = setup(t, backend);
    const p = await env.create(`${env.prefix}p:`);
    const q = await env.create(`${env.prefix}q:`);
    t.equal(p.prefix, `${env.prefix}p:`);
    await p.set('k', 'from p');
    t.equal(await q.get('k'), null);
    t.equal(await q.setIfAbsent('k', 'from q', 10_000), true);
    t.equal(await p.get('k'), 'from p');
    await p.hit('h', 60_000, 1);
    t.same(await q.hit('h', 60_000, 1), { allowed: true, count: 1, retryAfterMs: 0 });
    const inbox = new Inbox();
    await q.subscribe('ch', inbox.handler);
    await p.publish('ch', 'for p only');
    await q.publish('ch', 'for q');
    await inbox.until(1); // messages arrive in order: p's would have come first
    t.same(inbox.messages, [['for q', 'ch']]);
  });

  t.test('close releases every handle and is final', async (t) => {
    // Let anything from earlier tests finish closing before the snapshot.
    await sleep(10);
    const before = resourceCounts();
    const s = await backend.make({ prefix: `test:${randomUUID()}:`, now: Date.now });
    const inbox = new Inbox();
    await s.subscribe('c', inbox.handler);
    await s.publish('c', 'x');
    await inbox.until(1);
    await s.set('k', 'v', 60_000);
    await s.hit('h', 60_000, 10);
    await s.close();
    await s.close(); // idempotent
    const after = resourceCounts();
    const leaked = [...after].filter(([type, n]) => n > (before.get(type) ?? 0));
    t.same(leaked, [], 'no handles left open');
    await t.rejects(s.get('k'), { code: 'unavailable' });
    await t.rejects(s.publish('c', 'y'), { code: 'unavailable' });
    await t.rejects(s.subscribe('c', inbox.handler), { code: 'unavailable' });
    t.ok((await s.get('k').catch((e: unknown) => e)) instanceof ServiceError);
  });
}
