import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import type { Sql } from './db.ts';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
/** Any constant shared by every node; it serialises migrations across processes. */
const MIGRATION_LOCK = 72_616_001;

export interface Migration {
  version: string;
  sql: string;
}

export function listMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: f.replace(/\.sql$/, ''), sql: readFileSync(join(dir, f), 'utf8') }));
}

/**
 * Applies every migration not yet applied, in order, each in its own transaction that
 * holds a transaction-scoped advisory lock, so several nodes starting at once apply each
 * migration exactly once (the others wait, then see it recorded). Returns the versions
 * this call applied.
 */
export async function migrate(sql: Sql, migrations = listMigrations()): Promise<string[]> {
  await sql`create table if not exists schema_migrations (version text primary key, applied_at timestamptz not null default now())`.catch(
    async (err) => {
      // Two nodes racing on the very first create: the loser sees a duplicate type; the table exists.
      if (!/already exists|duplicate key/.test(String(err?.message))) throw err;
    },
  );
  const applied: string[] = [];
  for (const m of migrations) {
    const did = await sql.begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK})`;
      const [row] = await tx`select 1 from schema_migrations where version = ${m.version}`;
      if (row) return false;
      await tx.unsafe(m.sql);
      await tx`insert into schema_migrations (version) values (${m.version})`;
      return true;
    });
    if (did) applied.push(m.version);
  }
  return applied;
}
