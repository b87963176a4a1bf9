import t from 'tap';
import { concurrencySuite } from './concurrency-suite.ts';

// The speech concurrency cap on Redis, shared by every node: runs when REDIS_URL is set (CI sets
// it), like the shared-state contract suite (test/state/redis.test.ts).
if (!process.env.REDIS_URL) {
  t.plan(1);
  t.pass('REDIS_URL is not set: the Redis speech concurrency suite was not run');
} else {
  concurrencySuite('redis');
}
