/**
 * Applying a validated PATCH body to a stored draft (docs/api/agents.md "PATCH rules" 1–9).
 *
 * `applyPatch` is pure: it returns a new draft and never mutates its inputs, so a PATCH that
 * fails anywhere (here, in reference checks, in the store) leaves the old draft and its hash
 * intact by construction. It throws a 422 `ServiceError` only for checks that need the stored
 * draft (a field required when an object is first set).
 */
import { ServiceError, type FieldError } from '../errors.ts';
import { DEFAULT_INIT_TIMEOUT_SECONDS, defaultOutbound } from './defaults.ts';
import type { ParsedPatch, StoredDraft, StoredSecret } from './schema.ts';

/** The half of a `SecretBox` that writing needs. */
export interface SecretSealer {
  seal(plain: string): string;
  fingerprint(plain: string): string;
}

export function sealSecret(box: SecretSealer, plain: string): StoredSecret {
  return { sealed: box.seal(plain), fingerprint: box.fingerprint(plain) };
}

/** Copies the keys whose value is not undefined (zod leaves omitted keys out, this makes sure). */
function given<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function origin(raw: string): string | null {
  try {
    return new URL(raw).origin;
  } catch {
    return null;
  }
}

/**
 * Rules 1–9 over a draft. `box` seals new secret values (a new value rotates; an empty
 * `conversation_init.secret` clears it; a post_call entry without `secret` has none).
 */
export function applyPatch(stored: StoredDraft, patch: ParsedPatch, box: SecretSealer): StoredDraft {
  const next = structuredClone(stored);
  const errors: FieldError[] = [];
  const missing = (loc: (string | number)[], msg = 'Field required') => errors.push({ type: 'missing', loc: ['body', ...loc], msg, ctx: {} });

  // Rule 1: deep merge; omitted sections and fields keep their value.
  if (patch.prompt) Object.assign(next.prompt, given(patch.prompt));
  if (patch.voice) Object.assign(next.voice, given(patch.voice));
  if (patch.guardrails) Object.assign(next.guardrails, given(patch.guardrails));

  if (patch.conversation) {
    const { transfer_destinations, outbound, ...scalars } = patch.conversation;
    Object.assign(next.conversation, given(scalars));
    // Rule 2: lists are replaced whole.
    if (transfer_destinations) next.conversation.transfer_destinations = structuredClone(transfer_destinations);
    if (outbound === null) next.conversation.outbound = null;
    else if (outbound) {
      const base = next.conversation.outbound ?? defaultOutbound();
      next.conversation.outbound = {
        amd_enabled: outbound.amd_enabled ?? base.amd_enabled,
        voicemail: { ...base.voicemail, ...given(outbound.voicemail ?? {}) },
      };
    }
  }

  if (patch.tools) {
    const { tool_ids, system_tools, ...scalars } = patch.tools;
    Object.assign(next.tools, given(scalars));
    if (tool_ids) next.tools.tool_ids = [...tool_ids];
    if (system_tools) Object.assign(next.tools.system_tools, given(system_tools));
  }

  if (patch.knowledge_base) {
    const { knowledge_source_ids, ...scalars } = patch.knowledge_base;
    Object.assign(next.knowledge_base, given(scalars));
    if (knowledge_source_ids) next.knowledge_base.knowledge_source_ids = [...knowledge_source_ids];
  }

  if (patch.webhooks) {
    const { post_call, conversation_init } = patch.webhooks;
    // Rule 3: a single object arrives here as a one-element list; null and [] arrive as [].
    if (post_call) {
      next.webhooks.post_call = post_call.map((e) => ({ url: e.url, secret: e.secret ? sealSecret(box, e.secret) : null }));
    }
    if (conversation_init === null) next.webhooks.conversation_init = null;
    else if (conversation_init) {
      const cur = next.webhooks.conversation_init;
      const url = conversation_init.url ?? cur?.url;
      if (url === undefined) missing(['webhooks', 'conversation_init', 'url']);
      else {
        const s = conversation_init.secret;
        next.webhooks.conversation_init = {
          url,
          secret: s === undefined ? (cur?.secret ?? null) : s === '' ? null : sealSecret(box, s),
          timeout_seconds: conversation_init.timeout_seconds ?? cur?.timeout_seconds ?? DEFAULT_INIT_TIMEOUT_SECONDS,
        };
      }
    }
  }

  if (patch.analysis) {
    const { summary, data_fields, criteria } = patch.analysis;
    // Rule 9: members omitted from a given summary object take their defaults (the schema fills them).
    if (summary) next.analysis.summary = { ...summary };
    if (data_fields) next.analysis.data_fields = structuredClone(data_fields);
    if (criteria) next.analysis.criteria = structuredClone(criteria);
  }

  if (patch.llm) {
    const { tier, custom } = patch.llm;
    if (tier !== undefined) next.llm.tier = tier;
    if (custom === null) next.llm.custom = null;
    else if (custom) {
      const cur = next.llm.custom;
      const baseUrl = custom.base_url ?? cur?.base_url;
      const model = custom.model ?? cur?.model;
      if (baseUrl === undefined) missing(['llm', 'custom', 'base_url']);
      if (model === undefined) missing(['llm', 'custom', 'model']);
      let apiKey: StoredSecret | undefined;
      if (typeof custom.api_key === 'string') apiKey = sealSecret(box, custom.api_key);
      else if (cur && baseUrl !== undefined && origin(cur.base_url) === origin(baseUrl)) apiKey = cur.api_key;
      else if (cur) missing(['llm', 'custom', 'api_key'], 'Field required: api_key must be sent again when base_url moves to another origin');
      else missing(['llm', 'custom', 'api_key']);
      if (baseUrl !== undefined && model !== undefined && apiKey) next.llm.custom = { base_url: baseUrl, model, api_key: apiKey };
    }
  }

  if (errors.length) throw new ServiceError('invalid', 'Validation failed', { fields: errors });
  return next;
}

/** Answers which of the given ids exist for the agent's team (the store implements it). */
export interface ReferenceResolver {
  toolIds(ids: string[]): Promise<Set<string>>;
  knowledgeSourceIds(ids: string[]): Promise<Set<string>>;
}

/** Anything carrying the two id lists: a `ParsedPatch` (checks only the lists it sends) or a whole draft. */
export interface References {
  tools?: { tool_ids?: readonly string[] };
  knowledge_base?: { knowledge_source_ids?: readonly string[] };
}

/**
 * Rule 4: every id in `tools.tool_ids` and `knowledge_base.knowledge_source_ids` must resolve,
 * else one 422 with an entry per unresolved id at `['body', section, list, index]`. Pass the
 * parsed patch, so that only the lists the body sends are checked and `loc` points into the body.
 */
export async function validateReferences(draft: References, resolve: ReferenceResolver): Promise<void> {
  const toolIds = draft.tools?.tool_ids;
  const sourceIds = draft.knowledge_base?.knowledge_source_ids;
  const [tools, sources] = await Promise.all([
    toolIds?.length ? resolve.toolIds([...toolIds]) : undefined,
    sourceIds?.length ? resolve.knowledgeSourceIds([...sourceIds]) : undefined,
  ]);
  const errors: FieldError[] = [];
  toolIds?.forEach((id, i) => {
    if (!tools?.has(id)) errors.push({ type: 'unresolved_reference', loc: ['body', 'tools', 'tool_ids', i], msg: 'Value error, no tool with this id exists in the workspace', ctx: {} });
  });
  sourceIds?.forEach((id, i) => {
    if (!sources?.has(id))
      errors.push({ type: 'unresolved_reference', loc: ['body', 'knowledge_base', 'knowledge_source_ids', i], msg: 'Value error, no knowledge source with this id is visible to the agent', ctx: {} });
  });
  if (errors.length) throw new ServiceError('invalid', 'Validation failed', { fields: errors });
}
