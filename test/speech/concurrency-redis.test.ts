import t from 'tap';
import { concurrencySuite } from './concurrency-suite.ts';

// The speech concurrency cap on Redis, shared by every node: runs when REDIS_URL is set (CI sets
// it), like the shared-state contract suite (test/state/redis.test.ts).
if (!process.env.REDIS_URL) {
  t.test('on Redis', { skip: 'REDIS_URL is not set: the speech concurrency suite on Redis needs a Redis server' }, () => {});
} else {
  concurrencySuite('redis');
}
