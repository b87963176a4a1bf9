import { z } from 'zod';
import { ServiceError, notFound } from '../errors.ts';
import type { Principal } from '../http/router.ts';
import type { Sql } from '../store/db.ts';
import { getDraft, getVersion, listVersions, publishDraft, updateDraft, type DraftRow, type VersionRow, type VersionSummaryRow } from '../store/drafts.ts';
import type { PageRequest } from '../store/paginate.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import { patchDraft, toReadShape, type ConfigRead, type ReferenceResolver, type StoredDraft } from './config/index.ts';

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
  ) {}

  private read(row: DraftRow): ConfigRead {
    return toReadShape(row.agent_id, row.config as StoredDraft, row.config_hash, row.updated_at);
  }

  async get(p: Principal, agentId: string): Promise<ConfigRead> {
    const row = await getDraft(this.sql, p.teamId, agentId);
    if (!row) throw notFound('Agent');
    return this.read(row);
  }

  async patch(p: Principal, agentId: string, body: unknown): Promise<ConfigRead> {
    const row = await updateDraft(this.sql, p.teamId, agentId, async (current, tx) => {
      const r = await patchDraft(current.config as StoredDraft, body, { box: this.box, resolve: this.references(p.teamId, tx) });
      return r.changed ? { config: r.draft, hash: r.hash } : null;
    });
    if (!row) throw notFound('Agent');
    return this.read(row);
  }

  async publish(p: Principal, agentId: string, body: z.infer<typeof publishBody>): Promise<VersionSummary> {
    const r = await publishDraft(this.sql, p.teamId, agentId, { title: body.version_title ?? null, description: body.version_description ?? null }, (draft, tx) =>
      this.pin(p.teamId, draft.config as StoredDraft, tx),
    );
    if (!r) throw notFound('Agent');
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
