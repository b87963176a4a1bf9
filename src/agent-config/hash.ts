/**
 * The draft's content hash and its read shape.
 *
 * `configHash` is the SHA-256 (hex) of a canonical JSON of the draft content: object keys
 * sorted at every level, no whitespace, `agent_id` / `updated_at` / the hash itself left out.
 * Secrets contribute their HMAC fingerprint (see `src/crypto/secrets.ts`), never the sealed
 * value: re-sealing the same secret (new random IV) keeps the hash, rotating to a new value
 * changes it, and the hash reveals nothing about the secret. A version's `config_hash` is the
 * same function over its frozen snapshot, so an unchanged draft equals the latest version.
 */
import { createHash } from 'node:crypto';
import type { ConfigRead, StoredDraft, StoredSecret } from './schema.ts';

const HASH_DOMAIN = 'parley.agent-config.v1\n';

/** JSON with object keys sorted at every level; `undefined` members are dropped as JSON.stringify does. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.keys(value)
    .sort()
    .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(',')}}`;
}

const fp = (s: StoredSecret | null) => (s ? { fingerprint: s.fingerprint } : null);

/** The draft content with each secret replaced by its fingerprint. */
function hashable(stored: StoredDraft): unknown {
  const { webhooks, llm, ...rest } = stored;
  return {
    ...rest,
    webhooks: {
      post_call: webhooks.post_call.map((e) => ({ url: e.url, secret: fp(e.secret) })),
      conversation_init: webhooks.conversation_init && { ...webhooks.conversation_init, secret: fp(webhooks.conversation_init.secret) },
    },
    llm: { tier: llm.tier, custom: llm.custom && { ...llm.custom, api_key: fp(llm.custom.api_key) } },
  };
}

export function configHash(stored: StoredDraft): string {
  return createHash('sha256').update(HASH_DOMAIN).update(canonicalJson(hashable(stored))).digest('hex');
}

/** The response body of GET/PATCH config (and a version's `config`): secrets only as `has_secret` / `has_api_key`. */
export function toReadShape(agentId: string, stored: StoredDraft, hash: string, updatedAt: Date | string): ConfigRead {
  const s = structuredClone(stored);
  const init = s.webhooks.conversation_init;
  const custom = s.llm.custom;
  return {
    agent_id: agentId,
    config_hash: hash,
    prompt: s.prompt,
    voice: s.voice,
    conversation: s.conversation,
    tools: s.tools,
    webhooks: {
      post_call: s.webhooks.post_call.map((e) => ({ url: e.url, has_secret: e.secret !== null })),
      conversation_init: init && { url: init.url, has_secret: init.secret !== null, timeout_seconds: init.timeout_seconds },
    },
    knowledge_base: s.knowledge_base,
    analysis: s.analysis,
    guardrails: s.guardrails,
    llm: {
      tier: s.llm.tier,
      custom: custom && { base_url: custom.base_url, model: custom.model, api_key: null, has_api_key: true },
    },
    updated_at: typeof updatedAt === 'string' ? updatedAt : updatedAt.toISOString(),
  };
}
