import client from 'prom-client';

/**
 * Prometheus metrics of one server instance (a registry per instance, so tests that start
 * several servers in one process do not collide).
 */
export class Metrics {
  readonly registry = new client.Registry();
  readonly requests: client.Counter<'method' | 'route' | 'status'>;
  readonly latency: client.Histogram<'method' | 'route' | 'status'>;
  /** Resumed sockets whose frames went to the worker holding their session (`PARLEY_WORKERS`). */
  readonly relays: client.Counter;
  /**
   * On a node of several workers: every worker's metrics, summed (`src/threads/`). Unset: this
   * registry's own.
   */
  gather?: () => Promise<string>;

  constructor(opts: { processMetrics?: boolean } = {}) {
    this.requests = new client.Counter({
      name: 'parley_http_requests_total',
      help: 'HTTP requests by route template, method and status.',
      labelNames: ['method', 'route', 'status'],
      registers: [this.registry],
    });
    this.latency = new client.Histogram({
      name: 'parley_http_request_duration_seconds',
      help: 'HTTP request latency (to the end of the response) by route template, method and status.',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [this.registry],
    });
    this.relays = new client.Counter({
      name: 'parley_session_relays_total',
      help: 'Resumed sockets that reached a worker not holding their session and were relayed to the one that does.',
      registers: [this.registry],
    });
    if (opts.processMetrics !== false) client.collectDefaultMetrics({ register: this.registry, prefix: 'parley_' });
  }

  /** Each label set's counter and histogram children, so a request does not hash its labels twice. */
  private readonly series = new Map<string, { count: client.Counter.Internal; time: client.Histogram.Internal<'method' | 'route' | 'status'> }>();

  observe(method: string, route: string, status: number, durationMs: number): void {
    const key = `${method} ${status} ${route}`;
    let s = this.series.get(key);
    if (!s) {
      // Bounded by the routes (unmatched paths share one label), methods and statuses.
      const labels = { method, route, status: String(status) };
      s = { count: this.requests.labels(labels), time: this.latency.labels(labels) };
      if (this.series.size < 10_000) this.series.set(key, s);
    }
    s.count.inc();
    s.time.observe(durationMs / 1000);
  }

  text(): Promise<string> {
    return this.gather ? this.gather() : this.registry.metrics();
  }
}
