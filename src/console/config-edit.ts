/**
 * The agent form's model: the draft as the API reads it, turned into what the form edits
 * (write-only secrets as empty inputs), and back into a PATCH holding exactly the fields that
 * changed (lists whole: the API replaces them whole).
 */
import type { Agent, AgentConfig } from './api.ts';

export type ConfigEdit = Omit<AgentConfig, 'agent_id' | 'config_hash' | 'updated_at' | 'webhooks' | 'llm'> & {
  webhooks: {
    /** `secret`: a new value to set ('' sends none: the API keeps no secret for an entry without one). */
    post_call: { url: string; secret: string; had_secret: boolean }[];
    conversation_init: { url: string; secret: string; has_secret: boolean; timeout_seconds: number } | null;
  };
  llm: { tier: string; custom: { base_url: string; model: string; api_key: string; has_api_key: boolean } | null };
};

export type ProfileEdit = Pick<Agent, 'name' | 'description' | 'public_enabled' | 'allowed_origins' | 'overrides_allowed'>;

export function toEdit(c: AgentConfig): ConfigEdit {
  const { agent_id: _a, config_hash: _h, updated_at: _u, webhooks, llm, ...rest } = c;
  return structuredClone({
    ...rest,
    webhooks: {
      post_call: webhooks.post_call.map((e) => ({ url: e.url, secret: '', had_secret: e.has_secret })),
      conversation_init: webhooks.conversation_init && { url: webhooks.conversation_init.url, secret: '', has_secret: webhooks.conversation_init.has_secret, timeout_seconds: webhooks.conversation_init.timeout_seconds },
    },
    llm: { tier: llm.tier, custom: llm.custom && { base_url: llm.custom.base_url, model: llm.custom.model, api_key: '', has_api_key: llm.custom.has_api_key } },
  });
}

export function toProfile(a: Agent): ProfileEdit {
  return { name: a.name, description: a.description, public_enabled: a.public_enabled, allowed_origins: [...a.allowed_origins], overrides_allowed: [...a.overrides_allowed] };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function equal(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Keys the form keeps for display only; never sent. */
const DISPLAY_ONLY = new Set(['had_secret', 'has_secret', 'has_api_key']);
/** Write-only inputs: empty means "leave as it is" (or "none" in a replaced list). */
const WRITE_ONLY = new Set(['secret', 'api_key']);

function clean(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(clean);
  if (!isObject(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) {
    if (DISPLAY_ONLY.has(k) || (WRITE_ONLY.has(k) && x === '')) continue;
    out[k] = clean(x);
  }
  return out;
}

/** The changed part of `after` against `before`: objects field by field, anything else whole; undefined when nothing changed. */
export function changes(before: unknown, after: unknown): unknown {
  if (isObject(before) && isObject(after)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(after)) {
      if (DISPLAY_ONLY.has(k)) continue;
      if (WRITE_ONLY.has(k)) {
        if (after[k] !== '') out[k] = after[k];
        continue;
      }
      const d = changes(before[k], after[k]);
      if (d !== undefined) out[k] = d;
    }
    return Object.keys(out).length ? out : undefined;
  }
  return equal(before, after) ? undefined : clean(after);
}

/** Leaf differences between two configurations, as `[path, left, right]` rows. */
export function leafDiff(a: unknown, b: unknown, path = ''): [string, unknown, unknown][] {
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => !['agent_id', 'updated_at'].includes(k));
    return keys.flatMap((k) => leafDiff(a[k], b[k], path ? `${path}.${k}` : k));
  }
  return equal(a, b) ? [] : [[path, a, b]];
}

/** Sets the value at a dotted path of a copy of `obj`. */
export function setPath<T>(obj: T, path: string, value: unknown): T {
  const copy = structuredClone(obj) as Record<string, unknown>;
  const keys = path.split('.');
  let at: Record<string, unknown> = copy;
  for (const k of keys.slice(0, -1)) at = at[k] as Record<string, unknown>;
  at[keys[keys.length - 1]!] = value;
  return copy as T;
}
