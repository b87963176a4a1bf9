import { z } from 'zod';
import { ServiceError, type FieldError } from './errors.ts';

/**
 * Request validation. Every body, query and path schema is a zod schema (strict objects:
 * unknown keys are errors); the same schemas produce the OpenAPI document. Failures become
 * one 422 with a list of `{type, loc, msg, ctx}` where `loc` starts at `body`, `query` or
 * `path`. Offending input values are never copied into the response, so write-only secrets
 * cannot be echoed.
 */
export type Location = 'body' | 'query' | 'path' | 'header';

export function issuesToFields(where: Location, issues: readonly z.core.$ZodIssue[]): FieldError[] {
  const out: FieldError[] = [];
  for (const issue of issues) {
    const loc: (string | number)[] = [where, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    switch (issue.code) {
      case 'unrecognized_keys':
        for (const key of issue.keys) out.push({ type: 'extra_forbidden', loc: [...loc, key], msg: 'Extra inputs are not permitted', ctx: {} });
        break;
      case 'invalid_type':
        out.push({
          type: issue.input === null ? 'null_forbidden' : issue.input === undefined ? 'missing' : `${issue.expected}_type`,
          loc,
          msg: issue.input === undefined ? 'Field required' : issue.input === null ? 'Null is not allowed; omit the field instead' : `Input should be a valid ${issue.expected}`,
          ctx: { expected: issue.expected },
        });
        break;
      case 'too_big':
        out.push({ type: `too_big_${issue.origin}`, loc, msg: issue.message, ctx: { maximum: Number(issue.maximum), inclusive: issue.inclusive ?? true } });
        break;
      case 'too_small':
        out.push({ type: `too_small_${issue.origin}`, loc, msg: issue.message, ctx: { minimum: Number(issue.minimum), inclusive: issue.inclusive ?? true } });
        break;
      case 'invalid_value':
        if (issue.input === null) {
          out.push({ type: 'null_forbidden', loc, msg: 'Null is not allowed; omit the field instead', ctx: {} });
          break;
        }
        out.push({ type: 'enum', loc, msg: issue.message, ctx: { expected: issue.values.map(String) } });
        break;
      case 'invalid_format':
        out.push({ type: issue.format === 'regex' ? 'string_pattern_mismatch' : `invalid_${issue.format}`, loc, msg: issue.message, ctx: issue.format === 'regex' && 'pattern' in issue ? { pattern: String(issue.pattern) } : {} });
        break;
      case 'invalid_union': {
        // Report the branch that got furthest rather than a vague "no union member matched".
        const best = issue.errors.slice().sort((a, b) => a.length - b.length)[0];
        if (best && best.length) out.push(...issuesToFields(where, best.map((i) => ({ ...i, path: [...issue.path, ...i.path] }))));
        else out.push({ type: 'union', loc, msg: issue.message, ctx: {} });
        break;
      }
      default:
        out.push({ type: issue.code === 'custom' ? String((issue as { params?: { type?: string } }).params?.type ?? 'value_error') : issue.code, loc, msg: issue.message, ctx: {} });
    }
  }
  return out;
}

export function validationError(where: Location, error: z.ZodError): ServiceError {
  return new ServiceError('invalid', 'Validation failed', { fields: issuesToFields(where, error.issues) });
}

/** Parse `value` with `schema` or throw the 422 list. */
export function parse<S extends z.ZodType>(schema: S, value: unknown, where: Location = 'body'): z.output<S> {
  const result = schema.safeParse(value, { reportInput: true }); // input only to tell null from missing; never echoed
  if (!result.success) throw validationError(where, result.error);
  return result.data;
}

/**
 * Deepest nesting of arrays and objects a body may have. Real requests nest a dozen levels
 * (tool parameter schemas are the deepest); the bound keeps every recursive walk over a
 * body (null dropping, validation, storage) far from the stack limit.
 */
export const MAX_BODY_DEPTH = 64;
