/**
 * The synthesis-stream machine: one per synthesis (`POST /v1/tts`, the timestamped SSE
 * variant). It knows nothing of uWebSockets.js or gRPC: the caller passes `open` (the
 * backend stream, cancelled through the signal) and `deliver` (hands one chunk to the
 * client and returns a promise while the client is slow).
 *
 *   waiting_backend ──chunk──► streaming ⇄ waiting_client
 *        │                        │              │
 *        └────────── backend.done ┴──────────────┴─► done
 *        └────────── backend.failed ─────────────────► failed
 *        └────────── cancel (client gone) ───────────► cancelled
 *
 * Backpressure: the pump does not pull the next chunk from the backend while `deliver`'s
 * promise is pending, so a slow client pauses the backend stream (gRPC flow control)
 * instead of growing the heap. Leaving `running` stops the pump, which aborts its signal;
 * the abort cancels the backend call.
 */
import { assign, createActor, fromCallback, setup, type ActorRefFrom } from 'xstate';

export interface SynthesisDeps<C> {
  /** The backend stream; aborting `signal` must cancel it. */
  open(signal: AbortSignal): AsyncIterable<C>;
  /** Hands a chunk to the client. Returns a promise when the client cannot take more yet. */
  deliver(chunk: C): void | Promise<void>;
  /** Called once after the backend's last chunk was delivered (flush encoders, end the body). */
  finish?(): void | Promise<void>;
}

export type SynthesisEvent =
  | { type: 'chunk' }
  | { type: 'client.slow' }
  | { type: 'client.ready' }
  | { type: 'backend.done'; chunks: number }
  | { type: 'backend.failed'; error: unknown; chunks: number }
  | { type: 'cancel' };

export interface SynthesisContext {
  /** Chunks pulled from the backend (set when the stream ends; 0 when cancelled). */
  chunks: number;
  /** Times the client held the stream back. */
  stalls: number;
  error?: unknown;
  /** The stream's backend and client (the actor's input). */
  deps: SynthesisDeps<unknown>;
}

/**
 * The machine, built once per process: a stream's `deps` arrive as the actor's input (building
 * the machine per stream cost ~0.15 ms of CPU, a third of the actor's whole cost).
 */
export const synthesisMachine = setup({
  types: { context: {} as SynthesisContext, events: {} as SynthesisEvent, input: {} as SynthesisDeps<unknown> },
  actors: {
    pump: fromCallback<SynthesisEvent, SynthesisDeps<unknown>>(({ sendBack, input: deps }) => {
      const ac = new AbortController();
      // Only the first chunk is an event (waiting_backend → streaming); later chunks are
      // counted here and reported with the outcome, to keep per-chunk work small.
      let chunks = 0;
      (async () => {
        for await (const chunk of deps.open(ac.signal)) {
          if (ac.signal.aborted) return;
          if (chunks++ === 0) sendBack({ type: 'chunk' });
          const pending = deps.deliver(chunk);
          if (pending) {
            sendBack({ type: 'client.slow' });
            await pending;
            if (ac.signal.aborted) return;
            sendBack({ type: 'client.ready' });
          }
        }
        if (ac.signal.aborted) return;
        await deps.finish?.();
        sendBack({ type: 'backend.done', chunks });
      })().catch((error) => {
        if (!ac.signal.aborted) sendBack({ type: 'backend.failed', error, chunks });
      });
      return () => ac.abort(Object.assign(new Error('synthesis stopped'), { name: 'AbortError' }));
    }),
  },
}).createMachine({
  id: 'synthesis',
  context: ({ input }) => ({ chunks: 0, stalls: 0, deps: input }),
  initial: 'running',
  states: {
    running: {
      invoke: { src: 'pump', input: ({ context }) => context.deps },
      initial: 'waiting_backend',
      on: {
        'backend.done': { target: 'done', actions: assign({ chunks: ({ event }) => event.chunks }) },
        'backend.failed': { target: 'failed', actions: assign({ error: ({ event }) => event.error, chunks: ({ event }) => event.chunks }) },
        cancel: { target: 'cancelled' },
      },
      states: {
        waiting_backend: { on: { chunk: { target: 'streaming' } } },
        streaming: { on: { 'client.slow': { target: 'waiting_client', actions: assign({ stalls: ({ context }) => context.stalls + 1 }) } } },
        waiting_client: { on: { 'client.ready': { target: 'streaming' } } },
      },
    },
    done: { type: 'final' },
    cancelled: { type: 'final' },
    failed: { type: 'final' },
  },
});

export type SynthesisActor = ActorRefFrom<typeof synthesisMachine>;
export type SynthesisOutcome = 'done' | 'cancelled' | 'failed';

/**
 * Starts a synthesis actor and resolves with how it ended (never rejects; a failure's
 * error is in `error`). Aborting `signal` sends `cancel`. The actor is subscribed for
 * errors, so one failing stream cannot take the process down.
 */
export function runSynthesis<C>(deps: SynthesisDeps<C>, signal?: AbortSignal, onState?: (state: string) => void): { actor: SynthesisActor; result: Promise<{ outcome: SynthesisOutcome; error?: unknown; chunks: number; stalls: number }> } {
  const actor = createActor(synthesisMachine, { input: deps as SynthesisDeps<unknown> });
  const result = new Promise<{ outcome: SynthesisOutcome; error?: unknown; chunks: number; stalls: number }>((resolve) => {
    actor.subscribe({
      next: (snap) => {
        onState?.(typeof snap.value === 'string' ? snap.value : `running.${(snap.value as { running: string }).running}`);
        if (snap.status === 'done') {
          const outcome = snap.value as SynthesisOutcome;
          resolve({ outcome, error: snap.context.error, chunks: snap.context.chunks, stalls: snap.context.stalls });
        }
      },
      error: (error) => resolve({ outcome: 'failed', error, chunks: 0, stalls: 0 }),
    });
  });
  const onAbort = () => actor.send({ type: 'cancel' });
  if (signal?.aborted) queueMicrotask(onAbort);
  else signal?.addEventListener('abort', onAbort, { once: true });
  actor.start();
  void result.finally(() => signal?.removeEventListener('abort', onAbort));
  return { actor, result };
}
