/**
 * The one call a route makes for PATCH config (and for `config` on agent creation):
 * validate the body, check references, merge, hash. Nothing is written here; the caller
 * stores `draft` and `hash` only when this resolves, so any 422 leaves the stored draft as is.
 */
import type { z } from 'zod';
import { ServiceError } from '../errors.ts';
import { issuesToFields } from '../validation.ts';
import { configHash } from './hash.ts';
import { applyPatch, validateReferences, type ReferenceResolver, type SecretSealer } from './merge.ts';
import { createConfigPatchSchema, type ConfigSchemaOptions, type ParsedPatch, type StoredDraft } from './schema.ts';

/** Validates a PATCH body (422 list on failure, `loc` starting at `body`). Secrets stay plaintext in the result. */
export function parseConfigPatch(body: unknown, opts: ConfigSchemaOptions = {}): ParsedPatch {
  // zod v4 leaves `input` off its issues unless asked; the 422 mapping needs it to tell an
  // explicit null (`null_forbidden`) from a missing field. No input value reaches the response.
  const result = createConfigPatchSchema(opts).safeParse(body, { reportInput: true });
  if (result.success) return result.data;
  const issues = result.error.issues.flatMap(pickUnionBranch).map((i) =>
    // An enum or literal given null reports "invalid value"; it is an explicit null like any other.
    i.code === 'invalid_value' && i.input === null ? { code: 'invalid_type' as const, expected: 'enum' as const, input: null, path: i.path, message: i.message } : i,
  );
  throw new ServiceError('invalid', 'Validation failed', { fields: issuesToFields('body', issues) });
}

type Issue = z.core.$ZodIssue;

/**
 * `post_call` is "a list or a single object". When both branches fail, report the branch that
 * matches the input's kind (the other fails only with a root type error), not the branch with
 * the fewest errors: a list of six bad endpoints should not be told "expected object".
 */
function pickUnionBranch(issue: Issue): Issue[] {
  if (issue.code !== 'invalid_union') return [issue];
  const typeOnly = (errors: Issue[]) => errors.length === 1 && errors[0].code === 'invalid_type' && errors[0].path.length === 0;
  const viable = issue.errors.filter((errors) => !typeOnly(errors));
  if (viable.length !== 1) return [issue];
  return viable[0].map((i) => ({ ...i, path: [...issue.path, ...i.path] }) as Issue).flatMap(pickUnionBranch);
}

export interface PatchDeps extends ConfigSchemaOptions {
  box: SecretSealer;
  resolve: ReferenceResolver;
}

export interface PatchOptions {
  /** Where the config sits in the request body, e.g. `['config']` for agent creation: prefixed to every 422 `loc` after `body`. */
  at?: (string | number)[];
}

export interface PatchResult {
  draft: StoredDraft;
  hash: string;
  /** Whether the content (hence the hash) changed. */
  changed: boolean;
}

export async function patchDraft(stored: StoredDraft, body: unknown, deps: PatchDeps, opts: PatchOptions = {}): Promise<PatchResult> {
  try {
    const patch = parseConfigPatch(body, deps);
    await validateReferences(patch, deps.resolve);
    const draft = applyPatch(stored, patch, deps.box);
    const hash = configHash(draft);
    return { draft, hash, changed: hash !== configHash(stored) };
  } catch (err) {
    throw opts.at?.length ? relocate(err, opts.at) : err;
  }
}

function relocate(err: unknown, at: (string | number)[]): unknown {
  if (!(err instanceof ServiceError) || err.code !== 'invalid' || !err.fields) return err;
  const fields = err.fields.map((f) => ({ ...f, loc: f.loc[0] === 'body' ? ['body', ...at, ...f.loc.slice(1)] : f.loc }));
  return new ServiceError('invalid', err.message, { fields, headers: err.headers });
}
