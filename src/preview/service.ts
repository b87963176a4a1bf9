/**
 * Builder preview calls (docs/api/preview.md; the API is our design, D-PREV-1).
 *
 * A preview is a session of the agent's draft as it is when the preview is created: the draft
 * and what publish would pin then (tools as they are, knowledge revisions) are frozen on the
 * session row, so later edits of the draft change nothing for it. Otherwise it is a session
 * like any other (same token, transports, runtime, billing), with these differences:
 * - length: min(600 s, the draft's `max_duration_seconds`);
 * - no history: never listed, 404 on `/v1/agent/sessions/{id}` (and its recording and
 *   deliveries), no recording, and its transcript is deleted once its analysis settled;
 * - no webhooks (`call.ended`, `call.analyzed`);
 * - its analysis runs and is readable only here (`GET .../preview/{session_id}`).
 */
import { z } from 'zod';
import { analysisEntity, toAnalysisView } from '../analysis/index.ts';
import { notFound } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import type { Sql } from '../store/db.ts';
import { getDraft } from '../drafts/store.ts';
import { getPreviewSession, type SessionRow } from '../sessions/store.ts';
import type { StoredDraft } from '../agent-config/index.ts';
import { draftHash, type Pinner } from '../drafts/service.ts';
import { sessionCreateBody, type SessionCreated, type SessionService } from '../sessions/service.ts';
import type { VariableValue } from '../sessions/variables.ts';

/** A preview lasts at most this long, or the draft's `max_duration_seconds` when lower (docs/api/preview.md). */
export const PREVIEW_MAX_DURATION_SECONDS = 600;

/** The length of a preview of a draft with `configured` seconds. */
export function previewDurationSeconds(configured: number): number {
  return Math.min(PREVIEW_MAX_DURATION_SECONDS, configured);
}

/** What the builder's preview panel may set: variables and the session options; never overrides (edit the draft). */
export const previewCreateBody = sessionCreateBody.pick({
  dynamic_variables: true,
  tool_events: true,
  timezone: true,
  client_timezone: true,
  world_context: true,
});

export type PreviewCreateBody = z.output<typeof previewCreateBody>;

export const previewStatus = z.object({
  session_id: z.string(),
  agent_id: z.string(),
  status: z.enum(['pending', 'active', 'completed', 'failed']),
  config_hash: z.string().describe('The draft hash the preview runs (frozen at creation)'),
  max_duration_seconds: z.number().int(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  ended_at: z.string().nullable(),
  ended_reason: z.string().nullable(),
  duration_seconds: z.number().int().nullable(),
  analysis_status: z.enum(['queued', 'running', 'completed', 'skipped', 'error']).nullable().describe('null: nobody joined, or not ended yet'),
  analysis: analysisEntity.nullable().describe('The settled analysis; shown only here'),
});
export type PreviewStatus = z.infer<typeof previewStatus>;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toPreviewStatus(r: SessionRow): PreviewStatus {
  return {
    session_id: r.id,
    agent_id: r.agent_id,
    status: r.status,
    config_hash: r.config_hash,
    max_duration_seconds: r.max_duration_seconds,
    created_at: r.created_at.toISOString(),
    started_at: iso(r.started_at),
    ended_at: iso(r.ended_at),
    ended_reason: r.ended_reason,
    duration_seconds: r.started_at && r.ended_at ? Math.round((r.ended_at.getTime() - r.started_at.getTime()) / 1000) : null,
    analysis_status: (r.analysis_status ?? null) as PreviewStatus['analysis_status'],
    analysis: toAnalysisView(r),
  };
}

export interface PreviewServiceDeps {
  sql: Sql;
  sessions: SessionService;
  /** What publish pins for a draft (the platform's pinner): frozen with the preview. */
  pin: Pinner;
}

export class PreviewService {
  constructor(private readonly d: PreviewServiceDeps) {}

  /**
   * Creates a preview of the agent's draft. The route checked beta access (403) and the body
   * (422) first; then 404 unknown agent; 409 archived; 503 capacity; 502 media server
   * unreachable; 402 credit.
   */
  async create(p: Principal, agentId: string, b: PreviewCreateBody, req: { host?: string; forwardedProto?: string }): Promise<SessionCreated> {
    const draft = await getDraft(this.d.sql, p.teamId, agentId);
    if (!draft) throw notFound('Agent');
    const config = draft.config as StoredDraft;
    const pinned = await this.d.pin(p.teamId, config, this.d.sql);
    return this.d.sessions.createPreview({
      teamId: p.teamId,
      agentId,
      draft: config,
      pinned,
      configHash: draftHash(draft.config_hash, pinned),
      maxDurationSeconds: previewDurationSeconds(config.conversation.max_duration_seconds),
      dynamicVariables: b.dynamic_variables as Record<string, VariableValue> | undefined,
      toolEvents: b.tool_events,
      timezone: b.timezone,
      clientTimezone: b.client_timezone,
      worldContext: b.world_context,
      host: req.host,
      forwardedProto: req.forwardedProto,
    });
  }

  /** Status and analysis of one of the agent's previews; 404 for anything else. */
  async get(p: Principal, agentId: string, sessionId: string): Promise<PreviewStatus> {
    const s = await getPreviewSession(this.d.sql, p.teamId, agentId, sessionId);
    if (!s) throw notFound('Session');
    return toPreviewStatus(s);
  }

  /** Ends a preview like `POST /v1/agent/sessions/{id}/end` ends a session. */
  async end(p: Principal, agentId: string, sessionId: string): Promise<void> {
    const s = await getPreviewSession(this.d.sql, p.teamId, agentId, sessionId);
    if (!s) throw notFound('Session');
    await this.d.sessions.endSession(s);
  }
}
