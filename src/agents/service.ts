import { z } from 'zod';
import { notFound } from '../errors.ts';
import { newId } from '../ids.ts';
import { requireBeta, type Principal } from '../auth/principal.ts';
import type { Sql } from '../store/db.ts';
import { deleteAgent, getAgent, insertAgent, listAgents, updateAgent, type AgentFilter, type AgentRow } from './store.ts';
import type { PageRequest } from '../store/paginate.ts';
import type { AgentCache } from './cache.ts';

export const OVERRIDE_NAMES = ['first_message', 'system_prompt', 'voice_id', 'language'] as const;

/** An origin as a browser sends it: scheme, host and optional port; a trailing slash is tolerated. */
export const originSchema = z
  .string()
  .min(1)
  .max(2000)
  .refine((s) => normalizeOrigin(s) !== null, { message: 'Must be an origin such as https://example.com or http://localhost:3000', params: { type: 'origin' } });

/** `scheme://host[:port]`, host lower-cased, default port dropped; null when not an origin. */
export function normalizeOrigin(raw: string): string | null {
  const s = raw.endsWith('/') ? raw.slice(0, -1) : raw;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  if (u.username || u.password || u.search || u.hash || (u.pathname !== '/' && u.pathname !== '')) return null;
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#]+$/i.test(s)) return null;
  return u.origin;
}

export const agentCreateBody = z.strictObject({
  name: z.string().min(1).max(120),
  description: z.string().max(2000).optional(),
  /** A full draft patch applied over the defaults (PATCH …/config rules). */
  config: z.unknown().optional(),
});

export const agentPatchBody = z.strictObject({
  name: z.string().min(1).max(120).optional(),
  description: z.string().max(2000).optional(),
  status: z.enum(['active', 'archived']).optional(),
  public_enabled: z.boolean().optional(),
  allowed_origins: z.array(originSchema).max(20).optional(),
  overrides_allowed: z.array(z.enum(OVERRIDE_NAMES)).max(8).optional(),
});

export const agentListQuery = z.object({
  search: z.string().max(200).optional(),
  include_archived: z.enum(['true', 'false']).transform((v) => v === 'true').default(false),
  publication_state: z.enum(['all', 'live', 'draft']).default('all'),
});

export const agentEntity = z.object({
  agent_id: z.string(),
  workspace_id: z.string(),
  name: z.string(),
  description: z.string(),
  status: z.enum(['active', 'archived']),
  publication_state: z.enum(['live', 'draft']),
  public_enabled: z.boolean(),
  allowed_origins: z.array(z.string()),
  overrides_allowed: z.array(z.enum(OVERRIDE_NAMES)),
  created_at: z.string(),
  updated_at: z.string(),
});
export type AgentEntity = z.infer<typeof agentEntity>;

export function toEntity(a: AgentRow): AgentEntity {
  return {
    agent_id: a.id,
    workspace_id: a.workspace_id,
    name: a.name,
    description: a.description,
    status: a.status,
    publication_state: a.live_version !== null ? 'live' : 'draft',
    public_enabled: a.public_enabled,
    allowed_origins: a.allowed_origins,
    overrides_allowed: a.overrides_allowed as AgentEntity['overrides_allowed'],
    created_at: a.created_at.toISOString(),
    updated_at: a.updated_at.toISOString(),
  };
}

/** The entity of each row the cache keeps (rows read past it are collected with theirs). */
const entities = new WeakMap<AgentRow, AgentEntity>();

/** Builds the initial draft of a new agent: the defaults with an optional full patch applied. */
export interface DraftFactory {
  initial(teamId: string, patch: unknown): Promise<{ config: unknown; hash: string }>;
}

/** The agents resource, independent of HTTP. */
export class AgentService {
  constructor(private readonly sql: Sql, private readonly drafts: DraftFactory, private readonly cache?: AgentCache) {}

  /** Creating agent resources needs beta access on the team. */
  static requireBeta(p: Principal): void {
    requireBeta(p);
  }

  async create(p: Principal, body: z.infer<typeof agentCreateBody>): Promise<AgentEntity> {
    AgentService.requireBeta(p);
    const draft = await this.drafts.initial(p.teamId, body.config);
    const row = await insertAgent(this.sql, { id: newId('agent'), teamId: p.teamId, name: body.name, description: body.description ?? '', draft: draft.config, draftHash: draft.hash });
    return toEntity(row);
  }

  /** The entity of `get`; a kept row's entity is built once (do not mutate it). */
  async read(p: Principal, id: string): Promise<AgentEntity> {
    const row = await this.get(p, id);
    let entity = entities.get(row);
    if (!entity) entities.set(row, (entity = toEntity(row)));
    return entity;
  }

  async get(p: Principal, id: string): Promise<AgentRow> {
    const row = this.cache ? await this.cache.read(p.teamId, id, () => getAgent(this.sql, p.teamId, id)) : await getAgent(this.sql, p.teamId, id);
    if (!row) throw notFound('Agent');
    return row;
  }

  list(p: Principal, filter: AgentFilter, page: PageRequest) {
    return listAgents(this.sql, p.teamId, filter, page);
  }

  async update(p: Principal, id: string, body: z.infer<typeof agentPatchBody>): Promise<AgentEntity> {
    const patch = { ...body, allowed_origins: body.allowed_origins?.map((o) => normalizeOrigin(o)!) };
    const row = await updateAgent(this.sql, p.teamId, id, patch);
    if (!row) throw notFound('Agent');
    await this.cache?.changed(id);
    return toEntity(row);
  }

  async delete(p: Principal, id: string): Promise<void> {
    if (!(await deleteAgent(this.sql, p.teamId, id))) throw notFound('Agent');
    await this.cache?.changed(id);
  }
}
