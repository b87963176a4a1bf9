import { z } from 'zod';
import { ServiceError } from '../errors.ts';
import type { CursorKey, Page, PageRequest } from '../store/paginate.ts';
import { parse } from '../validation.ts';

/** Offsets at or past this many rows are refused (the spec's 100,000-row cap). */
export const MAX_OFFSET = 100_000;

const boolParam = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

export const paginationQuery = z.object({
  page: z.coerce.number().int().min(1).optional(),
  cursor: z.string().optional(),
  page_size: z.coerce.number().int().min(1).max(100).default(30),
  include_total: boolParam.default(false),
});

export function encodeCursor(key: CursorKey): string {
  return Buffer.from(JSON.stringify('n' in key ? [key.n] : [key.ts, key.id])).toString('base64url');
}

export function decodeCursor(raw: string, kind: 'created' | 'number'): CursorKey {
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(raw)) throw new Error('alphabet');
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    if (kind === 'number' && Array.isArray(v) && v.length === 1 && Number.isInteger(v[0])) return { n: v[0] };
    if (kind === 'created' && Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string' && !Number.isNaN(Date.parse(v[0])))
      return { ts: v[0], id: v[1] };
  } catch {
    // fall through
  }
  throw new ServiceError('bad_request', 'Invalid cursor');
}

/** Reads `page` / `cursor` / `page_size` / `include_total` with the spec's rules. */
export function pageRequest(query: URLSearchParams, kind: 'created' | 'number' = 'created'): { req: PageRequest; mode: 'page' | 'cursor' } {
  const raw = Object.fromEntries(['page', 'cursor', 'page_size', 'include_total'].filter((k) => query.has(k)).map((k) => [k, query.get(k)!]));
  if (raw.page !== undefined && raw.cursor !== undefined) throw new ServiceError('bad_request', 'page and cursor are mutually exclusive');
  const q = parse(paginationQuery, raw, 'query');
  if (q.cursor !== undefined) {
    return { mode: 'cursor', req: { pageSize: q.page_size, includeTotal: q.include_total, after: decodeCursor(q.cursor, kind) } };
  }
  if (q.page !== undefined) {
    const offset = (q.page - 1) * q.page_size;
    if (offset >= MAX_OFFSET) throw new ServiceError('bad_request', `Page offset exceeds ${MAX_OFFSET} rows`);
    // Page mode always reports the total.
    return { mode: 'page', req: { pageSize: q.page_size, includeTotal: true, offset } };
  }
  return { mode: 'cursor', req: { pageSize: q.page_size, includeTotal: q.include_total } };
}

/** `{<key>: items, has_more, next_cursor, total}`. */
export function pageBody<T, U>(key: string, page: Page<T>, map: (row: T) => U): Record<string, unknown> {
  return {
    [key]: page.items.map(map),
    has_more: page.hasMore,
    next_cursor: page.next ? encodeCursor(page.next) : null,
    total: page.total,
  };
}

/** The response shape for the OpenAPI document. */
export function pageSchema(key: string, item: z.ZodType): z.ZodType {
  return z.object({ [key]: z.array(item), has_more: z.boolean(), next_cursor: z.string().nullable(), total: z.number().int().nullable() });
}
