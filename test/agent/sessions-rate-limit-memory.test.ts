import { rateLimitSuite } from './sessions-rate-limit-suite.ts';

// 429 per agent and per IP on the in-memory shared state.
rateLimitSuite('memory');
