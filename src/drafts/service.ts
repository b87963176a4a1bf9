import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ServiceError, notFound } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import type { Sql } from '../store/db.ts';
import { getDraft, getVersion, latestVersion, listVersions, publishDraft, updateDraft, type DraftRow, type PublishPolicy, type VersionRow, type VersionSummaryRow } from './store.ts';
import type { PageRequest } from '../store/paginate.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import { canonicalJson } from '../agent-config/hash.ts';
import { patchDraft, toReadShape, type ConfigRead, type ReferenceResolver, type StoredDraft } from '../agent-config/index.ts';

export const publishBody = z.strictObject({
  version_title: z.string().max(120).optional(),
  version_description: z.string().max(2000).optional(),
});

export const versionSummary = z.object({
  version_number: z.number().int(),
  version_title: z.string().nullable(),
  version_description: z.string().nullable(),
  config_hash: z.string(),
  published_at: z.string(),
});
export type VersionSummary = z.infer<typeof versionSummary>;

export function toSummary(v: VersionSummaryRow): VersionSummary {
  return {
    version_number: v.version_number,
    version_title: v.version_title,
    version_description: v.version_description,
    config_hash: v.config_hash,
    published_at: v.published_at.toISOString(),
  };
}

/** What publish freezes beside the config: tools as they are now, knowledge revisions. */
export type Pinner = (teamId: string, draft: StoredDraft, tx: Sql) => Promise<unknown>;

/** Row fields of a frozen tool that are bookkeeping, not content: an empty PATCH bumps `updated_at`, attaching elsewhere changes `used_by`. */
const TOOL_BOOKKEEPING = new Set(['created_at', 'updated_at', 'used_by']);

/**
 * The content of what publish pins (`{tools, knowledge}`), in a form that compares by
 * meaning: tools without their bookkeeping fields, sealed secrets by their fingerprint (a
 * re-sealed, unchanged credential keeps it), knowledge sources by `{id, revision}`. Works on
 * freshly pinned rows and on a version's stored jsonb alike.
 */
export function attachedContent(pinned: unknown): { tools: unknown[]; knowledge: unknown[] } {
  const p = (JSON.parse(JSON.stringify(pinned ?? {})) ?? {}) as { tools?: unknown; knowledge?: unknown };
  const tools = Array.isArray(p.tools) ? p.tools : [];
  const knowledge = Array.isArray(p.knowledge) ? p.knowledge : [];
  const content = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(content);
    if (!v || typeof v !== 'object') return v;
    const o = v as Record<string, unknown>;
    if (typeof o.sealed === 'string' && typeof o.fingerprint === 'string') return { fingerprint: o.fingerprint };
    return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, content(x)]));
  };
  return {
    tools: tools.map((t) => (t && typeof t === 'object' ? content(Object.fromEntries(Object.entries(t).filter(([k]) => !TOOL_BOOKKEEPING.has(k)))) : t)),
    knowledge: knowledge.map((k) => (k && typeof k === 'object' ? { id: (k as { id?: unknown }).id, revision: (k as { revision?: unknown }).revision } : k)),
  };
}

const ATTACHED_DOMAIN = 'parley.agent-attached.v1\n';

/**
 * The draft's `config_hash` as clients see it: the config's own hash when nothing is attached,
 * else that hash with the attached tools' content and the knowledge revisions folded in. So
 * editing an attached tool or uploading a new revision of an attached source changes the
 * draft's hash (the draft has unpublished changes) although its config, which holds only
 * their ids, did not change; publish stores the same value as the version's `config_hash`.
 */
export function draftHash(configHash: string, pinned: unknown): string {
  const attached = attachedContent(pinned);
  if (attached.tools.length === 0 && attached.knowledge.length === 0) return configHash;
  return createHash('sha256').update(ATTACHED_DOMAIN).update(configHash).update('\n').update(canonicalJson(attached)).digest('hex');
}

/**
 * True when `latest` already is the draft: the same hash, or (a version published before the
 * hash covered attachments) the same config hash and the same attached content.
 */
export function isLatest(latest: VersionRow, draft: Pick<DraftRow, 'config_hash'>, pinned: unknown, hash: string): boolean {
  if (latest.config_hash === hash) return true;
  return latest.config_hash === draft.config_hash && canonicalJson(attachedContent(latest.pinned)) === canonicalJson(attachedContent(pinned));
}

const publishPolicy: PublishPolicy = {
  hash: (draft, pinned) => draftHash(draft.config_hash, pinned),
  unchanged: (latest, draft, pinned, hash) => isLatest(latest, draft, pinned, hash),
};

/** A path parameter that must be a positive integer; anything else renders 404. */
export function versionNumber(raw: string): number {
  if (!/^[1-9][0-9]{0,8}$/.test(raw)) throw notFound('Version');
  return Number(raw);
}

/**
 * The draft configuration and its published versions. Reference ids resolve within the
 * caller's team; every failure happens before anything is written.
 */
export class DraftService {
  constructor(
    private readonly sql: Sql,
    private readonly box: SecretBox,
    private readonly references: (teamId: string, sql: Sql) => ReferenceResolver,
    private readonly pin: Pinner,
    /** Told after a publish created a version (the agent's `publication_state` and `updated_at` changed). */
    private readonly agents?: { changed(agentId: string): Promise<void> },
  ) {}

  /**
   * The read shape with the hash clients compare: `draftHash` over what publish would pin now,
   * or the latest version's own hash when that version already is this draft.
   */
  private async read(teamId: string, row: DraftRow): Promise<ConfigRead> {
    const config = row.config as StoredDraft;
    const pinned = await this.pin(teamId, config, this.sql);
    let hash = draftHash(row.config_hash, pinned);
    const latest = await latestVersion(this.sql, teamId, row.agent_id);
    if (latest && latest.config_hash !== hash && isLatest(latest, row, pinned, hash)) hash = latest.config_hash;
    return toReadShape(row.agent_id, config, hash, row.updated_at);
  }

  async get(p: Principal, agentId: string): Promise<ConfigRead> {
    const row = await getDraft(this.sql, p.teamId, agentId);
    if (!row) throw notFound('Agent');
    return this.read(p.teamId, row);
  }

  async patch(p: Principal, agentId: string, body: unknown): Promise<ConfigRead> {
    const row = await updateDraft(this.sql, p.teamId, agentId, async (current, tx) => {
      const r = await patchDraft(current.config as StoredDraft, body, { box: this.box, resolve: this.references(p.teamId, tx) });
      return r.changed ? { config: r.draft, hash: r.hash } : null;
    });
    if (!row) throw notFound('Agent');
    return this.read(p.teamId, row);
  }

  async publish(p: Principal, agentId: string, body: z.infer<typeof publishBody>): Promise<VersionSummary> {
    const r = await publishDraft(
      this.sql,
      p.teamId,
      agentId,
      { title: body.version_title ?? null, description: body.version_description ?? null },
      (draft, tx) => this.pin(p.teamId, draft.config as StoredDraft, tx),
      publishPolicy,
    );
    if (!r) throw notFound('Agent');
    if (r.created) await this.agents?.changed(agentId);
    return toSummary(r.version);
  }

  async listVersions(p: Principal, agentId: string, page: PageRequest) {
    if (!(await getDraft(this.sql, p.teamId, agentId))) throw notFound('Agent');
    return listVersions(this.sql, agentId, page);
  }

  async version(p: Principal, agentId: string, n: number): Promise<VersionSummary & { config: ConfigRead }> {
    const v = await getVersion(this.sql, p.teamId, agentId, n);
    if (!v) {
      if (!(await getDraft(this.sql, p.teamId, agentId))) throw notFound('Agent');
      throw notFound('Version');
    }
    return { ...toSummary(v), config: versionConfig(v) };
  }
}

/** A version's `config`: the frozen snapshot in the read shape (secrets redacted). */
export function versionConfig(v: VersionRow): ConfigRead {
  return toReadShape(v.agent_id, v.config as StoredDraft, v.config_hash, v.published_at);
}

export { ServiceError };
