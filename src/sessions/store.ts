import type { StoredDraft } from '../agent-config/index.ts';
import type { Sql } from '../store/db.ts';
import { paginate, type Page, type PageRequest } from '../store/paginate.ts';
import { postCallQueueCte } from '../webhooks/store.ts';

export type SessionStatus = 'pending' | 'active' | 'completed' | 'failed';
export type SessionSource = 'api_key' | 'public' | 'phone' | 'dashboard';
export type SessionTransport = 'websocket' | 'livekit';
export type Scalar = string | number | boolean;

/** One `sessions` row (docs/sessions-contract.md); bigint columns arrive as bigint. */
export interface SessionRow {
  id: string;
  team_id: string;
  agent_id: string;
  agent_name: string;
  version_number: number;
  config_hash: string;
  name: string | null;
  source: SessionSource;
  direction: 'inbound' | 'outbound';
  status: SessionStatus;
  transport: SessionTransport;
  expires_at: Date;
  max_duration_seconds: number;
  /** The overrides in effect: `first_message`, `first_message_prompt`, `system_prompt`, `voice_id`, `language`. */
  overrides: Record<string, string>;
  /** Caller variables without the `secret__` ones. */
  dynamic_variables: Record<string, Scalar>;
  /** SecretBox-sealed JSON object of the `secret__` variables (tool requests only), or null. */
  secret_variables: string | null;
  tool_events: boolean;
  end_user_id: string | null;
  metadata: Record<string, unknown>;
  record_audio: boolean;
  /** The resolved IANA zone (order of docs/api/sessions.md "Time zone"); `UTC` as the fallback. */
  timezone: string;
  client_timezone: string | null;
  world_context: boolean;
  price_per_minute_micros: bigint;
  /** Net amount the team paid for this session so far (the hold until settlement). */
  charged_micros: bigint;
  caller_number: string | null;
  dialed_number: string | null;
  dial_status: string | null;
  answered_by: string | null;
  created_at: Date;
  started_at: Date | null;
  ended_at: Date | null;
  ended_reason: string | null;
  node_id: string | null;
  metrics: unknown;
  token_hash: string;
  /** Post-call analysis (migration 009): null (none: never joined), queued, running, completed, skipped, error. */
  analysis_status?: string | null;
  /** The settled analysis entity (docs/api/analysis.md), null until settled. */
  analysis?: unknown;
  analysis_finished_at?: Date | null;
  /** A builder preview (migration 011): never listed, no webhooks, no transcript kept; version_number 0. */
  preview?: boolean;
  /** The draft frozen at a preview's creation (null on other sessions). */
  preview_config?: StoredDraft | null;
  /** What publish would have pinned at a preview's creation (tools, knowledge revisions). */
  preview_pinned?: unknown;
}

export type NewSession = Omit<
  SessionRow,
  'status' | 'created_at' | 'started_at' | 'ended_at' | 'ended_reason' | 'node_id' | 'metrics' | 'charged_micros' | 'dial_status' | 'answered_by'
>;

/**
 * How creation pays: `hold` charges `amountMicros` up front in the insert's transaction
 * (API-key callers; never overdraws); `require` charges nothing but needs the owner to hold at
 * least `minimumMicros` (public agents: usage is billed at settlement).
 */
export type CreationBilling = { mode: 'hold'; amountMicros: bigint } | { mode: 'require'; minimumMicros: bigint };

/**
 * Inserts the session and takes its payment in ONE statement (atomic on its own; no
 * multi-statement transaction, which the embedded PGlite cannot interleave). Returns
 * undefined, with nothing charged and nothing inserted, when the team's credit is short.
 * The hold is one conditional UPDATE on the team row: concurrent creations queue on that row
 * and can never overdraw.
 */
export async function insertSession(sql: Sql, s: NewSession, billing: CreationBilling): Promise<SessionRow | undefined> {
  const hold = billing.mode === 'hold' ? billing.amountMicros : 0n;
  const gate =
    billing.mode === 'hold'
      ? sql`update teams set credit_micros = credit_micros - ${hold.toString()}::bigint
            where id = ${s.team_id} and credit_micros >= ${hold.toString()}::bigint returning id`
      : sql`select id from teams where id = ${s.team_id} and credit_micros >= ${billing.minimumMicros.toString()}::bigint`;
  const [row] = await sql<SessionRow[]>`
    with paid as (${gate}),
    ledger as (
      insert into credit_ledger (team_id, amount_micros, reason, ref)
      select id, ${(-hold).toString()}::bigint, 'session_hold', ${s.id} from paid where ${hold.toString()}::bigint <> 0
    )
    insert into sessions (
      id, team_id, agent_id, agent_name, version_number, config_hash, name, source, direction, transport,
      expires_at, max_duration_seconds, overrides, dynamic_variables, secret_variables, tool_events, end_user_id,
      metadata, record_audio, timezone, client_timezone, world_context, price_per_minute_micros, charged_micros,
      caller_number, dialed_number, token_hash, preview, preview_config, preview_pinned)
    select
      ${s.id}, ${s.team_id}, ${s.agent_id}, ${s.agent_name}, ${s.version_number}, ${s.config_hash}, ${s.name}, ${s.source},
      ${s.direction}, ${s.transport}, ${s.expires_at}, ${s.max_duration_seconds}, ${sql.json(s.overrides as never)},
      ${sql.json(s.dynamic_variables as never)}, ${s.secret_variables}, ${s.tool_events}, ${s.end_user_id},
      ${s.metadata as never}::json, ${s.record_audio}, ${s.timezone}, ${s.client_timezone}, ${s.world_context},
      ${s.price_per_minute_micros.toString()}::bigint, ${hold.toString()}::bigint, ${s.caller_number}, ${s.dialed_number}, ${s.token_hash},
      ${s.preview ?? false}, ${s.preview_config ? sql.json(s.preview_config as never) : null}, ${s.preview ? sql.json((s.preview_pinned ?? {}) as never) : null}
    from paid
    returning *`;
  return row;
}

/** The columns a new session sets (the rest take their defaults). */
const NEW_SESSION_COLUMNS = [
  'id', 'team_id', 'agent_id', 'agent_name', 'version_number', 'config_hash', 'name', 'source', 'direction', 'transport',
  'expires_at', 'max_duration_seconds', 'overrides', 'dynamic_variables', 'secret_variables', 'tool_events', 'end_user_id',
  'metadata', 'record_audio', 'timezone', 'client_timezone', 'world_context', 'price_per_minute_micros', 'charged_micros',
  'caller_number', 'dialed_number', 'token_hash', 'preview', 'preview_config', 'preview_pinned',
] as const;

/**
 * Several creations in ONE statement, as `insertSession` would take them one after another in
 * this order (bench/README.md, "Creations"): each `hold` takes `priceMicros` from its team
 * while the credit covers it, each `require` needs the credit left after the holds before it
 * to be at least `priceMicros`. Every creation pays the same `priceMicros` (the node's price):
 * then a running sum per team decides exactly what the statements in a row would have, since
 * after the first refusal of a team every later one is refused too. The team rows are locked
 * in id order (two batches never deadlock), each team's credit is debited once, and every
 * ledger entry and session is inserted, all or nothing. Answers in the order given: the row,
 * or undefined where the credit was short (nothing charged, nothing inserted for it).
 */
export async function insertSessions(sql: Sql, items: { session: NewSession; mode: 'hold' | 'require' }[], priceMicros: bigint): Promise<(SessionRow | undefined)[]> {
  const price = priceMicros.toString();
  const rows = items.map(({ session: s, mode }) => {
    const o: Record<string, unknown> = {};
    for (const c of NEW_SESSION_COLUMNS) {
      const v = (s as unknown as Record<string, unknown>)[c];
      o[c] = typeof v === 'bigint' ? v.toString() : v instanceof Date ? v.toISOString() : v ?? null;
    }
    o.preview = s.preview ?? false;
    o.preview_pinned = s.preview ? (s.preview_pinned ?? {}) : null;
    o.charged_micros = mode === 'hold' ? price : '0';
    o.holds = mode === 'hold';
    // \`metadata\` is a json column that keeps the caller's key order: carried as its text,
    // since the batch itself travels as jsonb (which sorts keys).
    o.metadata = null;
    o.metadata_text = JSON.stringify(s.metadata ?? {});
    return o;
  });
  // Constant identifiers, not input.
  const cols = sql.unsafe(NEW_SESSION_COLUMNS.join(', '));
  const values = sql.unsafe(NEW_SESSION_COLUMNS.map((c) => (c === 'metadata' ? 'metadata_text::json' : c)).join(', '));
  const inserted = await sql<SessionRow[]>`
    with req as (
      select e.n, (e.j->>'holds')::boolean as holds, e.j->>'metadata_text' as metadata_text, s.*
      from jsonb_array_elements(${sql.json(rows as never)}::jsonb) with ordinality as e(j, n),
           lateral jsonb_populate_record(null::sessions, e.j) as s
    ),
    team as (
      select id, credit_micros from teams where id in (select team_id from req) order by id for update
    ),
    ok as (
      select * from (
        select req.*, team.credit_micros - sum(req.charged_micros) over (partition by req.team_id order by req.n) as left_after
        from req join team on team.id = req.team_id
      ) r
      where r.left_after >= case when r.holds then 0 else ${price}::bigint end
    ),
    paid as (
      update teams set credit_micros = teams.credit_micros - t.total
      from (select team_id, sum(charged_micros) as total from ok group by team_id) t
      where teams.id = t.team_id and t.total <> 0
    ),
    ledger as (
      insert into credit_ledger (team_id, amount_micros, reason, ref)
      select team_id, -charged_micros, 'session_hold', id from ok where charged_micros <> 0 order by n
    )
    insert into sessions (${cols})
    select ${values} from ok order by n
    returning *`;
  const byId = new Map(inserted.map((r) => [r.id, r]));
  return items.map(({ session }) => byId.get(session.id));
}

/** An agent with what session creation needs, and its latest published version (nulls when never published). */
export interface AgentForSession {
  id: string;
  team_id: string;
  name: string;
  status: 'active' | 'archived';
  public_enabled: boolean;
  allowed_origins: string[];
  overrides_allowed: string[];
  version_number: number | null;
  config_hash: string | null;
  config: StoredDraft | null;
}

/**
 * One query for creation: the agent (of `teamId`, or of any team for keyless requests to
 * public agents) and its latest version.
 */
export async function getSessionForCreation(sql: Sql, agentId: string, teamId: string | undefined): Promise<AgentForSession | undefined> {
  const [row] = await sql<AgentForSession[]>`
    select a.id, a.team_id, a.name, a.status, a.public_enabled, a.allowed_origins, a.overrides_allowed,
           v.version_number, v.config_hash, v.config
    from agents a
    left join lateral (
      select version_number, config_hash, config from agent_versions where agent_id = a.id order by version_number desc limit 1
    ) v on true
    where a.id = ${agentId} ${teamId !== undefined ? sql`and a.team_id = ${teamId}` : sql``}`;
  return row;
}

/** One of the team's sessions (another team's is undefined, like a missing one; so is a preview). */
export async function getSession(sql: Sql, teamId: string, id: string): Promise<SessionRow | undefined> {
  const [row] = await sql<SessionRow[]>`select * from sessions where id = ${id} and team_id = ${teamId} and not preview`;
  return row;
}

/** One of the team's previews of `agentId` (anything else is undefined). */
export async function getPreviewSession(sql: Sql, teamId: string, agentId: string, id: string): Promise<SessionRow | undefined> {
  const [row] = await sql<SessionRow[]>`select * from sessions where id = ${id} and team_id = ${teamId} and agent_id = ${agentId} and preview`;
  return row;
}

/**
 * What the runtime needs to run a session: its row and the version it runs (config and pins).
 * A preview runs the draft frozen on its row at creation, never the draft as it is now.
 */
export async function getSessionRuntime(sql: Sql, sessionId: string): Promise<{ session: SessionRow; config: StoredDraft; pinned: unknown } | undefined> {
  const [session] = await sql<SessionRow[]>`select * from sessions where id = ${sessionId}`;
  if (!session) return undefined;
  if (session.preview) return session.preview_config ? { session, config: session.preview_config, pinned: session.preview_pinned ?? {} } : undefined;
  const [version] = await sql<{ config: StoredDraft; pinned: unknown }[]>`
    select config, pinned from agent_versions where agent_id = ${session.agent_id} and version_number = ${session.version_number}`;
  if (!version) return undefined; // the agent was deleted since
  return { session, config: version.config, pinned: version.pinned };
}

/** pending → active: sets `started_at` and the node. False when the session is not pending. */
export async function markSessionActive(sql: Sql, sessionId: string, nodeId: string): Promise<boolean> {
  const rows = await sql`
    update sessions set status = 'active', started_at = clock_timestamp(), node_id = ${nodeId}
    where id = ${sessionId} and status = 'pending' returning id`;
  return rows.length === 1;
}

/**
 * active → pending again, for an activation whose answer was lost (the connection dropped just
 * after the commit) and that no session runs on: only while `nodeId` still holds it and it has
 * not ended. False when there was nothing to undo (the activation never committed).
 */
export async function undoSessionActive(sql: Sql, sessionId: string, nodeId: string): Promise<boolean> {
  const rows = await sql`
    update sessions set status = 'pending', started_at = null, node_id = null
    where id = ${sessionId} and status = 'active' and node_id = ${nodeId} returning id`;
  return rows.length === 1;
}

/**
 * Ends a pending or active session; only the first call ends it (later calls return false and
 * change nothing). The same statement settles usage against what creation charged: the cost is
 * every started minute between `started_at` and `ended_at` at the price fixed at creation (a
 * session nobody joined costs nothing); the difference is charged (`session_usage`) or
 * refunded (`session_refund`) with a ledger entry, and `charged_micros` becomes the cost.
 * Settlement never refuses for lack of credit (the balance may go below zero: the usage happened).
 * The same statement queues the post-call webhook deliveries (`postCallQueueCte`).
 */
export async function markSessionEnded(
  sql: Sql,
  sessionId: string,
  end: { status: 'completed' | 'failed'; reason: string; metrics?: unknown; /** When it ended, if before now (a lost node's last beat). */ at?: Date },
): Promise<boolean> {
  const metrics = end.metrics === undefined ? sql`s.metrics` : sql`${sql.json(end.metrics as never)}`;
  const endedAt = end.at ? sql`least(clock_timestamp(), ${end.at}::timestamptz)` : sql`clock_timestamp()`;
  const rows = await sql`
    with n as (select ${endedAt} as ts),
    ended as (
      update sessions s set
        status = ${end.status}, ended_at = n.ts, ended_reason = ${end.reason}, metrics = ${metrics},
        charged_micros = case when s.started_at is null then 0
          else greatest(1, ceil(extract(epoch from (n.ts - s.started_at)) / 60))::bigint * s.price_per_minute_micros end,
        ${analysisOnEnd(sql)}
      from n, (select x.id, x.charged_micros as held, ${analysisRuns(sql)} as run_analysis from sessions x where x.id = ${sessionId}) o
      where s.id = o.id and s.status in ('pending', 'active')
      returning s.*, s.charged_micros - o.held as diff
    ),
    credit as (update teams t set credit_micros = t.credit_micros - e.diff from ended e where t.id = e.team_id and e.diff <> 0),
    ledger as (
      insert into credit_ledger (team_id, amount_micros, reason, ref)
      select team_id, -diff, case when diff > 0 then 'session_usage' else 'session_refund' end, id from ended where diff <> 0
    ),
    webhooks as (${postCallQueueCte(sql)}),
    -- A preview keeps no transcript: its items go now unless its analysis still needs them.
    purge as (delete from session_items i using ended e where i.session_id = e.id and e.preview and e.analysis_status is distinct from 'queued')
    select id from ended`;
  return rows.length === 1;
}

/**
 * Whether the analysis of session row `x` makes a model call (docs/api/analysis.md): the version it ran
 * has analysis enabled (summary on, or a data field or criterion) and the caller said something.
 * False otherwise, including when the version is gone.
 */
function analysisRuns(sql: Sql) {
  return sql`coalesce((
    select (coalesce((v.config->'analysis'->'summary'->>'enabled')::boolean, true)
            or jsonb_array_length(coalesce(v.config->'analysis'->'data_fields', '[]'::jsonb)) > 0
            or jsonb_array_length(coalesce(v.config->'analysis'->'criteria', '[]'::jsonb)) > 0)
      and exists (select 1 from session_items i where i.session_id = x.id and i.type = 'message' and i.payload->>'role' = 'user')
    from (
      select config from agent_versions where agent_id = x.agent_id and version_number = x.version_number and not x.preview
      union all
      -- a preview: the draft frozen at its creation
      select x.preview_config where x.preview
    ) v), false)`;
}

/**
 * The analysis columns an end sets (issue 8): a session someone joined gets its analysis
 * `queued` (due now; the analysis worker runs it) or settled as `skipped` at once; a session
 * nobody joined gets none (status null, like an expired pending one). Needs `n.ts` and `o.run_analysis`.
 */
function analysisOnEnd(sql: Sql) {
  return sql`
    analysis_status = case when s.started_at is null then null when o.run_analysis then 'queued' else 'skipped' end,
    analysis = case when s.started_at is not null and not o.run_analysis
      then '{"status":"skipped","summary":null,"data":[],"criteria_results":[]}'::jsonb end,
    analysis_due_at = case when s.started_at is not null and o.run_analysis then n.ts end,
    analysis_finished_at = case when s.started_at is not null and not o.run_analysis then n.ts end`;
}

export interface SessionItemRow {
  seq: number;
  type: string;
  payload: Record<string, unknown>;
  created_at: Date;
}

/** Items to append to one session's record, in order; `ref` as `appendSessionItems` says. */
export interface SessionItemsAppend {
  sessionId: string;
  items: { type: string; payload: unknown; ref?: string }[];
}

/**
 * Appends transcript / tool items in order (`seq` continues from the last item), in one
 * statement; a concurrent append that took the same `seq` is retried. An item with a `ref`
 * that the session already holds is skipped: a batch retried after a lost answer (its commit
 * unknown) writes only what is missing, and the items' `seq` stay contiguous.
 */
export function appendSessionItems(sql: Sql, sessionId: string, items: { type: string; payload: unknown; ref?: string }[]): Promise<void> {
  return appendItemsOfSessions(sql, [{ sessionId, items }]);
}

/**
 * `appendSessionItems` for several sessions in one statement (`item-batch.ts`): each session's
 * items in its own order, its `seq` from its own last item; items of a session that does not
 * exist are dropped. One commit for all of them, where one statement per session cost a commit,
 * a round trip and the driver's work per turn (bench/README.md, "Nineteenth pass").
 */
export async function appendItemsOfSessions(sql: Sql, groups: SessionItemsAppend[]): Promise<void> {
  const list = groups.flatMap((g) => g.items.map((i) => ({ s: g.sessionId, type: i.type, payload: i.payload, ref: i.ref ?? null })));
  if (list.length === 0) return;
  for (let attempt = 0; ; attempt++) {
    try {
      await sql`
        insert into session_items (session_id, seq, type, payload, ref)
        select s.id, coalesce((select max(seq) from session_items where session_id = s.id), 0)
            + row_number() over (partition by s.id order by e.ord),
          e.item->>'type', e.item->'payload', e.item->>'ref'
        from jsonb_array_elements(${sql.json(list as never)}::jsonb) with ordinality as e(item, ord)
        join sessions s on s.id = e.item->>'s'
        where not exists (select 1 from session_items x where x.session_id = s.id and x.ref = e.item->>'ref')`;
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '23505' || attempt >= 5) throw err;
    }
  }
}

export async function listSessionItems(sql: Sql, sessionId: string): Promise<SessionItemRow[]> {
  return sql<SessionItemRow[]>`select seq, type, payload, created_at from session_items where session_id = ${sessionId} order by seq`;
}

/** `createdAfter` / `createdBefore` are exclusive at the millisecond precision clients see. */
export interface SessionFilter {
  agentId?: string;
  statuses: string[];
  direction?: 'inbound' | 'outbound';
  callerNumber?: string;
  /** Phone calls through this number of the team's (`dialed_number` is the team's side in both directions). */
  phoneNumber?: string;
  createdAfter?: Date;
  createdBefore?: Date;
}

export function listSessions(sql: Sql, teamId: string, f: SessionFilter, page: PageRequest): Promise<Page<SessionRow>> {
  // Previews are never listed (docs/api/sessions.md).
  const where = sql`
    team_id = ${teamId} and status in ${sql(f.statuses)} and not preview
    ${f.agentId !== undefined ? sql`and agent_id = ${f.agentId}` : sql``}
    ${f.direction !== undefined ? sql`and direction = ${f.direction}` : sql``}
    ${f.callerNumber !== undefined ? sql`and caller_number = ${f.callerNumber}` : sql``}
    ${f.phoneNumber !== undefined ? sql`and source = 'phone' and dialed_number = ${f.phoneNumber}` : sql``}
    ${f.createdAfter !== undefined ? sql`and date_trunc('milliseconds', created_at) > ${f.createdAfter}` : sql``}
    ${f.createdBefore !== undefined ? sql`and created_at < ${f.createdBefore}` : sql``}`;
  return paginate<SessionRow>(sql, { select: sql`*`, from: sql`sessions`, where, order: 'created', page });
}

/**
 * Pending sessions whose `expires_at` passed keep status `pending` (docs/api/sessions.md) but give
 * their hold back: a refund ledger entry each, `charged_micros` set to 0. Returns how many.
 * Meant for a periodic sweep (the runtime's supervisor). A refunded session that still
 * becomes active is charged in full at its end (settlement charges cost − charged).
 */
export async function refundExpiredHolds(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    with x as (
      select id, charged_micros as held from sessions
      where status = 'pending' and expires_at < clock_timestamp() and charged_micros > 0
      for update skip locked
    ),
    e as (update sessions s set charged_micros = 0 from x where s.id = x.id returning s.id, s.team_id, x.held),
    g as (select team_id, sum(held)::bigint as total from e group by team_id),
    credit as (update teams t set credit_micros = t.credit_micros + g.total from g where t.id = g.team_id),
    ledger as (insert into credit_ledger (team_id, amount_micros, reason, ref) select team_id, held, 'session_refund', id from e)
    select count(*)::int as n from e`;
  return row!.n;
}
