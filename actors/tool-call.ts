/**
 * Tool calls in a conversation: one xstate actor per call, a child of its session's actor
 * (`tool.<callId>`), and the registry a session keeps of them (`ToolCalls`).
 *
 *   running ──execute settles──► completed | failed      (reported to the session: `tool.settled`)
 *      └────the session stops it (turn interrupted, session ended)    (stopping aborts `execute`)
 *
 * The registry decides how a call runs (docs/api/tools.md "Execution modes" and
 * "Background tool calls"):
 * - `blocking`: the turn waits for the outcome; the model is called again with it.
 * - `fire_and_forget`: the model is told at once that the request was dispatched; the outcome
 *   is only recorded (history, tool events).
 * - `background`: the model is told at once that the call runs in the background; the session
 *   announces the outcome at its next natural pause. At most `MAX_BACKGROUND_IN_FLIGHT` per
 *   conversation; one more fails at once, as an error the model can react to.
 * In text-only runs every webhook tool runs as `blocking`. Ending the session stops every
 * call still running (its children); each keeps its `tool_call` item and gets a `tool_result`
 * with status `cancelled`.
 *
 * Every started call gets exactly one terminal tool event (`tool.completed` or `tool.failed`),
 * sent only when the session's `tool_events` is on; event payloads are cut at 4 KB, history
 * payloads at 256 KB (docs/api/sessions.md).
 */
import { assign, fromPromise, sendParent, setup } from 'xstate';
import type { Clock } from './clock.ts';
import type { ServerMessage, SessionItem, SessionTool, ToolOutcome, ToolSpec } from './types.ts';

/** Background calls one conversation may have in flight (docs/api/tools.md "Limits"). */
export const MAX_BACKGROUND_IN_FLIGHT = 10;
/** Tool payloads in `tool.*` events are cut here (`inputTruncated` / `outputTruncated`). */
export const TOOL_EVENT_PAYLOAD_BYTES = 4 * 1024;
/** `output` and `error` in the history are cut here (`output_truncated`). */
export const TOOL_HISTORY_PAYLOAD_BYTES = 256 * 1024;

type ToolMode = SessionTool['mode'];

export interface ToolCallInput {
  callId: string;
  argumentsJson: string;
  tool: SessionTool;
  /** How this call runs: the tool's mode, or `blocking` for a webhook tool in a text-only run. */
  mode: ToolMode;
}

/** What a tool call tells its session once `execute` has settled. */
export interface ToolSettled {
  type: 'tool.settled';
  callId: string;
  toolName: string;
  argumentsJson: string;
  mode: ToolMode;
  outcome: ToolOutcome;
}

interface ToolCallContext extends ToolCallInput {
  outcome: ToolOutcome | null;
}

const failedWith = (error: string): ToolOutcome => ({ status: 'failed', output: null, error, latencyMs: 0 });

/**
 * One tool call, spawned by its session. `latencyMs` is whatever `execute` measured. Stopping
 * the actor aborts `execute`'s signal; a stopped call reports nothing (the registry has already
 * recorded it as cancelled).
 */
export const toolCallMachine = setup({
  types: { input: {} as ToolCallInput, context: {} as ToolCallContext },
  actors: {
    execute: fromPromise<ToolOutcome, ToolCallInput>(({ input, signal }) => input.tool.execute(input.argumentsJson, { callId: input.callId, signal })),
  },
  actions: {
    report: sendParent(({ context }): ToolSettled => ({
      type: 'tool.settled', callId: context.callId, toolName: context.tool.spec.name, argumentsJson: context.argumentsJson, mode: context.mode, outcome: context.outcome!,
    })),
  },
}).createMachine({
  id: 'toolCall',
  context: ({ input }) => ({ ...input, outcome: null }),
  initial: 'running',
  states: {
    running: {
      invoke: {
        src: 'execute',
        input: ({ context }) => context,
        onDone: [
          { guard: ({ event }) => event.output.status === 'completed', target: 'completed', actions: assign({ outcome: ({ event }) => event.output }) },
          // `execute` never reports `cancelled` on its own: a tool that gave up is a failure.
          { target: 'failed', actions: assign({ outcome: ({ event }) => ({ ...event.output, status: 'failed' as const }) }) },
        ],
        onError: { target: 'failed', actions: assign({ outcome: ({ event }) => failedWith(event.error instanceof Error ? event.error.message : 'Tool failed') }) },
      },
    },
    completed: { type: 'final', entry: 'report' },
    failed: { type: 'final', entry: 'report' },
  },
});

/** docs/api/sessions.md `tool_source`. */
export function toolSourceOf(tool: SessionTool | null): string {
  if (!tool) return 'unknown';
  return tool.source === 'system' ? 'builtin' : tool.source;
}

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

function cut(s: string, bytes: number): { text: string; truncated: boolean } {
  if (s.length * 3 <= bytes) return { text: s, truncated: false };
  const all = utf8.encode(s);
  if (all.length <= bytes) return { text: s, truncated: false };
  // Cut on a character boundary: a split trailing character decodes as U+FFFD and is dropped.
  let text = fromUtf8.decode(all.subarray(0, bytes));
  if (text.endsWith('\uFFFD')) text = text.slice(0, -1);
  return { text, truncated: true };
}

export interface ToolCallsDeps {
  tools: SessionTool[];
  output: { message(m: ServerMessage): void };
  record(items: SessionItem[]): void;
  clock: Clock;
  toolEvents: boolean;
  /** Starts the call's actor as a child of the session (`tool.<callId>`); it reports `tool.settled`. */
  spawn(input: ToolCallInput): void;
  /** Stops the call's actor (aborting `execute`); nothing once it is gone. */
  stop(callId: string): void;
}

export interface BackgroundResult {
  callId: string;
  toolName: string;
  argumentsJson: string;
  /** What the model is told (the outcome as shaped by the tool's `error_handling`). */
  content: string;
}

/** A call the registry started, as the turn that made it sees it. */
export interface StartedCall {
  callId: string;
  toolName: string;
  mode: ToolMode;
  /**
   * What the model is told in this turn: for `blocking`, once the outcome is in; for the
   * others, at once (dispatched, running in the background, or why it failed to start).
   */
  content: Promise<string>;
  /** Settles with the outcome (immediately for calls that could not start). */
  outcome: Promise<ToolOutcome>;
}

/** What the model sees of an outcome (the tool already shaped `output` by its `error_handling`). */
export function contentOf(o: ToolOutcome): string {
  if (o.output !== null) return o.output;
  if (o.status === 'completed') return JSON.stringify({ status: 'ok' });
  return JSON.stringify({ error: o.error ?? 'The tool call failed.' });
}

/** What the model is told at once of a fire-and-forget call (kept short: models read it aloud). */
export const DISPATCHED = JSON.stringify({ status: 'dispatched' });
/** What the model is told at once of a background call; the result follows at a pause. */
export const RUNNING = JSON.stringify({ status: 'running in background' });
export const TOO_MANY_BACKGROUND = `Too many background calls in flight (${MAX_BACKGROUND_IN_FLIGHT}); try later`;

/** A call whose actor runs: what its result is recorded with, and the turn that waits for it. */
interface Running {
  toolName: string;
  source: string;
  mode: ToolMode;
  turnId: number;
  startedAt: number;
  resolve(o: ToolOutcome): void;
}

/**
 * The tool calls of one session: ids, the `tool_call` and `tool_result` records and events,
 * and the promises a turn waits on. The calls themselves run as children of the session's
 * actor; the session hands their reports to `settle`.
 */
export class ToolCalls {
  private readonly byName = new Map<string, SessionTool>();
  private readonly running = new Map<string, Running>();
  private readonly usedIds = new Set<string>();
  private closed = false;

  constructor(private readonly deps: ToolCallsDeps) {
    for (const t of deps.tools) if (!this.byName.has(t.spec.name)) this.byName.set(t.spec.name, t);
  }

  /** The tools offered to the model. */
  specs(): ToolSpec[] {
    return [...this.byName.values()].map((t) => t.spec);
  }

  /** Background calls in flight. */
  private get backgroundInFlight(): number {
    let n = 0;
    for (const r of this.running.values()) if (r.mode === 'background') n++;
    return n;
  }

  /** A call id unique in this session (the model's own id unless it was used before). */
  private uniqueId(id: string): string {
    let out = id || 'call';
    for (let n = 2; this.usedIds.has(out); n++) out = `${id}_${n}`;
    this.usedIds.add(out);
    return out;
  }

  private now(): string {
    return new Date(this.deps.clock.now()).toISOString();
  }

  private started(callId: string, toolName: string, source: string, argumentsJson: string, turnId: number) {
    this.deps.record([{ type: 'tool_call', payload: { call_id: callId, tool_name: toolName, tool_source: source, input: argumentsJson, turn_id: turnId, created_at: this.now() } }]);
    if (!this.deps.toolEvents) return;
    const input = cut(argumentsJson, TOOL_EVENT_PAYLOAD_BYTES);
    this.deps.output.message({ topic: 'agent-event', type: 'tool.started', callId, toolName, toolSource: source, input: input.text, ...(input.truncated ? { inputTruncated: true } : {}) });
  }

  private settled(callId: string, toolName: string, source: string, o: ToolOutcome, turnId: number) {
    const output = o.output === null ? null : cut(o.output, TOOL_HISTORY_PAYLOAD_BYTES);
    const error = o.error === null ? null : cut(o.error, TOOL_HISTORY_PAYLOAD_BYTES).text;
    this.deps.record([{
      type: 'tool_result',
      payload: {
        call_id: callId, tool_name: toolName, tool_source: source, status: o.status, output: output?.text ?? null,
        output_truncated: (output?.truncated ?? false) || o.outputTruncated === true, error, latency_ms: Math.round(o.latencyMs), turn_id: turnId, created_at: this.now(),
      },
    }]);
    if (!this.deps.toolEvents) return;
    if (o.status === 'completed') {
      const out = cut(o.output ?? '', TOOL_EVENT_PAYLOAD_BYTES);
      this.deps.output.message({ topic: 'agent-event', type: 'tool.completed', callId, toolName, toolSource: source, output: out.text, ...(out.truncated || o.outputTruncated ? { outputTruncated: true } : {}) });
    } else {
      this.deps.output.message({ topic: 'agent-event', type: 'tool.failed', callId, toolName, toolSource: source, error: cut(o.error ?? 'The tool call failed.', TOOL_EVENT_PAYLOAD_BYTES).text });
    }
  }

  /**
   * Starts the model's call `id` of `name`. `textOnly`: the turn is a text-only run, so
   * webhook tools run as `blocking`. A turn that is interrupted cancels its blocking calls
   * through `cancel`; the others outlive the turn.
   */
  start(call: { id: string; name: string; argumentsJson: string }, o: { turnId: number; textOnly: boolean }): StartedCall {
    const callId = this.uniqueId(call.id);
    const tool = this.byName.get(call.name) ?? null;
    const source = toolSourceOf(tool);
    this.started(callId, call.name, source, call.argumentsJson, o.turnId);
    const refuse = (mode: ToolMode, error: string): StartedCall => {
      const outcome: ToolOutcome = { status: 'failed', output: null, error, latencyMs: 0 };
      this.settled(callId, call.name, source, outcome, o.turnId);
      return { callId, toolName: call.name, mode, content: Promise.resolve(contentOf(outcome)), outcome: Promise.resolve(outcome) };
    };
    if (!tool) return refuse('blocking', `Unknown tool: ${call.name}`);
    const mode: ToolMode = o.textOnly && tool.source === 'webhook' ? 'blocking' : tool.mode;
    if (this.closed) return refuse(mode, 'Cancelled: the conversation ended');
    if (mode === 'background' && this.backgroundInFlight >= MAX_BACKGROUND_IN_FLIGHT) return refuse(mode, TOO_MANY_BACKGROUND);

    const outcome = new Promise<ToolOutcome>((resolve) => {
      this.running.set(callId, { toolName: call.name, source, mode, turnId: o.turnId, startedAt: this.deps.clock.now(), resolve });
    });
    this.deps.spawn({ callId, argumentsJson: call.argumentsJson, tool, mode });
    const content = mode === 'blocking' ? outcome.then(contentOf) : Promise.resolve(mode === 'background' ? RUNNING : DISPATCHED);
    return { callId, toolName: call.name, mode, content, outcome };
  }

  /** The session's account of a call's report (`tool.settled`); nothing for a call already cancelled. */
  settle(callId: string, o: ToolOutcome): void {
    const r = this.running.get(callId);
    if (!r) return;
    this.running.delete(callId);
    this.settled(callId, r.toolName, r.source, o, r.turnId);
    r.resolve(o);
  }

  /** A call's actor failed (a bug of ours: `execute`'s failures are outcomes): the call failed. */
  crashed(callId: string): void {
    this.settle(callId, failedWith('The tool call failed.'));
  }

  /** Records a call still running as cancelled (its actor is stopped by the caller). */
  private cancelled(callId: string): boolean {
    const r = this.running.get(callId);
    if (!r) return false;
    this.settle(callId, { status: 'cancelled', output: null, error: 'Cancelled: the conversation ended', latencyMs: this.deps.clock.now() - r.startedAt });
    return true;
  }

  /** Cancels one call still running (a blocking call whose turn was interrupted): recorded, and its actor stopped. */
  cancel(callId: string): void {
    if (this.cancelled(callId)) this.deps.stop(callId);
  }

  /**
   * Records every call still running as cancelled and refuses new ones: the session ended, and
   * ending stops its children (each call's `execute` is aborted).
   */
  cancelAll(): void {
    this.closed = true;
    for (const callId of [...this.running.keys()]) this.cancelled(callId);
  }
}
