// The `parley` CLI beside a running server (README "Your first API key"): on the embedded store
// it reaches the server that holds the data folder, so a key it creates works at once; on a real
// Postgres it writes to the database. A second server never opens a folder one already holds.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { parley, serve, serveFailing, untilReady } from '../helpers/process.ts';

const BOOT = 'pk_test_cli_running_0123456789abcdefghijklmnop';

function folder(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(os.tmpdir(), 'parley-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const agents = (url: string, key: string) => fetch(`${url}/v1/agent/agents`, { headers: { Authorization: `Bearer ${key}` } }).then((r) => r.status);

async function teamAndKeys(t: Test, url: string, env: Record<string, string>): Promise<void> {
  const team = await parley(['team', 'create', '--name', 'acme', '--beta', '--credit', '5'], env);
  t.equal(team.code, 0, team.output);
  const teamId = /team (team_\S+)/.exec(team.stdout)?.[1];
  const key = /key\s+(pk_\S+)/.exec(team.stdout)?.[1];
  t.ok(teamId && key, 'prints the team and its first key');
  t.equal(await agents(url, key!), 200, 'the running server accepts the new key at once');

  const made = await parley(['key', 'create', '--team', teamId!, '--name', 'ci'], env);
  t.equal(made.code, 0, made.output);
  const [, keyId, second] = /^(key_\S+) (pk_\S+)$/.exec(made.stdout.trim()) ?? [];
  t.equal(await agents(url, second!), 200, 'a second key works at once');

  const credit = await parley(['credit', 'grant', '--team', teamId!, '--amount', '2.5'], env);
  t.equal(credit.code, 0, credit.output);
  t.match(credit.stdout, /credit of team_\S+: 7\.500000/, 'the balance after the grant');

  const beta = await parley(['beta', 'revoke', '--team', teamId!], env);
  t.equal(beta.code, 0, beta.output);
  const created = await fetch(`${url}/v1/agent/agents`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'needs beta' }) });
  t.equal(created.status, 403, 'beta access revoked takes effect on the running server');

  const revoked = await parley(['key', 'revoke', keyId!], env);
  t.equal(revoked.code, 0, revoked.output);
  t.equal(await agents(url, second!), 401, 'a revoked key is refused');

  const missing = await parley(['key', 'create', '--team', 'team_missing'], env);
  t.equal(missing.code, 2);
  t.match(missing.output, /no team team_missing/);
}

t.test('embedded store: the CLI goes through the running server, never the folder beside it', async (t) => {
  const dataDir = folder(t);
  const env = { PARLEY_DATA_DIR: dataDir, PARLEY_BOOTSTRAP_KEY: BOOT, PARLEY_SPEECH_ENGINE: 'synthetic', PARLEY_AUTH_CACHE_MS: '0' };
  const server = await serve(t, env);
  await untilReady(server.url);
  t.ok(existsSync(join(dataDir, 'server.json')), 'the server announces itself in its data folder');
  await teamAndKeys(t, server.url, env);

  const second = await serveFailing({ ...env, PARLEY_NATIVE_BACKEND: 'false' });
  t.not(second.code, 0, 'a second server on the same folder does not start');
  t.match(second.output, /another Parley server \(pid \d+, http:\/\/127\.0\.0\.1:\d+\) is running on the data folder/);
  t.match(second.output, /PARLEY_DATA_DIR/, 'and says what to do');

  const migrate = await parley(['migrate'], env);
  t.equal(migrate.code, 0);
  t.match(migrate.stdout, /applied the migrations when it started/);

  t.equal(await server.stop(), 0);
  t.notOk(existsSync(join(dataDir, 'server.json')), 'the announcement goes with the server');

  // With no server, the CLI opens the folder itself; the next server sees what it wrote.
  const offline = await parley(['team', 'create', '--name', 'later'], env);
  t.equal(offline.code, 0, offline.output);
  const key = /key\s+(pk_\S+)/.exec(offline.stdout)![1]!;
  const again = await serve(t, env);
  await untilReady(again.url);
  t.equal(await agents(again.url, key), 200, 'a key made while no server ran works after the restart');
  t.equal(await again.stop(), 0);
});

const databaseUrl = process.env.DATABASE_URL;
t.test('real Postgres: the CLI writes to the database, and the running server uses the key at once', { skip: databaseUrl ? false : 'DATABASE_URL is not set' }, async (t) => {
  const env = { DATABASE_URL: databaseUrl!, PARLEY_DATA_DIR: folder(t), PARLEY_BOOTSTRAP_KEY: 'pk_test_cli_pg_0123456789abcdefghijklmnopqrs', PARLEY_NATIVE_BACKEND: 'false', PARLEY_AUTH_CACHE_MS: '0' };
  const server = await serve(t, env);
  await untilReady(server.url);
  await teamAndKeys(t, server.url, env);
  t.equal(await server.stop(), 0);
});
