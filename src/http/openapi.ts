import { z } from 'zod';
import { paginationQuery } from './pagination.ts';
import type { RouteSpec } from './router.ts';

const fieldError = z.object({
  type: z.string(),
  loc: z.array(z.union([z.string(), z.number()])),
  msg: z.string(),
  ctx: z.record(z.string(), z.unknown()),
});
/** The `{status, message}` error body, for route documents. */
export const errorBody = z.object({ status: z.number().int(), message: z.string() });

function schemaOf(s: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const json = z.toJSONSchema(s, { io, unrepresentable: 'any', target: 'draft-2020-12' }) as Record<string, unknown>;
  delete json.$schema;
  return json;
}

/**
 * The OpenAPI 3.1 document, generated from the same zod schemas that validate requests
 * (request bodies as input schemas, responses as output schemas). Version "1".
 */
export function buildOpenApi(specs: readonly RouteSpec[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const spec of specs) {
    if (!spec.doc) continue;
    const op: Record<string, unknown> = { summary: spec.doc.summary, tags: spec.doc.tags ?? [] };
    if (spec.auth === 'required') op.security = [{ BearerAuth: [] }];
    else if (spec.auth === 'optional') op.security = [{ BearerAuth: [] }, {}];
    const params = [...spec.path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
    const query = spec.doc.query ?? declaredQuery(spec);
    if (query) {
      const q = schemaOf(query, 'input') as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(q.properties ?? {})) params.push({ name, in: 'query', required: (q.required ?? []).includes(name), schema } as never);
    }
    if (params.length) op.parameters = params;
    const body = spec.doc.body ?? spec.input?.body;
    if (body) {
      const content: Record<string, unknown> = {};
      const schema = schemaOf(body, 'input');
      if (spec.body === 'multipart') content['multipart/form-data'] = { schema };
      else {
        content['application/json'] = { schema };
        if (spec.body === 'json-or-msgpack') content['application/msgpack'] = { schema };
      }
      op.requestBody = { required: !spec.bodyOptional, content };
    }
    const responses: Record<string, unknown> = {};
    for (const [status, r] of Object.entries(spec.doc.responses ?? {})) {
      responses[status] = r.schema
        ? { description: r.description, content: { [r.contentType ?? 'application/json']: { schema: schemaOf(r.schema, 'output') } } }
        : { description: r.description };
    }
    if (spec.auth !== 'none' && !responses['401']) responses['401'] = { description: 'Missing (bare, WWW-Authenticate: Bearer), invalid or expired API key', content: { 'application/json': { schema: schemaOf(errorBody, 'output') } } };
    if (body && !responses['422']) responses['422'] = { description: 'Field-level validation errors', content: { 'application/json': { schema: schemaOf(z.array(fieldError), 'output') } } };
    op.responses = responses;
    (paths[spec.path] ??= {})[spec.method.toLowerCase()] = op;
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Parley', version: '1', description: 'Self-hosted voice agent platform: agents, sessions, speech API and compatibility layer.' },
    components: { securitySchemes: { BearerAuth: { type: 'http', scheme: 'bearer' } } },
    paths,
  };
}

/** The query parameters a route declares: its filters, then the pagination parameters. */
function declaredQuery(spec: RouteSpec): z.ZodType | undefined {
  const { query, page } = spec.input ?? {};
  if (query && page) return query.extend(paginationQuery.shape);
  return query ?? (page ? paginationQuery : undefined);
}
