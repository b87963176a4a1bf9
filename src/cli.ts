import { parseArgs } from 'node:util';
import { httpAdmin } from './admin/client.ts';
import { claimDataDir, readControlFile } from './admin/control-file.ts';
import { storeAdmin, type TeamAdmin } from './admin/service.ts';
import { loadConfig } from './config.ts';
import { startPlatform } from './platform.ts';
import { startNode } from './threads/primary.ts';
import { openDatabase } from './store/db.ts';
import { migrate } from './store/migrate.ts';
import { announceAuthChange } from './auth/keys.ts';
import { createSharedState } from './state/index.ts';

const HELP: Record<string, string> = {
  '': `Usage: parley <command> [options]

Commands:
  serve                     Run the platform (the default of npm start)
  migrate                   Apply pending database migrations and exit
  team create               Create a team and print its first API key
  key create                Create an API key for a team (printed once)
  key revoke <id|prefix>    Revoke an API key
  credit grant              Add credit to a team
  beta grant|revoke         Turn a team's agent-platform beta access on or off

Every command reads DATABASE_URL / PARLEY_DATA_DIR like the server. On the embedded store, a\ncommand reaches the server running on that data folder (PARLEY_DATA_DIR/server.json) instead\nof opening the folder beside it. Add --help to any command.`,
  serve: `Usage: parley serve\n\nRuns the HTTP server on HOST:PORT (default 0.0.0.0:8080) with the store, shared state\nand inference backends the environment names (README: Configuration), on PARLEY_WORKERS\nevent loops. SIGTERM or SIGINT drains in-flight requests and exits 0.`,
  migrate: `Usage: parley migrate\n\nApplies every pending migration in order, each once, under an advisory lock.`,
  'team create': `Usage: parley team create --name <name> [--beta] [--credit <amount>]\n\nCreates a team (with beta access when --beta, with starting credit in currency units)\nand prints its id and a new API key. The key is shown once.`,
  'key create': `Usage: parley key create --team <team_id> [--name <label>] [--expires <ISO date>]\n\nCreates an API key for the team and prints it once.`,
  'key revoke': `Usage: parley key revoke <key_id | key prefix>\n\nRevokes the key; requests with it get 401 Invalid token: at once on a server on the embedded store\nor on nodes sharing REDIS_URL with this command, else within PARLEY_AUTH_CACHE_MS.`,
  'credit grant': `Usage: parley credit grant --team <team_id> --amount <amount>\n\nAdds credit (currency units, may be fractional; negative removes) and records it in the ledger.`,
  'beta grant': `Usage: parley beta grant --team <team_id>\n\nGives the team beta access to the agent platform.`,
  'beta revoke': `Usage: parley beta revoke --team <team_id>\n\nRemoves the team's beta access (creating agent resources then answers 403).`,
};

const options = {
  help: { type: 'boolean', short: 'h' },
  name: { type: 'string' },
  beta: { type: 'boolean' },
  credit: { type: 'string' },
  team: { type: 'string' },
  expires: { type: 'string' },
  amount: { type: 'string' },
} as const;

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

/**
 * Runs `fn` on the store: a real Postgres (DATABASE_URL) directly; the embedded store through
 * the server running on its folder when there is one (never the folder beside it: that server
 * would not see the write), else directly, holding the folder for the command's length.
 */
async function withAdmin<T>(fn: (admin: TeamAdmin) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const embeddedFolder = !config.databaseUrl && config.dataDir !== 'memory';
  if (embeddedFolder) {
    const running = readControlFile(config.dataDir);
    if (running && !running.url) fail(`another parley command (pid ${running.pid}) is using the data folder ${config.dataDir}: try again when it has finished`);
    if (running) return fn(httpAdmin(running));
  }
  const claim = embeddedFolder ? claimDataDir(config.dataDir, '') : undefined;
  try {
    return await withStore((sql) => fn(storeAdmin(sql, () => announceToNodes(config.redisUrl))));
  } finally {
    claim?.release();
  }
}

/**
 * A revoke or beta change made here on Postgres: with REDIS_URL, every running node and worker
 * forgets its verified keys at once; without it they notice within PARLEY_AUTH_CACHE_MS.
 */
async function announceToNodes(redisUrl: string | undefined): Promise<void> {
  if (!redisUrl) return;
  const state = await createSharedState({ redisUrl });
  try {
    await announceAuthChange(state);
  } finally {
    await state.close();
  }
}

async function withStore<T>(fn: (sql: Awaited<ReturnType<typeof openDatabase>>['sql']) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const db = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, max: 2 });
  try {
    await migrate(db.sql);
    return await fn(db.sql);
  } finally {
    await db.close();
  }
}

const micros = (amount: string): bigint => {
  const n = Number(amount);
  if (!Number.isFinite(n)) fail(`--amount must be a number, got ${amount}`);
  return BigInt(Math.round(n * 1_000_000));
};

async function serve(): Promise<void> {
  // Several event loops on one port (PARLEY_WORKERS > 1): worker threads, src/threads/.
  const platform = loadConfig().workers > 1 ? await startNode() : await startPlatform();
  if (platform.bootstrapKey) {
    process.stdout.write(`\nParley API key for team ${platform.teamId} (shown once, keep it safe):\n\n  ${platform.bootstrapKey}\n\n`);
  }
  process.stdout.write(`Parley listening on http://${platform.config.host}:${platform.port}\n`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    platform.log.info({ signal }, 'shutting down');
    platform.close().then(
      () => process.exit(0),
      (err) => {
        platform.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  if ('failed' in platform) {
    // A worker that stops unasked takes the node down: the process supervisor restarts it.
    void platform.failed.then((why) => {
      platform.log.error({ why }, 'a worker stopped: shutting the node down');
      stopping = true;
      platform.close().finally(() => process.exit(1));
    });
  }
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  const [cmd = 'serve', sub, arg] = positionals;
  const key = sub && ['team', 'key', 'credit', 'beta'].includes(cmd) ? `${cmd} ${sub}` : cmd;
  if (values.help) {
    process.stdout.write(`${HELP[key] ?? HELP['']}\n`);
    return;
  }
  switch (key) {
    case 'serve':
      return serve();
    case 'migrate': {
      const config = loadConfig();
      const running = !config.databaseUrl && config.dataDir !== 'memory' ? readControlFile(config.dataDir) : undefined;
      if (running?.url) {
        process.stdout.write(`The server running on this data folder (pid ${running.pid}) applied the migrations when it started; nothing to do\n`);
        return;
      }
      const claim = running ? fail(`another parley command (pid ${running.pid}) is using the data folder: try again when it has finished`) : !config.databaseUrl && config.dataDir !== 'memory' ? claimDataDir(config.dataDir, '') : undefined;
      try {
        const applied = await withStore((sql) => migrate(sql));
        process.stdout.write(applied.length ? `Applied: ${applied.join(', ')}\n` : 'Nothing to apply\n');
      } finally {
        claim?.release();
      }
      return;
    }
    case 'team create': {
      if (!values.name) fail('--name is required (parley team create --help)');
      const r = await withAdmin((a) => a.createTeam({ name: values.name!, beta: !!values.beta, creditMicros: values.credit ? micros(values.credit) : 0n }));
      process.stdout.write(`team ${r.teamId}\nkey  ${r.key}\n`);
      return;
    }
    case 'key create': {
      if (!values.team) fail('--team is required (parley key create --help)');
      const expiresAt = values.expires ? new Date(values.expires) : null;
      if (expiresAt && Number.isNaN(expiresAt.getTime())) fail('--expires must be an ISO date');
      const r = await withAdmin((a) => a.createKey({ teamId: values.team!, name: values.name, expiresAt }));
      if (!r) fail(`no team ${values.team}`);
      process.stdout.write(`${r.keyId} ${r.key}\n`);
      return;
    }
    case 'key revoke': {
      if (!arg) fail('give the key id or prefix (parley key revoke --help)');
      const n = await withAdmin((a) => a.revokeKey(arg));
      if (n === 0) fail(`no active key ${arg}`);
      process.stdout.write(`revoked ${n} key(s)\n`);
      return;
    }
    case 'credit grant': {
      if (!values.team || !values.amount) fail('--team and --amount are required (parley credit grant --help)');
      const balance = await withAdmin((a) => a.grantCredit({ teamId: values.team!, amountMicros: micros(values.amount!) }));
      if (balance === undefined) fail(`no team ${values.team}`);
      process.stdout.write(`credit of ${values.team}: ${(Number(balance) / 1_000_000).toFixed(6)}\n`);
      return;
    }
    case 'beta grant':
    case 'beta revoke': {
      if (!values.team) fail(`--team is required (parley ${key} --help)`);
      const ok = await withAdmin((a) => a.setBeta({ teamId: values.team!, enabled: key === 'beta grant' }));
      if (!ok) fail(`no team ${values.team}`);
      process.stdout.write(`beta access ${key === 'beta grant' ? 'granted to' : 'revoked from'} ${values.team}\n`);
      return;
    }
    default:
      fail(`unknown command: ${positionals.join(' ')}\n\n${HELP['']}`);
  }
}

main(process.argv.slice(2)).catch((err) => {
  // What went wrong in one line; the stack only when asked for (LOG_LEVEL=debug).
  let debug = false;
  try {
    debug = ['debug', 'trace'].includes(loadConfig().logLevel);
  } catch {
    // a bad setting is what failed: say it without the stack
  }
  process.stderr.write(`parley: ${err instanceof Error ? (debug ? err.stack ?? err.message : err.message) : String(err)}\n`);
  process.exit(1);
});
