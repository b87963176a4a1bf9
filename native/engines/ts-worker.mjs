// Boots a TypeScript worker: registers tsx in this thread, then loads the entry module.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
