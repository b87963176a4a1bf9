import { defineModule } from '../modules.ts';
import { openDatabase } from './db.ts';
import { migrate } from './migrate.ts';

/** The durable store (Postgres, or the embedded PGlite), migrated; /ready waits for it. */
export const storeModule = (schema?: string) => defineModule({
  name: 'store',
  needs: ['config', 'log', 'health', 'startup'],
  async start({ config, log, health, startup }, onClose) {
    const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, schema });
    startup('store_open');
    onClose(() => db.close());
    health.register('database', async () => (await db.ping(), { status: 'ok', detail: db.kind }));
    const applied = await migrate(db.sql);
    // Migrations may wait silently for a long statement or another node's lock: bounded after.
    db.boundSilence(config.dbSilenceTimeoutMs);
    startup('migrated');
    if (applied.length) log.info({ applied }, 'migrations applied');
    return { db, sql: db.sql };
  },
});
