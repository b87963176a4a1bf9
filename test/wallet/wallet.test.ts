// The wallet endpoints through both official speech clients' `user` calls, and their rules:
// scoped to the caller's team (self or its id; another id is 404), credit as a decimal string.
import t from 'tap';
import { FishAudioClient, FishAudioError } from 'fish-audio';
import fishSdk from 'fish-audio-sdk';
import { grantCredit } from '../../src/auth/store-teams.ts';
import { decimalOf } from '../../src/wallet/service.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

type Entity = Record<string, any>;
const { Session } = fishSdk as unknown as {
  Session: new (key: string, base: string) => {
    getApiCredit(p?: { checkFreeCredit?: boolean }): Promise<Entity>;
    getPackage(): Promise<Entity>;
    close(): void;
  };
};

const app: TestServer = await startTestServer();
t.teardown(() => app.close());

const creditOf = async (teamId: string) => {
  const [row] = await app.db.sql<{ credit_micros: string; created_at: Date }[]>`select credit_micros::text, created_at from teams where id = ${teamId}`;
  return { micros: BigInt(row!.credit_micros), createdAt: row!.created_at };
};

t.test('decimal strings: exact micro-units, two to six decimals', async (t) => {
  t.equal(decimalOf(25_000_000n), '25.00');
  t.equal(decimalOf(1_234_567n), '1.234567');
  t.equal(decimalOf(1_500_000n), '1.50');
  t.equal(decimalOf(10n), '0.00001');
  t.equal(decimalOf(0n), '0.00');
  t.equal(decimalOf(-1_500_000n), '-1.50');
  t.equal(decimalOf(-5n), '-0.000005');
});

t.test('the official fish-audio client: user.get_api_credit and user.get_package', async (t) => {
  const fish = new FishAudioClient({ apiKey: app.key, baseUrl: app.url });
  const team = await creditOf(app.teamId);
  const credit = (await fish.user.get_api_credit()) as unknown as Entity;
  t.same(Object.keys(credit).sort(), ['_id', 'created_at', 'credit', 'cumulative_top_up', 'has_free_credit', 'has_phone_sha256', 'updated_at', 'user_id']);
  t.equal(credit.user_id, app.teamId);
  t.equal(credit._id, app.teamId);
  t.equal(credit.credit, decimalOf(team.micros), `credit ${credit.credit}`);
  t.equal(credit.cumulative_top_up, decimalOf(team.micros), 'nothing spent yet: every grant is still there');
  t.equal(credit.created_at, team.createdAt.toISOString());
  t.equal(credit.has_phone_sha256, false);
  t.equal(credit.has_free_credit, null, 'not asked for');

  const pkg = (await fish.user.get_package()) as unknown as Entity;
  t.equal(pkg.user_id, app.teamId);
  t.equal(pkg.type, 'self_hosted');
  t.equal(pkg.total, 0);
  t.equal(pkg.balance, 0);
  t.equal(pkg.created_at, team.createdAt.toISOString());
  t.equal(pkg.finished_at, null);
  t.equal(pkg.stripe_subscription_id, null);
  t.equal(pkg.has_used_trial, false);
});

t.test('the community fish-audio-sdk: getApiCredit({checkFreeCredit}) and getPackage', async (t) => {
  const other = await app.newTeam({ creditMicros: 7_250_000n });
  const session = new Session(other.key, app.url);
  t.teardown(() => session.close());
  const credit = await session.getApiCredit({ checkFreeCredit: true });
  t.equal(credit.user_id, other.teamId, "the caller's own team");
  t.equal(credit.credit, '7.25');
  t.equal(credit.cumulative_top_up, '7.25');
  t.equal(credit.has_free_credit, false, 'asked for: Parley grants no free credit');
  const pkg = await session.getPackage();
  t.equal(pkg.user_id, other.teamId);
  t.equal(pkg.type, 'self_hosted');
});

t.test('spending lowers credit, not cumulative_top_up; updated_at is the last movement', async (t) => {
  const team = await app.newTeam({ creditMicros: 3_000_000n });
  const auth = team.auth;
  const before = (await app.req('GET', '/wallet/self/api-credit', undefined, auth)).body;
  t.equal(before.credit, '3.00');
  await grantCredit(app.db.sql, team.teamId, -1_250_000n, 'usage', 'test');
  await grantCredit(app.db.sql, team.teamId, 500_000n);
  const after = (await app.req('GET', '/wallet/self/api-credit', undefined, auth)).body;
  t.equal(after.credit, '2.25');
  t.equal(after.cumulative_top_up, '3.50', 'grants only: the usage entry is spending');
  t.ok(Date.parse(after.updated_at) >= Date.parse(before.updated_at), 'updated_at moved forward');
  const [last] = await app.db.sql<{ at: Date }[]>`select max(created_at) as at from credit_ledger where team_id = ${team.teamId}`;
  t.equal(after.updated_at, last!.at.toISOString());
});

t.test("user_id is self or the caller's team; anything else is 404", async (t) => {
  const other = await app.newTeam();
  const own = await app.req('GET', `/wallet/${app.teamId}/api-credit`);
  t.equal(own.status, 200);
  t.equal(own.body.user_id, app.teamId);
  t.equal((await app.req('GET', `/wallet/${app.teamId}/package`)).status, 200);
  for (const path of [`/wallet/${other.teamId}/api-credit`, `/wallet/${other.teamId}/package`, '/wallet/nobody/api-credit', `/wallet/self/api-credit?team_id=${other.teamId}`]) {
    const r = await app.req('GET', path);
    t.equal(r.status, 404, path);
    t.same(r.body, { status: 404, message: 'User not found' });
  }
  t.equal((await app.req('GET', `/wallet/self/api-credit?team_id=${app.teamId}`)).status, 200, 'team_id naming the own team');
  const fish = new FishAudioClient({ apiKey: other.key, baseUrl: app.url });
  const err = await fish.user.get_api_credit({ queryParams: { team_id: app.teamId }, maxRetries: 0 }).then(() => null, (e: unknown) => e);
  t.ok(err instanceof FishAudioError && err.statusCode === 404, "the client sees 404 for another team's wallet");
});

t.test('authentication and query validation', async (t) => {
  const none = await fetch(`${app.url}/wallet/self/api-credit`);
  t.equal(none.status, 401);
  const bad = await app.req('GET', '/wallet/self/api-credit', undefined, { Authorization: 'Bearer nope' });
  t.equal(bad.status, 401);
  t.equal(bad.body.message, 'Invalid Token', 'the speech API message');
  const q = await app.req('GET', '/wallet/self/api-credit?check_free_credit=maybe');
  t.equal(q.status, 422);
  t.same(q.body[0].loc, ['query', 'check_free_credit']);
});
