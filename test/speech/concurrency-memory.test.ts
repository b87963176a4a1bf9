import { concurrencySuite } from './concurrency-suite.ts';

// The speech concurrency cap on the in-memory shared state (one node).
concurrencySuite('memory');
