/**
 * The tools a live session offers its model, as `SessionTool`s (actors/types.ts): the webhook
 * and client tools attached to the session's published version, as publish froze them
 * (`agent_versions.pinned.tools`, credential headers still sealed until here).
 *
 * - Webhook tools: `{{argument}}` rendered in url and body_template (`renderToolRequest`, the
 *   rule the tool test uses), method, content type and headers sent exactly as stored
 *   (credentials opened with the secret box only here), through `outboundFetch` (SSRF guard at
 *   connect time, every redirect checked, `PARLEY_OUTBOUND_ALLOW`), bounded by
 *   `timeout_seconds`. Mock responses never answer a conversation's call.
 * - Client tools: a `client_tool.call` agent-event to the client; with `expects_response` the
 *   call waits up to `timeout_seconds` for `client_tool.result` (`deliver`), else it is
 *   fire-and-forget. Unknown or already settled ids are ignored.
 *
 * `error_handling` shapes what the model sees of a failure: `passthrough` the error and the
 * response, `hide` only that the call failed. The history and the tool events keep the reason.
 */
import type { Clock } from '../../actors/clock.ts';
import type { ServerMessage, SessionTool, ToolOutcome } from '../../actors/types.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import type { Logger } from '../log.ts';
import { OutboundError, outboundFetch, type OutboundOptions } from '../net/index.ts';
import type { SessionRow } from '../sessions/store.ts';
import type { ToolRow } from './store.ts';
import { openSecretVariables } from '../sessions/service.ts';
import { renderToolRequest } from './test-service.ts';
import { openTool, type RuntimeTool } from './service.ts';
import { systemVariables } from '../sessions/variables.ts';

/** Response bytes a conversation's webhook call reads (the history keeps at most 256 KB). */
export const TOOL_RESPONSE_BYTES = 256 * 1024;
/** What the model is told of a failure under `error_handling: hide`. */
export const HIDDEN_FAILURE = JSON.stringify({ error: 'The tool call failed.' });
/** Names the platform's own tools use; attached tools never take them. */
const RESERVED_NAMES = ['hang_up_call', 'transfer_call'];

/** A model-facing function name from a display name: `Order lookup!` → `order_lookup`. */
export function functionName(display: string): string {
  let name = display
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '_')
    .replace(/^[_-]+|[_-]+$/g, '');
  if (!/^[a-z]/.test(name)) name = `tool_${name}`.replace(/_+$/, '');
  return name.slice(0, 64);
}

/** The JSON schema of a tool's arguments: every declared argument a required string. */
export function parametersSchema(args: { name: string; description: string }[]): string {
  const properties: Record<string, { type: 'string'; description?: string }> = {};
  for (const a of args) properties[a.name] = { type: 'string', ...(a.description ? { description: a.description } : {}) };
  return JSON.stringify({ type: 'object', properties, required: args.map((a) => a.name) });
}

function parseArgs(argsJson: string): Record<string, unknown> | null {
  try {
    const v = JSON.parse(argsJson.trim() || '{}');
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** What the model sees of a failed call: the error (and response) unless the tool hides it. */
function shaped(tool: RuntimeTool, error: string, response?: unknown): string {
  if (tool.error_handling === 'hide') return HIDDEN_FAILURE;
  return JSON.stringify(response === undefined ? { error } : { error, response });
}

export interface WebhookToolOptions {
  outbound: OutboundOptions;
  /** Values of `{{system.<name>}}` placeholders. */
  system?: Record<string, string>;
  /** The session's `secret__` variables: rendered into url, body and header values, never shown to the model. */
  secrets?: Record<string, string>;
  log?: Logger;
}

const SECRET_PLACEHOLDER = /\{\{\s*(secret__[A-Za-z0-9_]+)\s*\}\}/g;

/**
 * Renders a call: the tool-test rule (`renderToolRequest`) with the session's `secret__`
 * variables as extra arguments (they win over anything the model sends under those names),
 * and in header values, which are otherwise sent exactly as stored.
 */
function renderCall(tool: RuntimeTool, args: Record<string, unknown>, o: WebhookToolOptions) {
  const secrets = o.secrets ?? {};
  const names = Object.keys(secrets);
  if (names.length === 0) return renderToolRequest(tool, args, o.system ?? {});
  const declared = new Set(tool.arguments.map((a) => a.name));
  const withSecrets = { ...tool, arguments: [...tool.arguments, ...names.filter((n) => !declared.has(n)).map((name) => ({ name, description: '' }))] };
  const r = renderToolRequest(withSecrets, { ...args, ...secrets }, o.system ?? {});
  for (const [k, v] of Object.entries(r.headers)) r.headers[k] = v.replace(SECRET_PLACEHOLDER, (whole, name: string) => secrets[name] ?? whole);
  return r;
}

/** A webhook tool as a session tool; `name` is the function name the model calls. */
export function webhookSessionTool(tool: RuntimeTool, name: string, o: WebhookToolOptions): SessionTool {
  return {
    spec: { name, description: tool.description, parametersJsonSchema: parametersSchema(tool.arguments) },
    source: 'webhook',
    mode: tool.execution_mode,
    async execute(argsJson, { signal }): Promise<ToolOutcome> {
      const started = performance.now();
      const latency = () => Math.round(performance.now() - started);
      const args = parseArgs(argsJson);
      if (!args) {
        const error = 'The arguments are not a JSON object';
        return { status: 'failed', output: shaped(tool, error), error, latencyMs: 0 };
      }
      const r = renderCall(tool, args, o);
      try {
        const res = await outboundFetch(
          r.url,
          { method: r.method, headers: r.headers, body: r.body, timeoutMs: tool.timeout_seconds * 1000, signal, maxResponseBytes: TOOL_RESPONSE_BYTES },
          o.outbound,
        );
        const body = res.body.toString('utf8');
        if (res.status >= 200 && res.status < 300) {
          return { status: 'completed', output: body === '' ? null : body, error: null, outputTruncated: res.truncated, latencyMs: latency() };
        }
        const error = `The endpoint answered HTTP ${res.status}`;
        return { status: 'failed', output: shaped(tool, error, body), error, outputTruncated: res.truncated && tool.error_handling !== 'hide', latencyMs: latency() };
      } catch (err) {
        const error = err instanceof OutboundError ? `${err.message} (${err.reason})` : 'The tool call failed';
        if (!(err instanceof OutboundError)) o.log?.error({ err, tool: tool.tool_id }, 'webhook tool call failed unexpectedly');
        return { status: 'failed', output: shaped(tool, error), error, latencyMs: latency() };
      }
    },
  };
}

/** A client's answer to `client_tool.call` (docs/api/sessions.md `client-event`). */
export interface ClientToolResult {
  callId: string;
  result?: unknown;
  isError?: boolean;
}

/** The client tools of one session: sends the calls, matches the answers to the calls that wait. */
export class ClientTools {
  private readonly waiting = new Map<string, (r: ClientToolResult) => void>();

  constructor(private readonly o: { output: { message(m: ServerMessage): void }; clock: Clock }) {}

  /** A client's answer; false when no call waits for this id (unknown or already settled). */
  deliver(r: ClientToolResult): boolean {
    const w = this.waiting.get(r.callId);
    if (!w) return false;
    this.waiting.delete(r.callId);
    w(r);
    return true;
  }

  /** Calls waiting for an answer. */
  get pending(): number {
    return this.waiting.size;
  }

  /** A client tool; `name` is the function name the model calls (the tool's own name unless taken). */
  tool(tool: RuntimeTool, name = tool.name): SessionTool {
    const expects = tool.expects_response;
    return {
      spec: { name, description: tool.description, parametersJsonSchema: parametersSchema(tool.arguments) },
      source: 'client',
      mode: expects ? 'blocking' : 'fire_and_forget',
      execute: (argsJson, { callId, signal }) => {
        const params = parseArgs(argsJson);
        if (!params) {
          const error = 'The arguments are not a JSON object';
          return Promise.resolve({ status: 'failed', output: shaped(tool, error), error, latencyMs: 0 });
        }
        this.o.output.message({ topic: 'agent-event', type: 'client_tool.call', callId, toolName: tool.name, params, expectsResponse: expects });
        if (!expects) return Promise.resolve({ status: 'completed', output: null, error: null, latencyMs: 0 });
        const started = this.o.clock.now();
        return new Promise<ToolOutcome>((resolve) => {
          const finish = (o: Omit<ToolOutcome, 'latencyMs'>) => {
            this.waiting.delete(callId);
            this.o.clock.clearTimeout(timer);
            signal.removeEventListener('abort', onAbort);
            resolve({ ...o, latencyMs: this.o.clock.now() - started });
          };
          const timer = this.o.clock.setTimeout(() => {
            const error = `The client did not answer within ${tool.timeout_seconds} s`;
            finish({ status: 'failed', output: shaped(tool, error), error });
          }, tool.timeout_seconds * 1000);
          const onAbort = () => finish({ status: 'cancelled', output: null, error: 'Cancelled' });
          signal.addEventListener('abort', onAbort, { once: true });
          this.waiting.set(callId, (r) => {
            const result = r.result === undefined ? null : r.result;
            if (r.isError === true) {
              const error = 'The client reported an error';
              finish({ status: 'failed', output: shaped(tool, error, result), error });
            } else {
              finish({ status: 'completed', output: JSON.stringify(result), error: null });
            }
          });
        });
      },
    };
  }
}

export interface SessionToolsOptions {
  /** `agent_versions.pinned` of the session's version: `{ tools: ToolRow[] }` (null for versions published before pins). */
  pinned: unknown;
  /** The version's `tools` section: `enabled` and the attached `tool_ids`, in order. */
  config: { enabled: boolean; tool_ids: string[] };
  box: SecretBox;
  outbound: OutboundOptions;
  output: { message(m: ServerMessage): void };
  clock: Clock;
  system?: Record<string, string>;
  /** The session's sealed `secret__` variables (`sessions.secret_variables`), opened here for tool requests only. */
  sealedSecrets?: string | null;
  log?: Logger;
}

/** The session tools of a published version, and the client-tool matcher the transport feeds. */
export function createSessionTools(o: SessionToolsOptions): { tools: SessionTool[]; client: ClientTools } {
  const client = new ClientTools({ output: o.output, clock: o.clock });
  const tools: SessionTool[] = [];
  if (!o.config.enabled) return { tools, client };
  const rows = ((o.pinned as { tools?: ToolRow[] } | null)?.tools ?? []) as ToolRow[];
  const byId = new Map(rows.map((r) => [r.id, r]));
  const taken = new Set(RESERVED_NAMES);
  let secrets: Record<string, string> = {};
  try {
    secrets = Object.fromEntries(Object.entries(openSecretVariables(o.box, { secret_variables: o.sealedSecrets ?? null })).map(([k, v]) => [k, String(v)]));
  } catch (err) {
    o.log?.error({ err }, 'session secret variables do not open; tool requests go without them');
  }
  for (const id of o.config.tool_ids) {
    const row = byId.get(id);
    if (!row) continue;
    let tool: RuntimeTool;
    try {
      tool = openTool(o.box, row);
    } catch (err) {
      // A credential that no longer opens (rotated master key): the tool is left out, not the session.
      o.log?.error({ err, tool: id }, 'tool credentials do not open; tool left out of the session');
      continue;
    }
    const base = tool.tool_type === 'client' ? tool.name : functionName(tool.name);
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base.slice(0, 60)}_${n}`;
    taken.add(name);
    tools.push(tool.tool_type === 'client' ? client.tool(tool, name) : webhookSessionTool(tool, name, { outbound: o.outbound, system: o.system, secrets, log: o.log }));
  }
  return { tools, client };
}

/** Values of `{{system.<name>}}` in tool requests: the session's system variables without their prefix. */
export function toolSystemValues(session: SessionRow, language: string): Record<string, string> {
  const channel = session.source !== 'phone' ? 'web_voice' : session.direction === 'outbound' ? 'phone_outbound' : 'phone_inbound';
  const vars = systemVariables({ channel, timezone: session.timezone, now: new Date(session.created_at), language, callerNumber: session.caller_number, dialedNumber: session.dialed_number });
  return Object.fromEntries(Object.entries(vars).map(([k, v]) => [k.replace(/^system\./, ''), v]));
}
