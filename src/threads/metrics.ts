/**
 * `/metrics` of a node of several workers: whichever worker takes the request asks the others
 * for their registries and sums them (prom-client's `AggregatorRegistry.aggregate`), so the
 * node's figures read as one node's. What differs by worker carries a `worker` label:
 * `parley_worker_sessions_live`, `parley_worker_event_loop_busy_seconds_total` (the time its
 * event loop was busy, from `performance.eventLoopUtilization`: the worker's share of the CPU)
 * and its JavaScript heap, `parley_worker_heap_used_bytes` and `parley_worker_heap_size_bytes`
 * (each worker has a heap of its own). The process's own metrics (CPU, memory, `nodejs_*`)
 * come from worker 0 alone.
 */
import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import client from 'prom-client';
import type { WorkerRole } from '../modules.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export function workerMetrics(metrics: Metrics, worker: WorkerRole): void {
  const labels = { worker: String(worker.index) };
  new client.Gauge({
    name: 'parley_worker_sessions_live',
    help: 'Live sessions on each worker of this node.',
    labelNames: ['worker'],
    registers: [metrics.registry],
    // The supervisor's gauge is this worker's own count: read at scrape time.
    async collect() {
      this.set(labels, (await metrics.registry.getSingleMetric('parley_sessions_live')?.get())?.values[0]?.value ?? 0);
    },
  });
  new client.Gauge({
    name: 'parley_worker_event_loop_busy_seconds_total',
    help: 'Time each worker\'s event loop was busy since it started (its share of the CPU).',
    labelNames: ['worker'],
    registers: [metrics.registry],
    collect() {
      this.set(labels, performance.eventLoopUtilization().active / 1000);
    },
  });
  // Each worker's own heap: the process's `nodejs_*` heap metrics are worker 0's.
  const heap = [
    ['parley_worker_heap_used_bytes', 'JavaScript heap in use on each worker of this node.', 'used_heap_size'],
    ['parley_worker_heap_size_bytes', 'JavaScript heap reserved on each worker of this node (used and free).', 'total_heap_size'],
  ] as const;
  for (const [name, help, field] of heap) {
    new client.Gauge({
      name,
      help,
      labelNames: ['worker'],
      registers: [metrics.registry],
      collect() {
        this.set(labels, v8.getHeapStatistics()[field]);
      },
    });
  }
  const own = () => metrics.registry.getMetricsAsJSON();
  worker.siblings.serveMetrics(own);
  metrics.gather = async () => {
    const all = [await own(), ...(await worker.siblings.gatherMetrics())];
    return client.AggregatorRegistry.aggregate(all as Parameters<typeof client.AggregatorRegistry.aggregate>[0]).metrics();
  };
}
