import v8 from 'node:v8';

/**
 * Sets how much the old generation may grow beyond what survived a full collection before the
 * next one starts (`PARLEY_HEAP_GROWTH_PERCENT`; 0 leaves V8's own heuristic), and how much of
 * that room it uses before V8 starts marking for that collection (`PARLEY_GC_MARKING_START_PERCENT`;
 * 0 leaves V8's own rule, which starts as soon as the room left is below the young generation's
 * size). V8 reads both flags each time it sets the next limit or checks it, so setting them now
 * applies from the next collection. Process-wide: every worker thread shares the flags.
 */
export function applyHeapGrowth(percent: number, markingStartPercent = 0): void {
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
  v8.setFlagsFromString(`--incremental-marking-soft-trigger=${markingStartPercent}`);
}
