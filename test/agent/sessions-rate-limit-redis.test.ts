import { rateLimitSuite } from './sessions-rate-limit-suite.ts';

// 429 per agent and per IP on Redis (REDIS_URL, else the local Redis of every project machine).
rateLimitSuite('redis');
