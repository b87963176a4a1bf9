// A small JSON Schema check for structured output obtained by instruction (docs/providers.md):
// type, enum, const, required, properties, items, minItems, anyOf/oneOf. Enough to tell a model
// what it got wrong; not a full validator.

type Schema = {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  minItems?: number;
  anyOf?: Schema[];
  oneOf?: Schema[];
  nullable?: boolean;
};

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** The first violation of `schema` by `value` as `path: problem`, or null when it conforms. */
export function schemaViolation(value: unknown, schema: unknown, path = '$'): string | null {
  if (!schema || typeof schema !== 'object') return null;
  const s = schema as Schema;
  const alts = s.anyOf ?? s.oneOf;
  if (alts) {
    const errs = alts.map((a) => schemaViolation(value, a, path));
    if (errs.every((e) => e !== null)) return errs[0] ?? `${path}: matches none of the alternatives`;
  }
  if (s.const !== undefined && JSON.stringify(value) !== JSON.stringify(s.const)) return `${path}: must be ${JSON.stringify(s.const)}`;
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) return `${path}: must be one of ${JSON.stringify(s.enum)}`;
  if (s.type) {
    const allowed = Array.isArray(s.type) ? [...s.type] : [s.type];
    if (s.nullable) allowed.push('null');
    const t = typeOf(value);
    if (!allowed.includes(t) && !(t === 'integer' && allowed.includes('number'))) return `${path}: must be ${allowed.join(' or ')}, not ${t}`;
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const o = value as Record<string, unknown>;
    for (const k of s.required ?? []) if (!(k in o)) return `${path}.${k}: required`;
    for (const [k, sub] of Object.entries(s.properties ?? {})) {
      if (k in o) {
        const e = schemaViolation(o[k], sub, `${path}.${k}`);
        if (e) return e;
      }
    }
  }
  if (Array.isArray(value)) {
    if (s.minItems !== undefined && value.length < s.minItems) return `${path}: needs at least ${s.minItems} items`;
    if (s.items) {
      for (const [i, item] of value.entries()) {
        const e = schemaViolation(item, s.items, `${path}[${i}]`);
        if (e) return e;
      }
    }
  }
  return null;
}
