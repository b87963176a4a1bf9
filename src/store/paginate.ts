import type postgres from 'postgres';
import type { Sql } from './db.ts';

/** Where a page starts: after a cursor key, or at an offset. */
export interface PageRequest {
  pageSize: number;
  includeTotal: boolean;
  /** Cursor mode: the last row of the previous page (opaque to clients). */
  after?: CursorKey;
  /** Page mode: rows to skip. */
  offset?: number;
}

/** The ordering key of a row: its creation time (exact, microseconds) and id; or a number. */
export type CursorKey = { ts: string; id: string } | { n: number };

export interface Page<T> {
  items: T[];
  hasMore: boolean;
  next: CursorKey | null;
  total: number | null;
}

type Fragment = postgres.PendingQuery<postgres.Row[]>;

/**
 * Newest-first keyset or offset pagination over `from ... where ...`. `order` is
 * `created` (created_at desc, id desc) or a numeric column (desc). Fetches one row more
 * than the page to know whether more exist.
 */
export async function paginate<T>(
  sql: Sql,
  q: { select: Fragment; from: Fragment; where: Fragment; order: 'created' | { column: string }; page: PageRequest },
): Promise<Page<T>> {
  const { page } = q;
  const created = q.order === 'created';
  const col = created ? '' : (q.order as { column: string }).column;
  let keyCond: Fragment = sql`true`;
  if (page.after) {
    if (created && 'ts' in page.after) keyCond = sql`(created_at, id) < (${page.after.ts}::timestamptz, ${page.after.id})`;
    else if (!created && 'n' in page.after) keyCond = sql`${sql(col)} < ${page.after.n}`;
    else keyCond = sql`false`;
  }
  const orderBy = created ? sql`order by created_at desc, id desc` : sql`order by ${sql(col)} desc`;
  const keySelect = created
    ? sql`to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as __ts, id as __id`
    : sql`${sql(col)} as __n`;
  const rows = await sql`
    select ${q.select}, ${keySelect} from ${q.from} where (${q.where}) and ${keyCond}
    ${orderBy} limit ${page.pageSize + 1} offset ${page.offset ?? 0}`;
  const hasMore = rows.length > page.pageSize;
  const slice = rows.slice(0, page.pageSize);
  const last = slice[slice.length - 1];
  const next: CursorKey | null = hasMore && last ? (created ? { ts: last.__ts, id: last.__id } : { n: Number(last.__n) }) : null;
  for (const r of slice) {
    delete r.__ts;
    delete r.__id;
    delete r.__n;
  }
  let total: number | null = null;
  if (page.includeTotal) {
    const [c] = await sql`select count(*)::int as n from ${q.from} where ${q.where}`;
    total = c!.n as number;
  }
  return { items: slice as unknown as T[], hasMore, next, total };
}
