import type { HttpApp } from './app.ts';
import { buildOpenApi } from './openapi.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export type ComponentStatus = { status: 'ok' | 'degraded' | 'down'; detail?: string };
export type HealthCheck = () => Promise<ComponentStatus>;
export interface HealthReport {
  status: 'ok' | 'degraded' | 'down';
  components: Record<string, ComponentStatus>;
  requiredOk: boolean;
}

/** Components that `/health` and `/ready` ask: database, shared state, backends, the HTTP binding. */
export class Health {
  private checks = new Map<string, { check: HealthCheck; required: boolean }>();
  ready = false;

  register(name: string, check: HealthCheck, opts: { requiredForReady?: boolean } = {}): void {
    this.checks.set(name, { check, required: opts.requiredForReady ?? true });
    // A report that predates this component would hide it: the next call runs the checks.
    this.done = undefined;
  }

  /**
   * A component changed state (the native backend exited): the next call runs the checks
   * instead of serving the last report, so a crash that recovers within `maxAgeMs` is seen.
   */
  changed(): void {
    this.done = undefined;
  }

  private done?: { at: number; value: HealthReport };
  private inflight?: Promise<HealthReport>;

  /**
   * The components' status. The last finished report is served at once and refreshed in the
   * background when older than `maxAgeMs` (default 1 s); concurrent callers share one run.
   * So a slow dependency (a backend that does not answer) never makes liveness slow; only
   * the very first call waits for the checks.
   */
  async report(maxAgeMs = 1000): Promise<HealthReport> {
    const refresh = () =>
      (this.inflight ??= this.run().then((value) => {
        this.done = { at: Date.now(), value };
        this.inflight = undefined;
        return value;
      }));
    if (!this.done) return refresh();
    if (Date.now() - this.done.at >= maxAgeMs) void refresh();
    return this.done.value;
  }

  private async run(timeoutMs = 2000): Promise<HealthReport> {
    const components: Record<string, ComponentStatus> = {};
    let requiredOk = true;
    await Promise.all(
      [...this.checks].map(async ([name, { check, required }]) => {
        let s: ComponentStatus;
        try {
          s = await withTimeout(check(), timeoutMs);
        } catch (err) {
          s = { status: 'down', detail: err instanceof Error ? err.message : String(err) };
        }
        components[name] = s;
        if (required && s.status === 'down') requiredOk = false;
      }),
    );
    const values = Object.values(components);
    const status = values.some((c) => c.status === 'down') ? 'down' : values.some((c) => c.status === 'degraded') ? 'degraded' : 'ok';
    return { status, components, requiredOk };
  }
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then((v) => (clearTimeout(t), resolve(v)), (e) => (clearTimeout(t), reject(e)));
  });
}

/** /health (liveness and components), /ready, /metrics, /openapi.json. */
export function mountOpsRoutes(http: HttpApp, health: Health, metrics: Metrics): void {
  http.route({
    method: 'GET', path: '/health', auth: 'none',
    handler: async () => {
      const r = await health.report();
      // Liveness: the process answers (200) even when a dependency is down; the body says which.
      return { status: 200, body: { status: r.status, components: r.components } };
    },
  });
  http.route({
    method: 'GET', path: '/ready', auth: 'none',
    handler: async () => {
      if (!health.ready) return { status: 503, body: { status: 503, message: 'Starting: migrations have not run yet' } };
      const r = await health.report();
      if (!r.requiredOk) return { status: 503, body: { status: 503, message: 'A dependency is unavailable', components: r.components } };
      return { status: 200, body: { status: 'ready', components: r.components } };
    },
  });
  http.route({
    method: 'GET', path: '/metrics', auth: 'none',
    handler: async (ctx) => {
      ctx.reply.send(200, await metrics.text(), { 'Content-Type': metrics.registry.contentType });
    },
  });
  let cached: string | undefined;
  http.route({
    method: 'GET', path: '/openapi.json', auth: 'none',
    handler: (ctx) => {
      cached ??= JSON.stringify(buildOpenApi(http.router.specs));
      ctx.reply.send(200, cached, { 'Content-Type': 'application/json' });
    },
  });
}
