import v8 from 'node:v8';

/**
 * Sets how much the old generation may grow beyond what survived a full collection before the
 * next one starts (`PARLEY_HEAP_GROWTH_PERCENT`; 0 leaves V8's own heuristic). V8 reads the
 * flag each time it sets the next limit, so setting it now applies from the next collection.
 * Process-wide: every worker thread shares the flag.
 */
export function applyHeapGrowth(percent: number): void {
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
