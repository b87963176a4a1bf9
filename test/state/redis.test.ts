import { Redis } from 'ioredis';
import t from 'tap';
import { createSharedState } from '../../src/state/index.ts';
import { sharedStateContract } from './contract.ts';

const redisUrl = process.env.REDIS_URL;

if (!redisUrl) {
  t.test('on Redis', { skip: 'REDIS_URL is not set: the shared-state contract suite on Redis needs a Redis server' }, () => {});
} else {
  sharedStateContract(t, {
    kind: 'redis',
    shared: true,
    realTimeExpiry: true,
    make: (options) => createSharedState({ ...options, redisUrl }),
    async cleanup(prefix) {
      const redis = new Redis(redisUrl);
      try {
        for await (const keys of redis.scanStream({ match: `${prefix}*`, count: 500 })) {
          if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
        }
      } finally {
        await redis.quit();
      }
    },
  });
}
