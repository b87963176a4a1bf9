/**
 * Knowledge in conversations (docs/api/knowledge.md): the session's `retrieve` hook. A published version
 * reads the revisions it pinned at publish (`agent_versions.pinned.knowledge`), so editing a
 * source later changes nothing for it; a draft (agent tests) reads the newest revisions.
 *
 * - ≤ 8 KB attached in total: the whole text is given every turn (inlined; no search).
 * - Larger: each turn searches the pinned passages with the caller's latest text (Postgres
 *   full-text search, `searchKnowledge`) under a fixed time budget; on timeout or failure the
 *   turn proceeds without retrieval.
 * - Either way the passages, best first, are kept within a token budget (o200k_base).
 */
import type { Logger } from '../log.ts';
import type { Sql } from '../store/db.ts';
import { currentKnowledgeRevisions, knowledgeRevisionContent, searchKnowledge, type KnowledgeRef } from './store.ts';
import { countPromptTokens, type StoredDraft } from '../agent-config/index.ts';

/** Attached text up to this size is inlined whole instead of searched. */
export const KNOWLEDGE_INLINE_BYTES = 8 * 1024;
/** Tokens of knowledge one turn's context may carry at most. */
export const KNOWLEDGE_TOKEN_BUDGET = 1_500;
/** How long one turn waits for the search. */
export const KNOWLEDGE_SEARCH_TIMEOUT_MS = 1_000;
/** Passages fetched per search before the budget is applied. */
export const KNOWLEDGE_SEARCH_LIMIT = 8;

export type Retrieve = (query: string, signal: AbortSignal) => Promise<string[]>;

/** The pinned sources of a published version that its config still attaches, in config order. */
export function pinnedKnowledge(config: StoredDraft, pinned: unknown): KnowledgeRef[] {
  const refs = ((pinned as { knowledge?: KnowledgeRef[] } | null)?.knowledge ?? []).filter((r) => r && typeof r.id === 'string' && Number.isInteger(r.revision));
  const byId = new Map(refs.map((r) => [r.id, r]));
  return config.knowledge_base.knowledge_source_ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : []));
}

/** Keeps passages, best first, while they fit in `budget` tokens (a passage that does not fit is skipped). */
export function fitBudget(passages: string[], budget = KNOWLEDGE_TOKEN_BUDGET): string[] {
  const out: string[] = [];
  let used = 0;
  for (const p of passages) {
    const n = countPromptTokens(p);
    if (used + n > budget) continue;
    used += n;
    out.push(p);
  }
  return out;
}

function withTimeout<T>(p: Promise<T>, ms: number, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('knowledge search timed out')), ms);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    });
  });
}

/**
 * The retrieval hook for a session of `config`: undefined when the knowledge base is off or
 * empty. `pinned` is the version's pins; `draft` reads the newest revisions instead.
 */
export function knowledgeRetriever(
  sql: Sql,
  o: { config: StoredDraft; pinned?: unknown; draft?: { teamId: string }; log?: Logger; budgetTokens?: number; timeoutMs?: number },
): Retrieve | undefined {
  const kb = o.config.knowledge_base;
  if (!kb?.enabled || kb.knowledge_source_ids.length === 0) return undefined;
  const budget = o.budgetTokens ?? KNOWLEDGE_TOKEN_BUDGET;
  // Resolved once per session, at the first turn: which revisions, and whether they are small enough to inline.
  let corpus: Promise<{ refs: KnowledgeRef[]; inline: string[] | null }> | null = null;
  const load = () =>
    (corpus ??= (async () => {
      const refs = o.draft ? await currentKnowledgeRevisions(sql, o.draft.teamId, kb.knowledge_source_ids) : pinnedKnowledge(o.config, o.pinned);
      const texts = await Promise.all(refs.map((r) => knowledgeRevisionContent(sql, r)));
      const bytes = texts.reduce((n, t) => n + (t?.size_bytes ?? 0), 0);
      return { refs, inline: bytes <= KNOWLEDGE_INLINE_BYTES ? texts.flatMap((t) => (t ? [t.content.trim()] : [])) : null };
    })());
  return async (query, signal) => {
    const c = await withTimeout(load(), o.timeoutMs ?? KNOWLEDGE_SEARCH_TIMEOUT_MS, signal).catch((err) => {
      corpus = null; // try again next turn
      throw err;
    });
    if (c.inline) return fitBudget(c.inline, budget);
    const hits = await withTimeout(searchKnowledge(sql, c.refs, query, KNOWLEDGE_SEARCH_LIMIT), o.timeoutMs ?? KNOWLEDGE_SEARCH_TIMEOUT_MS, signal);
    return fitBudget(hits.map((h) => h.text), budget);
  };
}
