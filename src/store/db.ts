import postgres from 'postgres';
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { watchSilence, type SilenceWatch } from './silence.ts';

export type Sql = postgres.Sql<Record<string, never>>;

export interface DatabaseOptions {
  /** A real Postgres server. Without it, PGlite is started and served on loopback. */
  databaseUrl?: string;
  /** PGlite data folder, or `memory` for an ephemeral store. */
  dataDir: string;
  /** Postgres schema to use (tests isolate themselves in a fresh schema). */
  schema?: string;
  /** Connections in the pool. */
  max?: number;
}

export interface Database {
  sql: Sql;
  /** `postgres` (a real server) or `pglite` (embedded). */
  kind: 'postgres' | 'pglite';
  /** The connection string the pool uses (the embedded server's loopback address too). */
  url: string;
  ping(): Promise<void>;
  close(): Promise<void>;
  /**
   * Bounds a server that goes silent (a black-holed network): from now on a connection with a
   * query outstanding that hears nothing for `ms` is dropped, failing its queries as a lost
   * connection (`src/store/silence.ts`); 0 turns it off. Off until called (migrations and the
   * CLI run without it); only a real server is watched, not the embedded store.
   */
  boundSilence(ms: number): void;
}

const PGLITE_CONNECTIONS = 8;

/**
 * Opens the durable store. The same `postgres` client and the same SQL run against a real
 * server and against the embedded PGlite, which pglite-socket serves on a loopback port.
 */
export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  if (opts.databaseUrl) {
    if (opts.schema) await ensureSchema(opts.databaseUrl, opts.schema);
    const watch = watchSilence(0, CONNECT_TIMEOUT_S * 1000);
    const sql = connect(opts.databaseUrl, opts.max ?? 10, opts.schema, watch);
    await loadTypesOnce(sql);
    return {
      sql,
      kind: 'postgres',
      url: opts.databaseUrl,
      ping: () => ping(sql),
      close: () => sql.end({ timeout: 5 }),
      boundSilence: (ms) => void (watch.timeoutMs = ms),
    };
  }
  const { PGlite } = await import('@electric-sql/pglite');
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
  let dataDir: string | undefined;
  if (opts.dataDir !== 'memory') {
    dataDir = resolve(opts.dataDir, 'pg');
    mkdirSync(dataDir, { recursive: true });
  }
  const db = dataDir ? await PGlite.create(dataDir) : await PGlite.create();
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port: 0, maxConnections: PGLITE_CONNECTIONS });
  await server.start();
  const conn = server.getServerConn();
  const url = `postgres://postgres@${conn}/postgres`;
  // One connection: PGlite is a single Postgres session behind the socket, so statements of
  // two pooled connections interleave in one session (a transaction on one and a query on
  // another collide: "portal does not exist"). One connection serialises them; postgres.js
  // still pipelines queries on it, and a transaction has it to itself.
  const sql = connect(url, 1, undefined);
  await loadTypesOnce(sql);
  return {
    sql,
    kind: 'pglite',
    url,
    ping: () => ping(sql),
    // In-process over loopback: it cannot be black-holed, and its one connection serialises
    // every query, so a slow one would make the others look silent.
    boundSilence: () => {},
    close: async () => {
      await sql.end({ timeout: 5 });
      await server.stop();
      await db.close();
    },
  };
}

/**
 * Seconds a connection attempt may take. Short, so a request that needs the store while it is
 * unreachable fails fast (a `503`, docs/reliability.md "Faults") instead of waiting.
 */
export const CONNECT_TIMEOUT_S = 3;

/**
 * Seconds before a closed connection reconnects after `retries` failures in a row: 50 ms
 * doubling, at most 0.25 s. postgres.js's default grows to 20 s, which kept the pool away for
 * that long after the database was back, and made each request queue behind it meanwhile.
 */
export function reconnectDelayS(retries: number): number {
  return Math.min(0.05 * 2 ** Math.max(0, retries - 1), 0.25);
}

function connect(url: string, max: number, schema: string | undefined, watch?: SilenceWatch): Sql {
  return postgres(url, {
    ...(watch ? { socket: watch.socket as never } : {}),
    max,
    onnotice: () => {},
    idle_timeout: 30,
    connect_timeout: CONNECT_TIMEOUT_S,
    // After a connect that had no answer, no delay: the queries queued meanwhile fail as fast
    // as the server refuses them, or at once while it is silent (`src/store/silence.ts`).
    backoff: watch ? (retries: number) => (watch.unreachable ? 0 : reconnectDelayS(retries)) : reconnectDelayS,
    connection: schema ? { search_path: schema } : {},
    types: { bigint: postgres.BigInt },
  }) as unknown as Sql;
}

/**
 * postgres.js reads the server's array types on every new connection, in a promise nobody
 * awaits: a connection reset during that read (the database restarting just as the pool
 * reconnects) was an unhandled rejection, which ends the process. The types are the same for
 * the whole pool, so they are read once here, by the first connection, and kept (the parsers
 * live in the pool's shared options); later connections skip the read.
 */
async function loadTypesOnce(sql: Sql): Promise<void> {
  await sql`select 1`;
  (sql.options as { fetch_types: boolean }).fetch_types = false;
}

async function ensureSchema(url: string, schema: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await createSchema(sql, schema);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * Creates `schema` unless it exists. Postgres's `create schema if not exists` is not atomic: of
 * two sessions creating the same new schema at once (the workers of one node, or nodes starting
 * together on a new database), one may fail with a unique violation on the catalog, or with
 * `duplicate_schema`. Either means another created it, which is all this needs.
 */
export async function createSchema(sql: Sql, schema: string): Promise<void> {
  try {
    await sql`create schema if not exists ${sql(schema)}`;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== '23505' && code !== '42P06') throw err;
  }
}

async function ping(sql: Sql): Promise<void> {
  await sql`select 1`;
}
