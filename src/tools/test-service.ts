/**
 * The webhook tool test (docs/api/tools.md, decided in D-TOOL-2): one real call of a tool
 * with given arguments, or the answer of one of its stored mock responses. The rendering here
 * (`renderToolRequest`) is the rule the conversation runtime uses too.
 */
import { z } from 'zod';
import { ServiceError, invalidField, notFound } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import { outboundFetch, type Resolver } from '../net/index.ts';
import type { RuntimeTool } from './service.ts';

/** Response bytes a test captures (docs/api/tools.md "Test a tool"). */
export const TOOL_TEST_CAPTURE_BYTES = 64 * 1024;

const argumentValue = z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(z.unknown()), z.record(z.string(), z.unknown())]);

export const toolTestBody = z.strictObject({
  arguments: z.record(z.string(), argumentValue).default({}).describe('Values of the tool\'s declared arguments, by name'),
  system: z.record(z.string(), z.string()).optional().describe('Values for `{{system.<name>}}` placeholders; unset ones render empty'),
  mock: z.string().max(120).optional().describe('Answer from the stored mock response of this name instead of calling the endpoint'),
});
export type ToolTestRequest = z.infer<typeof toolTestBody>;

export const toolTestResult = z.object({
  status_code: z.number().int(),
  latency_ms: z.number().int(),
  headers: z.record(z.string(), z.string()).describe('Response headers, lower-case names'),
  body: z.string().describe('The first 64 KB of the response body, as UTF-8'),
  response_truncated: z.boolean(),
  mock: z.string().nullable().describe('The mock response that answered, or null for a real call'),
  request: z
    .object({
      method: z.string(),
      url: z.string(),
      headers: z.record(z.string(), z.string().nullable()).describe('As sent; the values of secret headers are null (write-only)'),
      body: z.string().nullable(),
    })
    .nullable()
    .describe('The request that was sent (null when a mock answered)'),
});
export type ToolTestResult = z.infer<typeof toolTestResult>;

/** A rendered request, ready for `outboundFetch`. */
export interface RenderedToolRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

function text(v: unknown): string {
  if (v === undefined) return '';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function isJson(contentType: string): boolean {
  const t = contentType.split(';')[0]!.trim().toLowerCase();
  return t === 'application/json' || t.endsWith('+json');
}

/**
 * Renders a tool call. `{{name}}` of a declared argument becomes its value (absent: empty),
 * `{{system.<name>}}` the system value (absent: empty); any other placeholder stays as written.
 * In the URL values are percent-encoded; in the body they are escaped for the content type
 * (JSON string escaping for JSON types, so `"{{x}}"` stays valid JSON; percent-encoding for
 * form bodies; verbatim otherwise). Non-string values render as JSON. Method and header names
 * and values are sent exactly as stored; Content-Type is the tool's `content_type` unless a
 * stored header sets it. GET sends no body.
 */
export function renderToolRequest(tool: RuntimeTool, args: Record<string, unknown>, system: Record<string, string> = {}): RenderedToolRequest {
  const declared = new Set(tool.arguments.map((a) => a.name));
  const render = (template: string, escape: (s: string) => string) =>
    template.replace(PLACEHOLDER, (whole, name: string) => {
      if (name.startsWith('system.')) return escape(system[name.slice('system.'.length)] ?? '');
      if (declared.has(name)) return escape(text(args[name]));
      return whole;
    });
  const form = tool.content_type.split(';')[0]!.trim().toLowerCase() === 'application/x-www-form-urlencoded';
  const bodyEscape = isJson(tool.content_type) ? (s: string) => JSON.stringify(s).slice(1, -1) : form ? encodeURIComponent : (s: string) => s;
  const headers: Record<string, string> = {};
  for (const h of tool.headers) headers[h.name] = h.value;
  const method = tool.method;
  const body = method !== 'GET' && tool.body_template !== '' ? render(tool.body_template, bodyEscape) : undefined;
  if (body !== undefined && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) headers['Content-Type'] = tool.content_type;
  return { url: render(tool.url, encodeURIComponent), method, headers, body };
}

/** The rendered headers as a client may see them: secret values (write-only) as null. */
function shownHeaders(tool: RuntimeTool, headers: Record<string, string>): Record<string, string | null> {
  const secret = new Set(tool.headers.filter((h) => h.secret || h.kind !== 'custom').map((h) => h.name));
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, secret.has(k) ? null : v]));
}

export interface ToolTestDeps {
  /** The team's tool with credential headers decrypted (`ToolService.resolveToolForRuntime`). */
  resolveTool(teamId: string, toolId: string): Promise<RuntimeTool | undefined>;
  /** `host:port` entries the SSRF guard lets through. */
  allow: string[];
  lookup?: Resolver;
}

export class ToolTestService {
  constructor(private readonly deps: ToolTestDeps) {}

  async test(p: Principal, toolId: string, req: ToolTestRequest, signal?: AbortSignal): Promise<ToolTestResult> {
    const tool = await this.deps.resolveTool(p.teamId, toolId);
    if (!tool) throw notFound('Tool');
    if (tool.tool_type !== 'webhook') throw new ServiceError('bad_request', 'Only webhook tools can be tested');
    const declared = new Set(tool.arguments.map((a) => a.name));
    for (const name of Object.keys(req.arguments)) {
      if (!declared.has(name)) throw invalidField(['body', 'arguments', name], 'Not an argument of this tool', 'extra_forbidden');
    }

    if (req.mock !== undefined) {
      const m = tool.mock_responses.find((r) => r.name === req.mock);
      if (!m) throw invalidField(['body', 'mock'], 'The tool has no mock response with this name');
      const bytes = Buffer.from(m.body, 'utf8');
      const truncated = bytes.length > TOOL_TEST_CAPTURE_BYTES;
      return {
        status_code: m.status_code,
        latency_ms: 0,
        headers: { 'content-type': m.content_type },
        body: truncated ? bytes.subarray(0, TOOL_TEST_CAPTURE_BYTES).toString('utf8') : m.body,
        response_truncated: truncated,
        mock: m.name,
        request: null,
      };
    }

    const r = renderToolRequest(tool, req.arguments, req.system);
    const res = await outboundFetch(
      r.url,
      { method: r.method, headers: r.headers, body: r.body, timeoutMs: tool.timeout_seconds * 1000, signal, maxResponseBytes: TOOL_TEST_CAPTURE_BYTES },
      { allow: this.deps.allow, lookup: this.deps.lookup },
    );
    return {
      status_code: res.status,
      latency_ms: Math.round(res.latencyMs),
      headers: res.headers,
      body: res.body.toString('utf8'),
      response_truncated: res.truncated,
      mock: null,
      request: { method: r.method, url: r.url, headers: shownHeaders(tool, r.headers), body: r.body ?? null },
    };
  }
}
