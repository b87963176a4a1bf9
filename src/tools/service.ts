import { z } from 'zod';
import type { SecretBox } from '../crypto/secrets.ts';
import { ServiceError, notFound, type FieldError } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import { newId } from '../ids.ts';
import { checkUrl } from '../net/index.ts';
import { getAgent } from '../agents/store.ts';
import type { Sql } from '../store/db.ts';
import type { PageRequest } from '../store/paginate.ts';
import {
  agentsUsingTool, deleteTool, frozenToolsForPublish, getTool, insertTool, listTools, replaceTool,
  type StoredHeader, type ToolContent, type ToolRow,
} from './store.ts';
import { AgentService } from '../agents/service.ts';

export const TOOL_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export const HEADER_KINDS = ['custom', 'authorization_bearer', 'authorization_basic'] as const;
export const EXECUTION_MODES = ['blocking', 'fire_and_forget', 'background'] as const;
/** timeout_seconds: 1–120, or 1–300 for background tools (the spec's table). */
export const MAX_TIMEOUT_S = 120;
export const MAX_BACKGROUND_TIMEOUT_S = 300;
/** Client tool names (docs/api/tools.md); a leading underscore is reserved for built-ins and fails the pattern. */
const CLIENT_TOOL_NAME = /^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/;
/** RFC 9110 token: what the runtime can actually send as a header name. */
const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]*$/; // emptiness is min(1)'s error

const argumentSchema = z.strictObject({
  name: z.string().min(1).max(64),
  description: z.string().max(500).default(''),
});

/**
 * A header as written. Credential kinds are always secret; a `custom` header is secret when
 * it says `secret: true` (D-TOOL-1). Secret values are sealed and never read back.
 */
const headerWrite = z
  .strictObject({
    name: z.string().min(1).max(128).regex(HTTP_TOKEN, 'Must be an HTTP header name'),
    value: z
      .string()
      .max(4000)
      .refine((v) => !/[\r\n\0]/.test(v), { message: 'Header value must not contain CR, LF or NUL', params: { type: 'header_value' } }),
    kind: z.enum(HEADER_KINDS).default('custom'),
    secret: z.boolean().optional(),
  })
  .superRefine((h, ctx) => {
    if (h.kind !== 'custom' && h.secret === false)
      ctx.addIssue({ code: 'custom', path: ['secret'], message: 'Credential headers are always secret', params: { type: 'value_error' } });
  });

const mockResponse = z.strictObject({
  name: z.string().max(120).default(''),
  status_code: z.number().int().min(100).max(599).default(200),
  content_type: z.string().max(128).default('application/json'),
  body: z.string().max(100_000).default(''),
});

const uniqueArguments = (args: { name: string }[] | undefined, ctx: z.RefinementCtx) => {
  const seen = new Set<string>();
  args?.forEach((a, i) => {
    if (seen.has(a.name)) ctx.addIssue({ code: 'custom', path: ['arguments', i, 'name'], message: 'Argument names must be unique', params: { type: 'value_error' } });
    seen.add(a.name);
  });
};

const fields = {
  description: z.string().max(2000),
  tool_type: z.enum(['webhook', 'client']),
  arguments: z.array(argumentSchema),
  method: z.enum(TOOL_METHODS),
  content_type: z.string().max(128),
  body_template: z.string().max(100_000),
  headers: z.array(headerWrite),
  // The upper bound depends on execution_mode; the service checks the merged combination.
  timeout_seconds: z.number().int().min(1).max(MAX_BACKGROUND_TIMEOUT_S),
  error_handling: z.enum(['passthrough', 'hide']),
  mock_responses: z.array(mockResponse),
  expects_response: z.boolean(),
  execution_mode: z.enum(EXECUTION_MODES),
};

/** POST /v1/agent/tools (docs/api/tools.md; the spec's `mock responses` key is `mock_responses`). */
export const toolCreateBody = z
  .strictObject({
    name: z.string().min(1).max(120),
    description: fields.description.default(''),
    tool_type: fields.tool_type.default('webhook'),
    arguments: fields.arguments.default([]),
    method: fields.method.default('POST'),
    url: z.string().max(4000).default(''),
    content_type: fields.content_type.default('application/json'),
    body_template: fields.body_template.default(''),
    headers: fields.headers.default([]),
    timeout_seconds: fields.timeout_seconds.default(30),
    error_handling: fields.error_handling.default('passthrough'),
    mock_responses: fields.mock_responses.default([]),
    expects_response: fields.expects_response.default(true),
    execution_mode: fields.execution_mode.default('blocking'),
  })
  .superRefine((b, ctx) => uniqueArguments(b.arguments, ctx));

/** PATCH: every field optional, explicit null → 422, `headers` replaced whole (secrets re-sent). */
export const toolPatchBody = z
  .strictObject({
    name: z.string().min(1).max(120).optional(),
    description: fields.description.optional(),
    tool_type: fields.tool_type.optional(),
    arguments: fields.arguments.optional(),
    method: fields.method.optional(),
    url: z.string().min(1).max(4000).optional(),
    content_type: fields.content_type.optional(),
    body_template: fields.body_template.optional(),
    headers: fields.headers.optional(),
    timeout_seconds: fields.timeout_seconds.optional(),
    error_handling: fields.error_handling.optional(),
    mock_responses: fields.mock_responses.optional(),
    expects_response: fields.expects_response.optional(),
    execution_mode: fields.execution_mode.optional(),
  })
  .superRefine((b, ctx) => uniqueArguments(b.arguments, ctx));

export const toolListQuery = z.strictObject({
  search: z.string().max(200).optional(),
  agent_id: z.string().max(200).optional(),
});

const headerRead = z.object({ name: z.string(), kind: z.enum(HEADER_KINDS), value: z.string().nullable(), has_secret: z.boolean() });

/** The list row (docs/api/tools.md). */
export const toolSummary = z.object({
  tool_id: z.string(),
  workspace_id: z.string(),
  name: z.string(),
  description: z.string(),
  tool_type: z.enum(['webhook', 'client']),
  method: z.enum(TOOL_METHODS),
  url: z.string(),
  used_by: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** The full read: the summary plus every writable field; secret header values are null. */
export const toolEntity = toolSummary.extend({
  arguments: z.array(z.object({ name: z.string(), description: z.string() })),
  content_type: z.string(),
  body_template: z.string(),
  headers: z.array(headerRead),
  timeout_seconds: z.number().int(),
  error_handling: z.enum(['passthrough', 'hide']),
  mock_responses: z.array(z.object({ name: z.string(), status_code: z.number().int(), content_type: z.string(), body: z.string() })),
  expects_response: z.boolean(),
  execution_mode: z.enum(EXECUTION_MODES),
});

export const toolAgentsBody = z.object({ agents: z.array(z.object({ agent_id: z.string(), name: z.string() })), total: z.number().int() });

export type ToolSummary = z.infer<typeof toolSummary>;
export type ToolEntity = z.infer<typeof toolEntity>;
type ToolCreate = z.infer<typeof toolCreateBody>;
type ToolPatch = z.infer<typeof toolPatchBody>;
type HeaderWrite = z.infer<typeof headerWrite>;

export function toSummary(r: ToolRow): ToolSummary {
  return {
    tool_id: r.id,
    workspace_id: r.workspace_id,
    name: r.name,
    description: r.description,
    tool_type: r.tool_type,
    method: r.method,
    url: r.url,
    used_by: r.used_by,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

export function toToolEntity(r: ToolRow): ToolEntity {
  return {
    ...toSummary(r),
    arguments: r.arguments,
    content_type: r.content_type,
    body_template: r.body_template,
    headers: r.headers.map((h) => ({ name: h.name, kind: h.kind, value: h.secret ? null : h.value, has_secret: h.secret })),
    timeout_seconds: r.timeout_seconds,
    error_handling: r.error_handling,
    mock_responses: r.mock_responses,
    expects_response: r.expects_response,
    execution_mode: r.execution_mode,
  };
}

/** A tool ready to execute: every header value in plain text. Never send this to a client. */
export interface RuntimeTool extends Omit<ToolContent, 'headers'> {
  tool_id: string;
  /** `secret`: the value was sealed at rest (never shown back, also not in a test's request). */
  headers: { name: string; kind: StoredHeader['kind']; value: string; secret?: boolean }[];
}

/** Opens a stored (or publish-frozen) tool's sealed headers for the runtime. */
export function openTool(box: SecretBox, r: ToolRow): RuntimeTool {
  const { id, team_id: _t, workspace_id: _w, created_at: _c, updated_at: _u, used_by: _b, headers, ...content } = r;
  return { tool_id: id, ...content, headers: headers.map((h) => ({ name: h.name, kind: h.kind, value: h.secret ? box.open(h.sealed!) : h.value!, ...(h.secret ? { secret: true } : {}) })) };
}

/** Workspace webhook and client tools, independent of HTTP. */
export class ToolService {
  constructor(private readonly sql: Sql, private readonly box: SecretBox) {}

  async create(p: Principal, body: ToolCreate): Promise<ToolEntity> {
    AgentService.requireBeta(p);
    const { headers, ...rest } = body;
    const content: ToolContent = { ...rest, headers: this.seal(headers) };
    this.check(content, new Set(Object.keys(body)), true);
    return toToolEntity(await insertTool(this.sql, { id: newId('tool'), teamId: p.teamId, content }));
  }

  async get(p: Principal, id: string): Promise<ToolRow> {
    const row = await getTool(this.sql, p.teamId, id);
    if (!row) throw notFound('Tool');
    return row;
  }

  async list(p: Principal, f: { search?: string; agentId?: string }, page: PageRequest) {
    if (f.agentId !== undefined && !(await getAgent(this.sql, p.teamId, f.agentId))) throw notFound('Agent');
    return listTools(this.sql, p.teamId, f, page);
  }

  async update(p: Principal, id: string, body: ToolPatch): Promise<ToolEntity> {
    const row = await this.get(p, id);
    const { id: _i, team_id: _t, workspace_id: _w, created_at: _c, updated_at: _u, used_by: _b, ...current } = row;
    const { headers, ...rest } = body;
    const merged: ToolContent = { ...current, ...rest, headers: headers ? this.seal(headers) : current.headers };
    const sent = new Set(Object.keys(body));
    this.check(merged, sent, false);
    const updated = await replaceTool(this.sql, p.teamId, id, merged);
    if (!updated) throw notFound('Tool');
    return toToolEntity(updated);
  }

  async delete(p: Principal, id: string): Promise<void> {
    const r = await deleteTool(this.sql, p.teamId, id);
    if (r.deleted) return;
    if (r.missing) throw notFound('Tool');
    throw new ServiceError('conflict', `Tool is attached to ${r.attached} agent(s). Detach it first.`);
  }

  async agents(p: Principal, id: string): Promise<{ agents: { agent_id: string; name: string }[]; total: number }> {
    await this.get(p, id);
    const agents = await agentsUsingTool(this.sql, p.teamId, id);
    return { agents, total: agents.length };
  }

  /** The tool with its credential headers decrypted, for the tool runtime; undefined when missing. */
  async resolveToolForRuntime(teamId: string, toolId: string): Promise<RuntimeTool | undefined> {
    const row = await getTool(this.sql, teamId, toolId);
    return row ? openTool(this.box, row) : undefined;
  }

  /** Full records (headers still sealed) of the team's tools in `ids`, for publish to pin. */
  frozenToolsForPublish(teamId: string, ids: readonly string[]): Promise<ToolRow[]> {
    return frozenToolsForPublish(this.sql, teamId, ids);
  }

  private seal(headers: HeaderWrite[]): StoredHeader[] {
    return headers.map((h) => {
      const secret = h.kind !== 'custom' || h.secret === true;
      return { name: h.name, kind: h.kind, secret, value: secret ? null : h.value, sealed: secret ? this.box.seal(h.value) : null };
    });
  }

  /** Rules that span fields, on the merged tool; `sent` says which fields the request carried (for `loc`). */
  private check(t: ToolContent, sent: Set<string>, creating: boolean): void {
    const errors: FieldError[] = [];
    const at = (field: string, fallback: string) => ['body', sent.has(field) || !sent.has(fallback) ? field : fallback];
    if (t.execution_mode !== 'background' && t.timeout_seconds > MAX_TIMEOUT_S) {
      errors.push({
        type: 'too_big_number',
        loc: at('timeout_seconds', 'execution_mode'),
        msg: `Too big: timeout_seconds must be <=${MAX_TIMEOUT_S} unless execution_mode is background (<=${MAX_BACKGROUND_TIMEOUT_S})`,
        ctx: { maximum: MAX_TIMEOUT_S, inclusive: true },
      });
    }
    if (t.tool_type === 'webhook') {
      if (t.url === '') {
        errors.push({ type: 'missing', loc: ['body', 'url'], msg: 'Field required', ctx: {} });
      } else if (creating || sent.has('url') || sent.has('tool_type')) {
        const c = checkUrl(t.url);
        if (!c.ok) errors.push({ type: c.kind === 'blocked' ? 'url_blocked' : 'url_invalid', loc: ['body', 'url'], msg: c.reason, ctx: {} });
      }
    } else {
      if (t.url !== '' && (creating || sent.has('url') || sent.has('tool_type')))
        errors.push({ type: 'value_error', loc: at('url', 'tool_type'), msg: 'Client tools have no URL', ctx: {} });
      if (!CLIENT_TOOL_NAME.test(t.name))
        errors.push({ type: 'string_pattern_mismatch', loc: at('name', 'tool_type'), msg: 'Client tool names must match ^[a-zA-Z][a-zA-Z0-9_-]{0,63}$', ctx: { pattern: CLIENT_TOOL_NAME.source } });
    }
    if (errors.length) throw new ServiceError('invalid', 'Validation failed', { fields: errors });
  }
}
