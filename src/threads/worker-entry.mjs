// A worker thread of a node of several (src/threads/primary.ts): Node starts a worker from a
// JavaScript file, so this one registers tsx's loader (as bin/parley.js does) and runs worker.ts.
import { register } from 'tsx/esm/api';

register();
await import('./worker.ts');
