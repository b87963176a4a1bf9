/**
 * A worker's links to the other workers of its node (`PARLEY_WORKERS`, docs/deploy.md "Several
 * event loops"): one `MessagePort` per pair of workers, made by the main thread
 * (`src/threads/primary.ts`). Over them a worker asks the others for their metrics (so `/metrics`
 * answers for the whole node whichever worker takes the request) and hands a sibling the frames
 * of a resumed socket whose session that sibling holds (`src/transport/relay.ts`).
 */
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/** What the main thread gives each worker (through `workerData`). */
export interface WorkerSetup {
  index: number;
  count: number;
  /** The port every worker listens on (the main thread claimed it first). */
  port: number;
  /** Sessions and admissions of the whole node: `Int32Array` over it, index 0. */
  capacity: SharedArrayBuffer;
  /** One port per other worker, by that worker's index. */
  ports: Record<number, MessagePort>;
}

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

type PairMessage =
  | { kind: 'metrics?'; id: number }
  | { kind: 'metrics'; id: number; json: MetricsJson }
  | { kind: 'relay'; sessionId: string; secret: string; port: MessagePort };

/** How long a worker waits for a sibling's metrics before answering without them. */
const METRICS_TIMEOUT_MS = 2_000;

export class Siblings {
  private nextId = 1;
  private readonly waiting = new Map<number, (json: MetricsJson | null) => void>();
  private metricsSource: () => Promise<MetricsJson> = async () => [];
  private relayHandler: (sessionId: string, secret: string, port: MessagePort) => void = (_s, _x, port) => port.close();
  private readonly nodeIds = new Map<string, number>();

  constructor(
    readonly index: number,
    readonly count: number,
    private readonly ports: Record<number, MessagePort>,
  ) {
    for (const [i, port] of Object.entries(ports)) {
      port.on('message', (m: PairMessage) => this.receive(Number(i), m));
      port.on('close', () => this.waiting.forEach((done) => done(null)));
    }
  }

  /** The node ids of the workers (`<node id>/w<index>`), so a registry owner can be recognised. */
  nameNodes(nodeIdOf: (index: number) => string): void {
    for (let i = 0; i < this.count; i++) if (i !== this.index) this.nodeIds.set(nodeIdOf(i), i);
  }

  /** The index of the sibling worker that is `nodeId`, or undefined (another node, or this worker). */
  workerOf(nodeId: string): number | undefined {
    return this.nodeIds.get(nodeId);
  }

  /** What this worker answers when a sibling asks for its metrics. */
  serveMetrics(source: () => Promise<MetricsJson>): void {
    this.metricsSource = source;
  }

  /** Every sibling's metrics (a sibling that does not answer in time is left out). */
  async gatherMetrics(): Promise<MetricsJson[]> {
    const asks = Object.values(this.ports).map((port) => new Promise<MetricsJson | null>((resolve) => {
      const id = this.nextId++;
      const timer = setTimeout(() => done(null), METRICS_TIMEOUT_MS);
      const done = (json: MetricsJson | null) => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve(json);
      };
      this.waiting.set(id, done);
      port.postMessage({ kind: 'metrics?', id } satisfies PairMessage);
    }));
    return (await Promise.all(asks)).filter((j): j is MetricsJson => j !== null);
  }

  /** What this worker does with a socket a sibling relays to it (the session lives here). */
  serveRelays(handler: (sessionId: string, secret: string, port: MessagePort) => void): void {
    this.relayHandler = handler;
  }

  /** A port to the sibling `worker` carrying one resumed socket's frames to its session. */
  relay(worker: number, sessionId: string, secret: string): MessagePort {
    const { port1, port2 } = new MessageChannel();
    this.ports[worker]!.postMessage({ kind: 'relay', sessionId, secret, port: port2 } satisfies PairMessage, [port2]);
    return port1;
  }

  private receive(from: number, m: PairMessage): void {
    if (m.kind === 'metrics?') {
      this.metricsSource().then(
        (json) => this.ports[from]?.postMessage({ kind: 'metrics', id: m.id, json } satisfies PairMessage),
        () => this.ports[from]?.postMessage({ kind: 'metrics', id: m.id, json: [] } satisfies PairMessage),
      );
    } else if (m.kind === 'metrics') {
      this.waiting.get(m.id)?.(m.json);
    } else if (m.kind === 'relay') {
      this.relayHandler(m.sessionId, m.secret, m.port);
    }
  }

  /** Closes the links (at the end of the worker's shutdown). */
  close(): void {
    for (const port of Object.values(this.ports)) port.close();
  }
}
