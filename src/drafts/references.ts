/**
 * What a draft may point at and what publishing freezes: the team's tool and knowledge-source
 * ids (config rule 4), and, at publish, the attached tools as they are now and the knowledge
 * revisions in use. Shared by agents (the initial draft), drafts and preview.
 */
import type { ReferenceResolver, StoredDraft } from '../agent-config/index.ts';
import { currentKnowledgeRevisions, knowledgeSourceIdsOf } from '../knowledge/store.ts';
import type { Sql } from '../store/db.ts';
import { frozenToolsForPublish, toolIdsOf } from '../tools/store.ts';

/** Which tool and knowledge-source ids exist for a team. */
export const references = (teamId: string, sql: Sql): ReferenceResolver => ({
  toolIds: (ids) => toolIdsOf(sql, teamId, ids),
  knowledgeSourceIds: (ids) => knowledgeSourceIdsOf(sql, teamId, ids),
});

/** What publish pins: the attached tools frozen as they are now, and the knowledge revisions in use. */
export const pin = async (teamId: string, draft: StoredDraft, sql: Sql): Promise<unknown> => ({
  tools: await frozenToolsForPublish(sql, teamId, draft.tools.tool_ids),
  knowledge: await currentKnowledgeRevisions(sql, teamId, draft.knowledge_base.knowledge_source_ids),
});
