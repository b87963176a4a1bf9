import t from 'tap';
import { rateLimitSuite } from './sessions-rate-limit-suite.ts';

// 429 per agent and per IP on Redis: runs when REDIS_URL is set (CI sets it).
if (!process.env.REDIS_URL) t.test('on Redis', { skip: 'REDIS_URL is not set: the public session rate limits on Redis need a Redis server' }, () => {});
else rateLimitSuite('redis');
