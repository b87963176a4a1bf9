/**
 * OpenTelemetry tracing for the inference endpoints (docs/api/speech.md "Tracing"; D-OBS-1).
 *
 * A request's `traceparent` (W3C) is extracted with the standard propagator: a valid one
 * makes the request span a child of the caller's span (same trace id); a missing or
 * invalid one starts a new trace. The span of the backend call is a child of the request
 * span, and its own traceparent travels to the backend in gRPC metadata.
 *
 * No global registration and no context manager: every Tracing owns its provider and
 * contexts are passed explicitly, so several platforms in one process (tests) never mix
 * their spans, and tracing changes nothing else a request does.
 *
 * Export: OTLP over HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-specific
 * variable) is set; tests add an in-memory exporter with `captureSpansForTests()`.
 */
import { tracingFromEnv, type Env, type TracingConfig } from '../config.ts';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';

const propagator = new W3CTraceContextPropagator();
const getter = { get: (c: Record<string, string>, k: string) => c[k], keys: (c: Record<string, string>) => Object.keys(c) };
const setter = { set: (c: Record<string, string>, k: string, v: string) => void (c[k] = v) };

let testExporter: InMemorySpanExporter | undefined;

/** Makes every Tracing created from now on also export into one in-memory exporter (tests). */
export function captureSpansForTests(): InMemorySpanExporter {
  testExporter ??= new InMemorySpanExporter();
  return testExporter;
}

/** One request's span and how to continue it. */
export interface RequestSpan {
  span: Span;
  /** The trace id of this request (the caller's when its traceparent was valid). */
  traceId: string;
  /** Starts a child span (e.g. the backend call); returns it and the traceparent to send on. */
  child(name: string, attributes?: Record<string, string | number | boolean>): { span: Span; traceparent: string };
  /** Ends the request span, recording an error status when given. */
  end(error?: { status: number; message: string }): void;
}

export interface Tracing {
  readonly tracer: Tracer;
  /** A server span for an incoming request, continuing `traceparent` when valid. */
  startRequest(name: string, traceparent: string | undefined, attributes?: Record<string, string | number | boolean>): RequestSpan;
  /** Flushes and stops exporting. */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** Where spans go and the service name (`Config.tracing`); unset: not exported, `parley`. */
  config?: Partial<TracingConfig>;
  /** Read the `OTEL_*` variables from these instead (tests: `{}`). */
  env?: Env;
  serviceName?: string;
  /** Extra processors (tests). */
  processors?: SpanProcessor[];
}

/** The W3C `traceparent` of a span context. */
export function traceparentOf(ctx: Context): string {
  const carrier: Record<string, string> = {};
  propagator.inject(ctx, carrier, setter);
  return carrier.traceparent ?? '';
}

export function startTracing(opts: TracingOptions = {}): Tracing {
  const cfg = opts.env ? tracingFromEnv(opts.env) : (opts.config ?? {});
  const processors: SpanProcessor[] = [...(opts.processors ?? [])];
  if (cfg.tracesUrl) processors.push(new BatchSpanProcessor(new LazyOtlpExporter(cfg.tracesUrl)));
  if (testExporter) processors.push(new SimpleSpanProcessor(testExporter));
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': opts.serviceName ?? cfg.serviceName ?? 'parley' }),
    spanProcessors: processors,
  });
  const tracer = provider.getTracer('parley');
  if (processors.length === 0) return untraced(tracer, () => provider.shutdown());

  return {
    tracer,
    startRequest(name, header, attributes) {
      const parent = header ? propagator.extract(ROOT_CONTEXT, { traceparent: header }, getter) : ROOT_CONTEXT;
      const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
      const ctx = trace.setSpan(parent, span);
      let ended = false;
      return {
        span,
        traceId: span.spanContext().traceId,
        child(childName, attrs) {
          const c = tracer.startSpan(childName, { kind: SpanKind.CLIENT, attributes: attrs }, ctx);
          return { span: c, traceparent: traceparentOf(trace.setSpan(ROOT_CONTEXT, c)) };
        },
        end(error) {
          if (ended) return;
          ended = true;
          if (error) {
            span.setAttribute('http.response.status_code', error.status);
            span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
          }
          span.end();
        },
      };
    },
    shutdown: () => provider.shutdown(),
  };
}

/**
 * Tracing with nowhere to export to (no endpoint, not a test): the same trace ids and
 * `traceparent`s travel (a caller's trace continues, the backend call gets a child span id),
 * but the spans are non-recording: nothing is timed, kept or sampled. A recording span with
 * no processor cost ~0.1 ms of CPU per synthesis on the way to its first audio, for nothing
 * (bench/README.md, "tts.ts: time to first audio").
 */
function untraced(tracer: Tracer, shutdown: () => Promise<void>): Tracing {
  return {
    tracer,
    startRequest(_name, header) {
      const parent = header ? trace.getSpanContext(propagator.extract(ROOT_CONTEXT, { traceparent: header }, getter)) : undefined;
      const traceId = parent?.traceId ?? randomHex(32);
      // As the SDK's default sampler (parent-based, else always on): the caller's flags, else sampled.
      const traceFlags = parent?.traceFlags ?? TraceFlags.SAMPLED;
      const span = trace.wrapSpanContext({ traceId, spanId: randomHex(16), traceFlags });
      return {
        span,
        traceId,
        child() {
          const c = trace.wrapSpanContext({ traceId, spanId: randomHex(16), traceFlags });
          return { span: c, traceparent: `00-${traceId}-${c.spanContext().spanId}-${traceFlags.toString(16).padStart(2, '0')}` };
        },
        end() {},
      };
    },
    shutdown,
  };
}

/** `n` random hex digits, not all zero (a valid W3C trace or span id), as the SDK's id generator does it. */
function randomHex(n: number): string {
  let s = '';
  for (let i = 0; i < n; i += 8) s += (Math.floor(Math.random() * 0x100000000) >>> 0).toString(16).padStart(8, '0');
  s = s.slice(0, n);
  return /^0+$/.test(s) ? randomHex(n) : s;
}

/**
 * The OTLP/HTTP exporter, imported when the first batch leaves: only a platform with an
 * endpoint configured loads it (it adds ~0.1 s to every start otherwise).
 */
class LazyOtlpExporter implements SpanExporter {
  private readonly exporter: Promise<SpanExporter>;
  constructor(url: string) {
    this.exporter = import('@opentelemetry/exporter-trace-otlp-http').then((m) => new m.OTLPTraceExporter({ url }));
    this.exporter.catch(() => {}); // reported by export()
  }
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.exporter.then((e) => e.export(spans, done), (error: Error) => done({ code: ExportResultCode.FAILED, error }));
  }
  async shutdown(): Promise<void> {
    await (await this.exporter.catch(() => undefined))?.shutdown();
  }
  async forceFlush(): Promise<void> {
    await (await this.exporter.catch(() => undefined))?.forceFlush?.();
  }
}
