import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { appendSessionItems, getSessionRuntime, insertSessions, listSessionItems, markSessionActive, markSessionEnded, refundExpiredHolds, type NewSession } from '../../src/sessions/store.ts';
import { CreationBatcher } from '../../src/sessions/creation-batch.ts';
import { ItemBatcher } from '../../src/sessions/item-batch.ts';
import { PRICE, anon, credit, makeAgent } from './sessions-helpers.ts';

/** The store functions the session runtime calls (docs/sessions-contract.md). */
const app = await startTestServer();
t.teardown(() => app.close());
const sql = app.db.sql;
const ORIGIN = 'https://site.example.com';

async function newSession(creditMicros = 100n * PRICE) {
  const team = await app.newTeam({ creditMicros });
  const agent = await makeAgent(app, { auth: team.auth });
  const r = await app.req('POST', '/v1/agent/sessions', { agent_id: agent }, team.auth);
  if (r.status !== 200) throw new Error(`create: ${r.status} ${r.text}`);
  return { team, agent, id: r.body.session_id as string };
}
const ledger = (teamId: string) =>
  sql<{ amount_micros: bigint; reason: string; ref: string | null }[]>`select amount_micros, reason, ref from credit_ledger where team_id = ${teamId} and reason like 'session%' order by id`.then(
    (rows) => rows.map((r) => ({ amount: BigInt(r.amount_micros), reason: r.reason, ref: r.ref })),
  );
/** Moves the session's start back in time (a session that ran that long). */
const ranFor = (id: string, seconds: number) => sql`update sessions set started_at = clock_timestamp() - make_interval(secs => ${seconds}) where id = ${id}`;

t.test('markSessionActive: pending → active once, with started_at and node', async (t) => {
  const { id } = await newSession();
  t.equal(await markSessionActive(sql, id, 'node-1'), true);
  t.equal(await markSessionActive(sql, id, 'node-2'), false, 'not pending any more');
  const [row] = await sql`select status, node_id, started_at from sessions where id = ${id}`;
  t.equal(row!.status, 'active');
  t.equal(row!.node_id, 'node-1');
  t.ok(row!.started_at instanceof Date);
  t.equal(await markSessionActive(sql, 'sess_000000000000000000000000', 'n'), false);
});

t.test('markSessionEnded: only the first call ends it', async (t) => {
  const { id } = await newSession();
  await markSessionActive(sql, id, 'n');
  t.equal(await markSessionEnded(sql, id, { status: 'completed', reason: 'hangup', metrics: { turns: [] } }), true);
  t.equal(await markSessionEnded(sql, id, { status: 'failed', reason: 'error' }), false);
  const [row] = await sql`select status, ended_reason, metrics from sessions where id = ${id}`;
  t.same(row, { status: 'completed', ended_reason: 'hangup', metrics: { turns: [] } });
  t.equal(await markSessionActive(sql, id, 'n'), false, 'an ended session never becomes active again');
});

t.test('settlement: every started minute at the price; the difference beyond the hold is charged with a ledger entry', async (t) => {
  const { team, id } = await newSession(10n * PRICE);
  t.equal(await credit(app, team.teamId), 9n * PRICE, 'one minute held');
  await markSessionActive(sql, id, 'n');
  await ranFor(id, 150); // 2.5 minutes → 3 started minutes
  await markSessionEnded(sql, id, { status: 'completed', reason: 'hangup' });
  t.equal(await credit(app, team.teamId), 7n * PRICE);
  t.same(await ledger(team.teamId), [
    { amount: -PRICE, reason: 'session_hold', ref: id },
    { amount: -2n * PRICE, reason: 'session_usage', ref: id },
  ]);
  const [row] = await sql`select charged_micros from sessions where id = ${id}`;
  t.equal(BigInt(row!.charged_micros), 3n * PRICE);
});

t.test('settlement: a session under a minute costs exactly the hold (no entry); one nobody joined is refunded', async (t) => {
  const short = await newSession(10n * PRICE);
  await markSessionActive(sql, short.id, 'n');
  await markSessionEnded(sql, short.id, { status: 'completed', reason: 'hangup' });
  t.equal(await credit(app, short.team.teamId), 9n * PRICE);
  t.same((await ledger(short.team.teamId)).map((e) => e.reason), ['session_hold']);

  const unjoined = await newSession(10n * PRICE);
  await markSessionEnded(sql, unjoined.id, { status: 'completed', reason: 'ended_by_api' });
  t.equal(await credit(app, unjoined.team.teamId), 10n * PRICE);
  t.same(await ledger(unjoined.team.teamId), [
    { amount: -PRICE, reason: 'session_hold', ref: unjoined.id },
    { amount: PRICE, reason: 'session_refund', ref: unjoined.id },
  ]);
});

t.test('settlement never fails: a public session is billed to the owner at the end, even past the balance', async (t) => {
  const owner = await app.newTeam({ creditMicros: PRICE });
  const agent = await makeAgent(app, { auth: owner.auth, public_enabled: true, allowed_origins: [ORIGIN] });
  const r = await anon(app, { agent_id: agent }, { Origin: ORIGIN });
  t.equal(r.status, 200);
  t.equal(await credit(app, owner.teamId), PRICE, 'nothing charged up front');
  await markSessionActive(sql, r.body.session_id, 'n');
  await ranFor(r.body.session_id, 121); // 3 started minutes
  t.equal(await markSessionEnded(sql, r.body.session_id, { status: 'completed', reason: 'hangup' }), true);
  t.equal(await credit(app, owner.teamId), -2n * PRICE);
  t.same(await ledger(owner.teamId), [{ amount: -3n * PRICE, reason: 'session_usage', ref: r.body.session_id }]);
});

t.test('getSessionRuntime: the row and the version the session runs, even after a newer publish', async (t) => {
  const team = await app.newTeam();
  const agent = await makeAgent(app, { auth: team.auth, config: { prompt: { system_prompt: 'Version one.' } } });
  const s = (await app.req('POST', '/v1/agent/sessions', { agent_id: agent, dynamic_variables: { a: 1 } }, team.auth)).body;
  await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { prompt: { system_prompt: 'Version two.' } }, team.auth);
  await app.req('POST', `/v1/agent/agents/${agent}/publish`, undefined, team.auth);
  const rt = await getSessionRuntime(sql, s.session_id);
  t.ok(rt);
  t.equal(rt!.session.id, s.session_id);
  t.equal(rt!.session.version_number, 1);
  t.equal(rt!.session.status, 'pending');
  t.same(rt!.session.dynamic_variables, { a: 1 });
  t.equal(rt!.config.prompt.system_prompt, 'Version one.');
  t.ok(rt!.pinned !== undefined);
  const [{ hash }] = await sql`select encode(sha256(convert_to(${s.token}, 'UTF8')), 'hex') as hash`;
  t.equal(rt!.session.token_hash, hash, 'token_hash is the sha256 of the token');
  t.equal(await getSessionRuntime(sql, 'sess_000000000000000000000000'), undefined);
});

t.test('appendSessionItems: seq continues across calls, concurrent appends all land', async (t) => {
  const { id } = await newSession();
  await appendSessionItems(sql, id, [{ type: 'message', payload: { role: 'assistant', content: 'Hi', turn_id: 0 } }]);
  await Promise.all([
    appendSessionItems(sql, id, [{ type: 'message', payload: { role: 'user', content: 'a', turn_id: 1 } }, { type: 'message', payload: { role: 'assistant', content: 'b', turn_id: 1 } }]),
    appendSessionItems(sql, id, [{ type: 'message', payload: { role: 'user', content: 'c', turn_id: 2 } }]),
  ]);
  await appendSessionItems(sql, id, []);
  const items = await listSessionItems(sql, id);
  t.same(items.map((i) => i.seq), [1, 2, 3, 4]);
  t.equal(items[0]!.payload.content, 'Hi');
  t.same(items.map((i) => i.payload.content).sort(), ['Hi', 'a', 'b', 'c']);
  await appendSessionItems(sql, 'sess_000000000000000000000000', [{ type: 'message', payload: {} }]);
  t.same(await listSessionItems(sql, 'sess_000000000000000000000000'), [], 'an unknown session gets nothing');
});

t.test('refundExpiredHolds: an expired pending session stays pending and gets its hold back, once', async (t) => {
  const { team, id } = await newSession(5n * PRICE);
  await sql`update sessions set expires_at = clock_timestamp() - interval '1 second' where id = ${id}`;
  t.ok((await refundExpiredHolds(sql)) >= 1);
  t.equal(await credit(app, team.teamId), 5n * PRICE);
  const [row] = await sql`select status, charged_micros from sessions where id = ${id}`;
  t.equal(row!.status, 'pending');
  t.equal(BigInt(row!.charged_micros), 0n);
  await refundExpiredHolds(sql);
  await markSessionEnded(sql, id, { status: 'completed', reason: 'ended_by_api' });
  t.same((await ledger(team.teamId)).map((e) => e.reason), ['session_hold', 'session_refund'], 'refunded exactly once');
  t.equal(await credit(app, team.teamId), 5n * PRICE);
});

/** A new session row of `teamId`'s `agentId` as creation builds it. */
function row(teamId: string, agentId: string, fields: Partial<NewSession> = {}): NewSession {
  return {
    id: `sess_${Math.random().toString(16).slice(2).padEnd(24, '0').slice(0, 24)}`, team_id: teamId, agent_id: agentId, agent_name: 'Session agent',
    version_number: 1, config_hash: 'h', name: null, source: 'api_key', direction: 'inbound', transport: 'websocket',
    expires_at: new Date(Date.now() + 60_000), max_duration_seconds: 600, overrides: {}, dynamic_variables: {}, secret_variables: null,
    tool_events: true, end_user_id: null, metadata: {}, record_audio: false, timezone: 'UTC', client_timezone: null, world_context: true,
    price_per_minute_micros: PRICE, caller_number: null, dialed_number: null, token_hash: 'x',
    ...fields,
  };
}

t.test('insertSessions: a batch decides each creation as one statement per creation would, in order, per team', async (t) => {
  const a = await app.newTeam({ creditMicros: 2n * PRICE });
  const b = await app.newTeam({ creditMicros: PRICE });
  const agentA = await makeAgent(app, { auth: a.auth });
  const agentB = await makeAgent(app, { auth: b.auth });
  const items = [
    { session: row(a.teamId, agentA, { metadata: { zeta: 1, alpha: 2 } }), mode: 'hold' as const }, // credit 2 → 1
    { session: row(a.teamId, agentA, { source: 'public' }), mode: 'require' as const }, // 1 left ≥ the price: yes, nothing taken
    { session: row(b.teamId, agentB), mode: 'hold' as const }, // B: 1 → 0
    { session: row(a.teamId, agentA), mode: 'hold' as const }, // 1 → 0
    { session: row(a.teamId, agentA), mode: 'hold' as const }, // short: refused
    { session: row(a.teamId, agentA, { source: 'public' }), mode: 'require' as const }, // 0 left: refused
    { session: row(b.teamId, agentB), mode: 'hold' as const }, // B short: refused
  ];
  const out = await insertSessions(sql, items, PRICE);
  t.same(out.map((r) => r?.id ?? null), items.map((x, i) => ([0, 1, 2, 3].includes(i) ? x.session.id : null)));
  t.same(out.map((r) => (r ? BigInt(r.charged_micros) : null)), [PRICE, 0n, PRICE, PRICE, null, null, null], 'the hold on each row that took one');
  t.same(Object.keys(out[0]!.metadata), ['zeta', 'alpha'], 'metadata keeps its key order');
  t.equal(await credit(app, a.teamId), 0n);
  t.equal(await credit(app, b.teamId), 0n);
  t.same((await ledger(a.teamId)).map((e) => [e.amount, e.reason, e.ref]), [[-PRICE, 'session_hold', items[0]!.session.id], [-PRICE, 'session_hold', items[3]!.session.id]]);
  const stored = await sql`select id from sessions where id in ${sql(items.map((x) => x.session.id))}`;
  t.equal(stored.length, 4, 'nothing stored for a refused creation');
});

t.test('ItemBatcher: several sessions\' items in one batch, each in its own order; a refused item fails only its own session', async (t) => {
  const [a, b, c, d] = [await newSession(), await newSession(), await newSession(), await newSession()];
  await appendSessionItems(sql, a.id, [{ type: 'message', payload: { content: 'first', turn_id: 0 } }]);
  const msg = (content: string, ref: string) => ({ type: 'message', payload: { content, turn_id: 1 }, ref });
  const batcher = new ItemBatcher(sql, { windowMs: 20, maxItems: 3 });
  const results = await Promise.allSettled([
    batcher.append(a.id, [msg('a1', 'r1'), msg('a2', 'r2')]),
    batcher.append(b.id, [msg('b1', 'r1')]),
    // The second statement (at most 3 items each): jsonb cannot hold a NUL, so it is refused
    // whole, then each session is written alone.
    batcher.append(c.id, [msg('c\u0000', 'r1')]),
    batcher.append(d.id, [msg('d1', 'r1')]),
    batcher.append('sess_000000000000000000000000', [msg('nobody', 'r1')]),
    batcher.append(b.id, []),
  ]);
  t.same(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
  const contents = async (id: string) => (await listSessionItems(sql, id)).map((i) => [i.seq, i.payload.content]);
  t.same(await contents(a.id), [[1, 'first'], [2, 'a1'], [3, 'a2']], 'seq continues from the session\'s own last item');
  t.same(await contents(b.id), [[1, 'b1']]);
  t.same(await contents(c.id), [], 'the refused item is not stored');
  t.same(await contents(d.id), [[1, 'd1']], 'the session beside it in the refused statement is stored');
  // Written again (a retry after a lost answer): the refs skip what was stored.
  await Promise.all([batcher.append(a.id, [msg('a2', 'r2'), msg('a3', 'r3')]), batcher.append(b.id, [msg('b1', 'r1')])]);
  t.same(await contents(a.id), [[1, 'first'], [2, 'a1'], [3, 'a2'], [4, 'a3']]);
  t.same(await contents(b.id), [[1, 'b1']]);
});

t.test('CreationBatcher: concurrent creations share a statement; a row the store refuses fails only its own creation', async (t) => {
  const team = await app.newTeam({ creditMicros: 10n * PRICE });
  const agent = await makeAgent(app, { auth: team.auth });
  const batcher = new CreationBatcher(sql, PRICE);
  // A NUL cannot be stored in text: that row's statement fails; the batch is retried one by one.
  const bad = row(team.teamId, agent, { name: 'a\u0000b' });
  const good = [row(team.teamId, agent), row(team.teamId, agent), row(team.teamId, agent)];
  const results = await Promise.allSettled([batcher.insert(good[0]!, 'hold'), batcher.insert(bad, 'hold'), batcher.insert(good[1]!, 'hold'), batcher.insert(good[2]!, 'require')]);
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
  t.same(results.map((r) => (r.status === 'fulfilled' ? r.value?.id : null)), [good[0]!.id, null, good[1]!.id, good[2]!.id]);
  t.equal(await credit(app, team.teamId), 8n * PRICE, 'two holds taken, none for the refused row');
});
