import { createHash, randomBytes } from 'node:crypto';
import { analysisEntity, toAnalysisView } from '../analysis/index.ts';
import { recordingSummary, type RecordingSummary } from '../recordings/index.ts';
import { z } from 'zod';
import { ServiceError, dependencyUnavailable, notFound } from '../errors.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import type { Principal } from '../auth/principal.ts';
import { newId } from '../ids.ts';
import type { SharedState } from '../state/index.ts';
import type { Sql } from '../store/db.ts';
import type { PageRequest } from '../store/paginate.ts';
import {
  getSession,
  getSessionForCreation,
  insertSession,
  listSessionItems,
  listSessions,
  markSessionEnded,
  type NewSession,
  type SessionFilter,
  type SessionItemRow,
  type SessionRow,
} from './store.ts';
import { normalizeOrigin } from '../agents/service.ts';
import { CreationBatcher } from './creation-batch.ts';
import type { AgentCache } from '../agents/cache.ts';
import { LIMITS, SPEAKING_LANGUAGES, SYSTEM_VARIABLES, countPromptTokens, isTimeZone, unknownSystemVariables, type StoredDraft } from '../agent-config/index.ts';
import { RESERVED_PREFIX, VARIABLE_NAME, resolveTimezone, splitSecretVariables, type VariableValue } from './variables.ts';

/** How long a client has to connect with the token (docs/api/sessions.md). */
export const SESSION_TOKEN_TTL_MS = 60_000;
export const MAX_DYNAMIC_VARIABLES = 50;
export const MAX_VARIABLE_CHARS = 1_000;
const RATE_WINDOW_MS = 60_000;
export const SESSION_STATUSES = ['pending', 'active', 'completed', 'failed', 'unknown'] as const;
/** Overrides a keyless (public) session may carry, when the agent's own list has them too. */
export const PUBLIC_OVERRIDE_FIELDS: readonly string[] = ['language', 'voice_id'];
const PUBLIC_OVERRIDES = new Set(PUBLIC_OVERRIDE_FIELDS);

/** Shared-state key of a session token (docs/sessions-contract.md). */
export const sessionTokenKey = (token: string) => `session-token:${token}`;
/** Reverse key: the token of a pending session, so ending it can delete the token. */
export const sessionTokenOfKey = (sessionId: string) => `session-token-of:${sessionId}`;
export const SESSION_CONTROL_CHANNEL = 'session-control';

/** The `secret__` variables of a session (sealed at rest), for rendering into tool requests only. */
export function openSecretVariables(box: SecretBox, session: Pick<SessionRow, 'secret_variables'>): Record<string, VariableValue> {
  return session.secret_variables ? (JSON.parse(box.open(session.secret_variables)) as Record<string, VariableValue>) : {};
}

// ---------------------------------------------------------------------------------------------
// Request schemas

type RefineCtx = z.core.$RefinementCtx<unknown>;
function issue(ctx: RefineCtx, message: string, type: string, path?: (string | number)[]): void {
  ctx.addIssue({ code: 'custom', message, params: { type }, ...(path ? { path } : {}) });
}

function systemVariablesCheck(value: string, ctx: RefineCtx): void {
  const unknown = unknownSystemVariables(value);
  if (unknown.length)
    issue(ctx, `Value error, unknown system variable${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `{{${n}}}`).join(', ')}; valid names: ${SYSTEM_VARIABLES.join(', ')}`, 'unknown_system_variable');
}

const templated = z.string().max(LIMITS.firstMessageChars).superRefine(systemVariablesCheck);

const systemPromptOverride = z
  .string()
  .max(LIMITS.systemPromptChars)
  .superRefine((value, ctx) => {
    if (value.length > LIMITS.systemPromptChars || Buffer.byteLength(value, 'utf8') <= LIMITS.systemPromptTokens) return;
    const tokens = countPromptTokens(value);
    if (tokens > LIMITS.systemPromptTokens) issue(ctx, `Value error, system_prompt exceeds ${LIMITS.systemPromptTokens} tokens (got ${tokens})`, 'value_error');
  })
  .superRefine(systemVariablesCheck);

export const overridesSchema = z
  .strictObject({
    first_message: templated.optional().describe('Spoken verbatim as the opener whatever the configured mode; {{placeholders}} render'),
    first_message_prompt: templated.optional().describe('Instructions for generating the opener (gated by the agent allowing first_message)'),
    system_prompt: systemPromptOverride.optional().describe('Replaces the configured system prompt; at most 4,000 tokens'),
    voice_id: z.string().min(1).max(LIMITS.voiceIdChars).optional(),
    language: z.enum(SPEAKING_LANGUAGES).optional(),
  })
  .superRefine((o, ctx) => {
    if (o.first_message !== undefined && o.first_message_prompt !== undefined)
      issue(ctx, 'Value error, first_message and first_message_prompt are mutually exclusive', 'exclusive_overrides', ['first_message_prompt']);
  });
export type Overrides = z.output<typeof overridesSchema>;

const dynamicVariables = z
  .record(z.string(), z.unknown())
  .describe(`Up to ${MAX_DYNAMIC_VARIABLES} entries; names [A-Za-z][A-Za-z0-9_]* (not system__…); values string (≤${MAX_VARIABLE_CHARS}), number or boolean`)
  .superRefine((vars, ctx) => {
    const names = Object.keys(vars);
    if (names.length > MAX_DYNAMIC_VARIABLES) issue(ctx, `Value error, at most ${MAX_DYNAMIC_VARIABLES} dynamic variables (got ${names.length})`, 'too_many_variables');
    for (const name of names) {
      if (name.startsWith('system.') || name.startsWith(RESERVED_PREFIX)) issue(ctx, 'Value error, system variables are reserved and cannot be set', 'reserved_variable', [name]);
      else if (!VARIABLE_NAME.test(name)) issue(ctx, 'Value error, variable names must match [A-Za-z][A-Za-z0-9_]*', 'variable_name', [name]);
      const v = vars[name];
      if (typeof v === 'string') {
        if (v.length > MAX_VARIABLE_CHARS) issue(ctx, `Value error, string variables are at most ${MAX_VARIABLE_CHARS} characters`, 'too_big_string', [name]);
      } else if (!(typeof v === 'number' && Number.isFinite(v)) && typeof v !== 'boolean') {
        issue(ctx, 'Value error, variable values must be a string, a number or a boolean', 'variable_type', [name]);
      }
    }
  });

const timezoneField = z
  .string()
  .max(LIMITS.timezoneChars)
  .refine(isTimeZone, { message: 'Value error, not an IANA timezone name', params: { type: 'invalid_timezone' } });

export const sessionCreateBody = z.strictObject({
  agent_id: z.string().min(1).max(256),
  name: z.string().max(128).optional().describe('API-key requests only'),
  overrides: overridesSchema.optional(),
  dynamic_variables: dynamicVariables.optional(),
  tool_events: z.boolean().optional().describe('Default true'),
  end_user_id: z.string().max(256).optional(),
  metadata: z.record(z.string(), z.unknown()).optional().describe('Stored and returned verbatim'),
  record_audio: z.boolean().optional().describe("Omitted: the agent's setting"),
  timezone: timezoneField.optional().describe("IANA zone; over the agent's conversation.timezone"),
  client_timezone: z.string().max(LIMITS.timezoneChars).optional().describe('Used only when neither timezone nor the agent sets one; invalid names are ignored'),
  world_context: z.boolean().optional().describe('Default true'),
});
export type SessionCreateBody = z.output<typeof sessionCreateBody>;

const isoInstant = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}(:?\d{2})?)?)?$/, 'Value error, an ISO 8601 date-time')
  .refine((s) => !Number.isNaN(Date.parse(s)), { message: 'Value error, an ISO 8601 date-time', params: { type: 'datetime' } });

export const sessionListQuery = z.strictObject({
  agent_id: z.string().optional(),
  status: z
    .string()
    .optional()
    .describe(`Comma-separated: ${SESSION_STATUSES.join(', ')}; default every status except pending`)
    .superRefine((s, ctx) => {
      if (s === undefined) return;
      for (const part of s.split(','))
        if (!(SESSION_STATUSES as readonly string[]).includes(part.trim())) issue(ctx, `Value error, status must be among ${SESSION_STATUSES.join(', ')}`, 'enum');
    }),
  direction: z.enum(['inbound', 'outbound']).optional(),
  caller_number: z
    .string()
    .optional()
    .describe('Exact E.164; a bare number gets + prepended')
    .refine((s) => s === undefined || /^\+?[1-9][0-9]{1,14}$/.test(s), { message: 'Value error, an E.164 number', params: { type: 'e164' } }),
  phone_number: z
    .string()
    .optional()
    .describe('Calls through this number of yours (exact E.164; a bare number gets + prepended): inbound calls to it, outbound calls from it')
    .refine((s) => s === undefined || /^\+?[1-9][0-9]{1,14}$/.test(s), { message: 'Value error, an E.164 number', params: { type: 'e164' } }),
  created_after: isoInstant.optional(),
  created_before: isoInstant.optional(),
});

// ---------------------------------------------------------------------------------------------
// Response shapes

export const sessionCreated = z.object({
  session_id: z.string(),
  expires_at: z.string().describe('Deadline for the client to connect (creation + 60 s)'),
  max_duration_seconds: z.number().int(),
  transport: z.enum(['websocket', 'livekit']),
  websocket_url: z.string().optional().describe('transport websocket: connect to websocket_url?token=<token>'),
  livekit_url: z.string().optional().describe('transport livekit'),
  token: z.string().describe('Single-use; consumed by the client start call'),
});
export type SessionCreated = z.infer<typeof sessionCreated>;

export const sessionListRow = z.object({
  session_id: z.string(),
  agent_id: z.string(),
  agent_name: z.string(),
  name: z.string().nullable(),
  status: z.enum(SESSION_STATUSES),
  source: z.enum(['api_key', 'dashboard', 'public', 'phone']),
  direction: z.enum(['inbound', 'outbound']),
  dial_status: z.string().nullable(),
  answered_by: z.string().nullable(),
  caller_number: z.string().nullable(),
  dialed_number: z.string().nullable(),
  timezone: z.string(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  ended_at: z.string().nullable(),
  duration_seconds: z.number().int().nullable(),
  metadata: z.record(z.string(), z.unknown()),
});

const sessionItem = z.looseObject({ type: z.string(), created_at: z.string() });

export const sessionDetail = sessionListRow.extend({
  version_number: z.number().int(),
  transport: z.enum(['websocket', 'livekit']),
  expires_at: z.string(),
  max_duration_seconds: z.number().int(),
  end_user_id: z.string().nullable(),
  overrides: z.record(z.string(), z.string()).describe('The overrides in effect'),
  dynamic_variables: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).describe('secret__ variables are never returned'),
  tool_events: z.boolean(),
  record_audio: z.boolean(),
  world_context: z.boolean(),
  client_timezone: z.string().nullable(),
  ended_reason: z.string().nullable(),
  metrics: z.unknown().describe('Per-turn latency as recorded by the runtime, or null'),
  items: z.array(sessionItem),
  analysis: analysisEntity.nullable().describe('Post-call analysis; null until it settles'),
  recording: recordingSummary.nullable().describe('The recording (docs/api/recordings.md): `processing`, `complete`, or `failed` with why (`error_code` `disk_full`, `write_failed`, `upload_failed`); null when never recorded'),
});

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toListRow(r: SessionRow): z.infer<typeof sessionListRow> {
  return {
    session_id: r.id,
    agent_id: r.agent_id,
    agent_name: r.agent_name,
    name: r.name,
    status: r.status,
    source: r.source,
    direction: r.direction,
    dial_status: r.dial_status,
    answered_by: r.answered_by,
    caller_number: r.caller_number,
    dialed_number: r.dialed_number,
    timezone: r.timezone,
    created_at: r.created_at.toISOString(),
    started_at: iso(r.started_at),
    ended_at: iso(r.ended_at),
    duration_seconds: r.started_at && r.ended_at ? Math.round((r.ended_at.getTime() - r.started_at.getTime()) / 1000) : null,
    metadata: r.metadata,
  };
}

const ITEM_RANK: Record<string, number> = { message: 0, tool_call: 1, tool_result: 2 };

/** Items sorted by `created_at`; on a tie message, then tool_call, then tool_result (docs/api/sessions.md). */
export function toItems(rows: SessionItemRow[]): z.infer<typeof sessionItem>[] {
  const items = rows.map((r) => {
    const created = typeof r.payload.created_at === 'string' ? r.payload.created_at : r.created_at.toISOString();
    return { seq: r.seq, at: Date.parse(created), item: { ...r.payload, type: r.type, created_at: created } };
  });
  items.sort((a, b) => a.at - b.at || (ITEM_RANK[a.item.type] ?? 3) - (ITEM_RANK[b.item.type] ?? 3) || a.seq - b.seq);
  return items.map((i) => i.item);
}

export function toDetail(r: SessionRow, items: SessionItemRow[], recording: RecordingSummary | null = null): z.infer<typeof sessionDetail> {
  return {
    ...toListRow(r),
    version_number: r.version_number,
    transport: r.transport,
    expires_at: r.expires_at.toISOString(),
    max_duration_seconds: r.max_duration_seconds,
    end_user_id: r.end_user_id,
    overrides: r.overrides,
    dynamic_variables: r.dynamic_variables,
    tool_events: r.tool_events,
    record_audio: r.record_audio,
    world_context: r.world_context,
    client_timezone: r.client_timezone,
    ended_reason: r.ended_reason,
    metrics: r.metrics ?? null,
    items: toItems(items),
    analysis: toAnalysisView(r),
    recording,
  };
}

// ---------------------------------------------------------------------------------------------
// The service

/** Transport credentials for a livekit session: the runtime side mints a participant token. */
export type MintTransportToken = (session: SessionRow, sessionToken: string) => Promise<{ token: string; url: string }>;

export interface SessionServiceDeps {
  sql: Sql;
  state: SharedState;
  box: SecretBox;
  pricePerMinuteMicros: bigint;
  publicRatePerAgent: number;
  publicRatePerIp: number;
  /** The supervisor's cap on live sessions; false → 503. */
  hasCapacity: () => boolean;
  /** Why this node takes no new session now (its inference backlog), or null; a reason → 503. */
  overloaded?: () => string | null;
  /** Set when LiveKit is configured: sessions use transport `livekit`. */
  livekitUrl?: string;
  /** Defaults to handing out the session token itself with `livekitUrl`. */
  mintTransportToken?: MintTransportToken;
  /**
   * LiveKit only: creates the session's room on the media server, rejecting when the server
   * does not answer in time. Creation then fails with 502 `Agent gateway is unreachable`
   * before anything is charged or stored (`src/transport/livekit.ts` `livekitRoomEnsurer`).
   */
  ensureRoom?: EnsureRoom;
  /**
   * What creation reads of an agent, kept in memory and forgotten on every write of the agent
   * (D-API-5, D-SESS-2); without it every creation reads the store.
   */
  agentCache?: Pick<AgentCache, 'readForCreation'>;
  /** The recording's state for the record (`recording`); without it, null. */
  recordingSummary?: (sessionId: string) => Promise<RecordingSummary | null>;
  now?: () => number;
}

/** Makes sure the media server answers and the session's room exists; rejects otherwise. */
export type EnsureRoom = (session: { id: string; expires_at: Date; max_duration_seconds: number }) => Promise<void>;

/** A builder preview's session (`SessionService.createPreview`, called by `src/preview/service.ts`). */
export interface PreviewSessionRequest {
  teamId: string;
  agentId: string;
  /** The draft as it is now: frozen on the session row, never re-read. */
  draft: StoredDraft;
  /** What publish would pin now (tools as they are, knowledge revisions). */
  pinned: unknown;
  /** The draft's hash as clients see it (`draftHash`). */
  configHash: string;
  /** Already capped (min(600 s, the draft's max_duration_seconds)). */
  maxDurationSeconds: number;
  dynamicVariables?: Record<string, VariableValue>;
  toolEvents?: boolean;
  timezone?: string;
  clientTimezone?: string;
  worldContext?: boolean;
  host?: string;
  forwardedProto?: string;
}

/** A phone call's session (`SessionService.createPhone`). */
export interface PhoneSessionRequest {
  teamId: string;
  agentId: string;
  direction: 'inbound' | 'outbound';
  /** The calling party: the caller (inbound) or our number (outbound). */
  callerNumber: string;
  /** The called party: our number (inbound) or the person dialed (outbound). */
  dialedNumber: string;
  dynamicVariables?: Record<string, VariableValue>;
  overrides?: Overrides;
  metadata?: Record<string, unknown>;
  /** The zone of the human party's country when it has only one (docs/api/sessions.md "Time zone"). */
  phoneZone?: string | null;
  expiresInMs: number;
  /** `livekit` when the call's media is in a LiveKit room (livekit-sip carrier); default `websocket`. */
  transport?: 'websocket' | 'livekit';
}

export interface CreateRequest {
  principal?: Principal;
  /** The request body, validated by the route (`sessionCreateBody`). */
  body: SessionCreateBody;
  origin?: string;
  ip: string;
  /** The request's Host header, for `websocket_url`. */
  host?: string;
  /** `X-Forwarded-Proto`: `https` makes the URL `wss:`. */
  forwardedProto?: string;
}

/**
 * The keyless gate of a public agent, shared by keyless session creation and the widget's
 * display config (`GET /v1/agent/agents/{agent_id}/widget`): the public switch, then the
 * request's `Origin` against the agent's allow-list. Throws the 403 each step names.
 */
export function publicGate(agent: { public_enabled: boolean; allowed_origins: string[] }, originHeader: string | undefined): void {
  if (!agent.public_enabled) throw new ServiceError('forbidden', 'Agent is not public');
  if (originHeader === undefined || originHeader === '') throw new ServiceError('forbidden', 'Origin header is required for public agents');
  const origin = normalizeOrigin(originHeader);
  const allowed = new Set(agent.allowed_origins.map((o) => normalizeOrigin(o)).filter((o): o is string => o !== null));
  if (origin === null || !allowed.has(origin)) throw new ServiceError('forbidden', 'Origin not allowed');
}

/**
 * Session creation, control and the conversation record. Every check happens before anything
 * is written; the charge and the insert are one SQL statement.
 */
/** The fields of a new session `SessionService.newSession` fills unless told otherwise. */
type SessionDefaulted = 'id' | 'team_id' | 'agent_id' | 'agent_name' | 'name' | 'direction' | 'overrides' | 'dynamic_variables' | 'secret_variables' | 'tool_events' | 'end_user_id' | 'metadata' | 'client_timezone' | 'world_context' | 'price_per_minute_micros' | 'caller_number' | 'dialed_number';

export class SessionService {
  private readonly now: () => number;
  /** API and public creations go to the store in batches (D-SESS-2). */
  private readonly creations: CreationBatcher;

  constructor(private readonly deps: SessionServiceDeps) {
    this.now = deps.now ?? Date.now;
    this.creations = new CreationBatcher(deps.sql, deps.pricePerMinuteMicros);
  }

  /**
   * Check order. API key: body (422) → agent (404) → archived / unpublished (409) → overrides
   * (400) → capacity (503) → credit (402, in the insert's transaction). Keyless: body (422) →
   * agent (404) → public switch, Origin, allow-list (403) → per-IP then per-agent window (429)
   * → name / overrides (400) → archived / unpublished (409) → owner credit (403 unavailable) →
   * capacity (503).
   */
  async create(req: CreateRequest): Promise<SessionCreated> {
    const body = req.body;
    const isPublic = req.principal === undefined;
    const teamId = req.principal?.teamId;
    // The agent of any team, kept in the agent cache; the caller's team is checked on every read.
    const agent = this.deps.agentCache
      ? await this.deps.agentCache.readForCreation(teamId, body.agent_id, () => getSessionForCreation(this.deps.sql, body.agent_id, undefined))
      : await getSessionForCreation(this.deps.sql, body.agent_id, teamId);
    if (!agent) throw notFound('Agent');

    if (isPublic) {
      publicGate(agent, req.origin);
      await this.rateLimit(agent.id, req.ip);
      if (body.name !== undefined) throw new ServiceError('bad_request', 'Session name requires an API key');
    }
    if (agent.status === 'archived') throw new ServiceError('conflict', 'Agent is archived');
    if (agent.version_number === null) throw new ServiceError('conflict', 'Agent has no published version');
    const overrides = body.overrides ?? {};
    for (const field of Object.keys(overrides)) {
      const gate = field === 'first_message_prompt' ? 'first_message' : field;
      if (!agent.overrides_allowed.includes(gate) || (isPublic && !PUBLIC_OVERRIDES.has(field)))
        throw new ServiceError('bad_request', `Override not allowed: ${field}`);
    }
    this.admit();

    const config = agent.config!;
    const token = randomBytes(32).toString('base64url');
    const createdAt = this.now();
    const session = this.newSession(agent, (body.dynamic_variables ?? {}) as Record<string, VariableValue>, {
      version_number: agent.version_number,
      config_hash: agent.config_hash!,
      name: body.name ?? null,
      source: isPublic ? 'public' : 'api_key',
      transport: this.deps.livekitUrl ? 'livekit' : 'websocket',
      expires_at: new Date(createdAt + SESSION_TOKEN_TTL_MS),
      max_duration_seconds: config.conversation.max_duration_seconds,
      overrides: overrides as Record<string, string>,
      tool_events: body.tool_events ?? true,
      end_user_id: body.end_user_id ?? null,
      metadata: body.metadata ?? {},
      record_audio: body.record_audio ?? config.conversation.record_audio,
      timezone: resolveTimezone({ request: body.timezone, agent: config.conversation.timezone, client: body.client_timezone }),
      client_timezone: body.client_timezone ?? null,
      world_context: body.world_context ?? true,
      token_hash: createHash('sha256').update(token).digest('hex'),
    });
    await this.gateway(session);
    // The token goes to the shared state while the session is inserted (D-SESS-3): one wait
    // instead of two. Nobody holds the token before the answer, which waits for both; a
    // creation that inserts nothing takes its token keys back.
    const tokenStored = this.storeToken(token, session.id);
    let row: SessionRow | undefined;
    try {
      row = await this.creations.insert(session, isPublic ? 'require' : 'hold');
    } finally {
      if (!row) void tokenStored.then(() => this.forgetToken(token, session.id));
    }
    if (!row) throw isPublic ? new ServiceError('forbidden', 'Agent is unavailable') : new ServiceError('payment_required', 'Out of API credit');
    return this.issue(row, token, req, tokenStored);
  }

  /** Stores a session's token and its reverse key; resolves to the error when it could not (never rejects). */
  private storeToken(token: string, sessionId: string): Promise<unknown> {
    return Promise.all([
      this.deps.state.set(sessionTokenKey(token), sessionId, SESSION_TOKEN_TTL_MS),
      this.deps.state.set(sessionTokenOfKey(sessionId), token, SESSION_TOKEN_TTL_MS),
    ]).then(() => null, (err: unknown) => err ?? new Error('token store failed'));
  }

  /** Best effort: the keys of a token nobody was given (they expire in 60 s anyway). */
  private async forgetToken(token: string, sessionId: string): Promise<void> {
    await Promise.all([this.deps.state.del(sessionTokenKey(token)), this.deps.state.del(sessionTokenOfKey(sessionId))]).catch(() => {});
  }

  /**
   * LiveKit sessions: the room must exist on the media server before the client is told to
   * join it. Runs before the insert, so a 502 leaves no session and no charge (retry is safe).
   */
  private async gateway(session: { id: string; transport: string; expires_at: Date; max_duration_seconds: number }): Promise<void> {
    if (session.transport !== 'livekit' || !this.deps.ensureRoom) return;
    try {
      await this.deps.ensureRoom(session);
    } catch (err) {
      throw new ServiceError('upstream', 'Agent gateway is unreachable', { cause: err });
    }
  }

  /**
   * Answers a just-inserted session's connection details once its token is stored
   * (`stored`: from `storeToken`, already under way; else stored now).
   */
  private async issue(row: SessionRow, token: string, req: { host?: string; forwardedProto?: string }, stored?: Promise<unknown>): Promise<SessionCreated> {
    const err = await (stored ?? this.storeToken(token, row.id));
    if (err) {
      // Nobody can ever join: end it at once so the hold is refunded.
      await markSessionEnded(this.deps.sql, row.id, { status: 'failed', reason: 'token_store_unavailable' }).catch(() => {});
      throw dependencyUnavailable('Session token store is unavailable: try again shortly', err);
    }

    const out: SessionCreated = {
      session_id: row.id,
      expires_at: row.expires_at.toISOString(),
      max_duration_seconds: row.max_duration_seconds,
      transport: row.transport,
      token,
    };
    if (row.transport === 'livekit') {
      const mint = this.deps.mintTransportToken ?? (async (_s: SessionRow, t: string) => ({ token: t, url: this.deps.livekitUrl! }));
      const minted = await mint(row, token);
      out.livekit_url = minted.url;
      out.token = minted.token;
    } else {
      const scheme = req.forwardedProto?.split(',')[0]?.trim().toLowerCase() === 'https' ? 'wss' : 'ws';
      out.websocket_url = `${scheme}://${req.host || 'localhost'}/v1/agent/sessions/connect`;
    }
    return out;
  }

  /**
   * A session for a phone call (inbound to a bound number, or outbound through
   * `POST /v1/agent/phone-calls`): the same agent checks, capacity and up-front hold as
   * `create`, without a client token (the carrier's call is the connection; the runtime starts
   * it with `startCall`). Check order: agent (404) → archived / unpublished (409) → overrides
   * (400) → capacity (503) → credit (402, in the insert). `expiresInMs`: how long the session
   * may stay pending (ringing) before its hold is refunded by the sweep.
   */
  async createPhone(o: PhoneSessionRequest): Promise<SessionRow> {
    const agent = await getSessionForCreation(this.deps.sql, o.agentId, o.teamId);
    if (!agent) throw notFound('Agent');
    if (agent.status === 'archived') throw new ServiceError('conflict', 'Agent is archived');
    if (agent.version_number === null) throw new ServiceError('conflict', 'Agent has no published version');
    const overrides = o.overrides ?? {};
    for (const field of Object.keys(overrides)) {
      const gate = field === 'first_message_prompt' ? 'first_message' : field;
      if (!agent.overrides_allowed.includes(gate)) throw new ServiceError('bad_request', `Override not allowed: ${field}`);
    }
    this.admit();
    const config = agent.config!;
    const human = o.direction === 'inbound' ? o.callerNumber : o.dialedNumber;
    const price = this.deps.pricePerMinuteMicros;
    const row = await insertSession(
      this.deps.sql,
      this.newSession(agent, o.dynamicVariables ?? {}, {
        version_number: agent.version_number,
        config_hash: agent.config_hash!,
        source: 'phone',
        direction: o.direction,
        transport: o.transport ?? 'websocket',
        expires_at: new Date(this.now() + o.expiresInMs),
        max_duration_seconds: config.conversation.max_duration_seconds,
        overrides: overrides as Record<string, string>,
        metadata: o.metadata ?? {},
        record_audio: config.conversation.record_audio,
        timezone: resolveTimezone({ agent: config.conversation.timezone, phone: o.phoneZone ?? null }),
        // docs/api/sessions.md: on outbound calls `caller_number` is the person dialed.
        caller_number: human,
        dialed_number: o.direction === 'inbound' ? o.dialedNumber : o.callerNumber,
        token_hash: createHash('sha256').update(randomBytes(32)).digest('hex'),
      }),
      { mode: 'hold', amountMicros: price },
    );
    if (!row) throw new ServiceError('payment_required', 'Out of API credit');
    return row;
  }

  /**
   * A new session row of `agent` for any source (API, public, phone, preview): a fresh id, the
   * agent's identity, the dynamic variables split with the secret ones sealed, the node's price,
   * and the defaults the sources share; `fields` sets what the source decides.
   */
  private newSession(agent: { id: string; team_id: string; name: string }, variables: Record<string, VariableValue>, fields: Omit<NewSession, SessionDefaulted> & Partial<Pick<NewSession, SessionDefaulted>>): NewSession {
    const { plain, secret } = splitSecretVariables(variables);
    return {
      id: newId('sess'),
      team_id: agent.team_id,
      agent_id: agent.id,
      agent_name: agent.name,
      name: null,
      direction: 'inbound',
      overrides: {},
      dynamic_variables: plain,
      secret_variables: Object.keys(secret).length ? this.deps.box.seal(JSON.stringify(secret)) : null,
      tool_events: true,
      end_user_id: null,
      metadata: {},
      client_timezone: null,
      world_context: true,
      price_per_minute_micros: this.deps.pricePerMinuteMicros,
      caller_number: null,
      dialed_number: null,
      ...fields,
    };
  }

  /** The client IP's window first: a client over its own limit does not use up the agent's shared window. */
  private async rateLimit(agentId: string, ip: string): Promise<void> {
    const checks: [string, number][] = [
      [`rate:public-session:ip:${ip}`, this.deps.publicRatePerIp],
      [`rate:public-session:agent:${agentId}`, this.deps.publicRatePerAgent],
    ];
    for (const [key, limit] of checks) {
      const r = await this.deps.state.hit(key, RATE_WINDOW_MS, limit);
      if (!r.allowed) throw new ServiceError('rate_limited', 'Too many requests', { headers: { 'Retry-After': String(Math.max(1, Math.ceil(r.retryAfterMs / 1000))) } });
    }
  }

  /** A new session fits on this node: under its cap and not behind (else 503 with `Retry-After`). */
  private admit(): void {
    if (!this.deps.hasCapacity()) throw new ServiceError('unavailable', 'Session capacity reached on this node', { headers: { 'Retry-After': '1' } });
    const behind = this.deps.overloaded?.();
    if (behind) throw new ServiceError('unavailable', behind, { headers: { 'Retry-After': '1' } });
  }

  /**
   * A builder preview (docs/api/preview.md): a session of the draft frozen as `o.draft`, source
   * `dashboard`, version 0, no recording, billed like an API-key session (hold up front, usage
   * settled at the end). Check order: agent (404) → archived (409) → capacity (503) →
   * gateway (502) → credit (402, in the insert). Same token and transports as `create`.
   */
  async createPreview(o: PreviewSessionRequest): Promise<SessionCreated> {
    const agent = await getSessionForCreation(this.deps.sql, o.agentId, o.teamId);
    if (!agent) throw notFound('Agent');
    if (agent.status === 'archived') throw new ServiceError('conflict', 'Agent is archived');
    this.admit();
    const config = o.draft;
    const token = randomBytes(32).toString('base64url');
    const price = this.deps.pricePerMinuteMicros;
    const session = this.newSession(agent, o.dynamicVariables ?? {}, {
      version_number: 0,
      config_hash: o.configHash,
      source: 'dashboard',
      transport: this.deps.livekitUrl ? 'livekit' : 'websocket',
      expires_at: new Date(this.now() + SESSION_TOKEN_TTL_MS),
      max_duration_seconds: o.maxDurationSeconds,
      tool_events: o.toolEvents ?? true,
      record_audio: false,
      timezone: resolveTimezone({ request: o.timezone, agent: config.conversation.timezone, client: o.clientTimezone }),
      client_timezone: o.clientTimezone ?? null,
      world_context: o.worldContext ?? true,
      token_hash: createHash('sha256').update(token).digest('hex'),
      preview: true,
      preview_config: config,
      preview_pinned: o.pinned ?? {},
    });
    await this.gateway(session);
    const row = await insertSession(this.deps.sql, session, { mode: 'hold', amountMicros: price });
    if (!row) throw new ServiceError('payment_required', 'Out of API credit');
    return this.issue(row, token, o);
  }

  /**
   * Force-ends a session: a pending one is ended here (`completed`, `ended_by_api`) and its token
   * deleted; in every case `session-control` carries the end to whichever node holds it.
   */
  async end(p: Principal, sessionId: string): Promise<void> {
    const s = await getSession(this.deps.sql, p.teamId, sessionId);
    if (!s) throw notFound('Session');
    await this.endSession(s);
  }

  /** `end` for a row the caller already found (a preview: `src/preview/service.ts`). */
  async endSession(s: SessionRow): Promise<void> {
    if (s.status === 'pending') {
      await markSessionEnded(this.deps.sql, s.id, { status: 'completed', reason: 'ended_by_api' });
      const token = await this.deps.state.take(sessionTokenOfKey(s.id));
      if (token) await this.deps.state.del(sessionTokenKey(token));
    }
    await this.deps.state.publish(SESSION_CONTROL_CHANNEL, JSON.stringify({ session_id: s.id, action: 'end', reason: 'api' }));
  }

  async get(p: Principal, sessionId: string) {
    const s = await getSession(this.deps.sql, p.teamId, sessionId);
    if (!s) throw notFound('Session');
    const [items, recording] = await Promise.all([listSessionItems(this.deps.sql, s.id), this.deps.recordingSummary?.(s.id) ?? null]);
    return toDetail(s, items, recording);
  }

  list(p: Principal, q: z.output<typeof sessionListQuery>, page: PageRequest) {
    const f: SessionFilter = {
      agentId: q.agent_id,
      statuses: q.status !== undefined ? [...new Set(q.status.split(',').map((s) => s.trim()))] : SESSION_STATUSES.filter((s) => s !== 'pending'),
      direction: q.direction,
      callerNumber: q.caller_number === undefined ? undefined : q.caller_number.startsWith('+') ? q.caller_number : `+${q.caller_number}`,
      phoneNumber: q.phone_number === undefined ? undefined : q.phone_number.startsWith('+') ? q.phone_number : `+${q.phone_number}`,
      createdAfter: q.created_after !== undefined ? new Date(q.created_after) : undefined,
      createdBefore: q.created_before !== undefined ? new Date(q.created_before) : undefined,
    };
    return listSessions(this.deps.sql, p.teamId, f, page);
  }
}
