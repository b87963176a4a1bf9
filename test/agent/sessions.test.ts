import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { openApiValidator } from '../helpers/openapi.ts';
import { PRICE, anon, credit, makeAgent } from './sessions-helpers.ts';
import { openSecretVariables } from '../../src/sessions/service.ts';

// Generous public windows here: the rate limits have their own file (sessions-rate-limit.test.ts).
const app = await startTestServer({ config: { publicRatePerIp: 1000, publicRatePerAgent: 1000 } });
t.teardown(() => app.close());
const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);

/** Every 2xx body these tests receive is also checked against /openapi.json. */
async function call(method: string, template: string, path: string, body?: unknown, headers?: Record<string, string>) {
  const res = await app.req(method, path, body, headers);
  if (res.status < 300 && res.body !== undefined) {
    const errors = oas.check(method, template, res.status, res.body);
    if (errors.length) throw new Error(`${method} ${path} → ${res.status} does not match its documented schema: ${errors.join('; ')}`);
  }
  return res;
}
const create = (body: unknown, headers?: Record<string, string>) => call('POST', '/v1/agent/sessions', '/v1/agent/sessions', body, headers);
const detail = (id: string, headers?: Record<string, string>) => call('GET', '/v1/agent/sessions/{session_id}', `/v1/agent/sessions/${id}`, undefined, headers);
const list = (q = '', headers?: Record<string, string>) => call('GET', '/v1/agent/sessions', `/v1/agent/sessions${q}`, undefined, headers);
const end = (id: string, headers?: Record<string, string>) => app.req('POST', `/v1/agent/sessions/${id}/end`, undefined, headers);

const ORIGIN = 'https://shop.example.com';
const ALL_OVERRIDES = ['first_message', 'system_prompt', 'voice_id', 'language'];

t.test('200: session_id, expires_at (creation + 60 s), max_duration_seconds from the version, websocket transport and a token', async (t) => {
  const agent = await makeAgent(app, { config: { conversation: { max_duration_seconds: 600 } } });
  const r = await create({ agent_id: agent }, { Host: 'voice.example.test:8443' });
  t.equal(r.status, 200);
  t.match(r.body.session_id, /^sess_[0-9a-f]{24}$/);
  t.equal(r.body.max_duration_seconds, 600);
  t.equal(r.body.transport, 'websocket');
  t.match(r.body.token, /^[A-Za-z0-9_-]{43}$/, '32 random bytes, base64url');
  t.match(r.body.websocket_url, /^ws:\/\/[^/]+\/v1\/agent\/sessions\/connect$/);
  t.equal(await app.state.get(`session-token:${r.body.token}`), r.body.session_id, 'the shared state maps the token to the session');
  const rec = await detail(r.body.session_id);
  t.equal(rec.body.status, 'pending');
  t.equal(rec.body.source, 'api_key');
  const ttl = Date.parse(r.body.expires_at) - Date.parse(rec.body.created_at);
  t.ok(ttl > 59_000 && ttl < 61_000, `expires_at is creation + 60 s (got ${ttl} ms)`);
  t.equal(rec.body.expires_at, r.body.expires_at);
});

t.test('websocket_url follows the Host header and X-Forwarded-Proto', async (t) => {
  const agent = await makeAgent(app);
  const plain = await create({ agent_id: agent });
  t.equal(plain.body.websocket_url, `ws://127.0.0.1:${app.port}/v1/agent/sessions/connect`);
  const tls = await create({ agent_id: agent }, { 'X-Forwarded-Proto': 'https' });
  t.equal(tls.body.websocket_url, `wss://127.0.0.1:${app.port}/v1/agent/sessions/connect`);
});

t.test('409: Agent has no published version', async (t) => {
  const agent = await makeAgent(app, { publish: false });
  const r = await create({ agent_id: agent });
  t.equal(r.status, 409);
  t.same(r.body, { status: 409, message: 'Agent has no published version' });
});

t.test('409: Agent is archived', async (t) => {
  const agent = await makeAgent(app);
  await app.req('PATCH', `/v1/agent/agents/${agent}`, { status: 'archived' });
  const r = await create({ agent_id: agent });
  t.equal(r.status, 409);
  t.equal(r.body.message, 'Agent is archived');
});

t.test('what creation reads of an agent follows each write at once: publish, public switch, archive, delete', async (t) => {
  // Creation keeps the agent and its published version in memory (D-SESS-2): every write
  // answered before a creation is seen by it.
  const agent = await makeAgent(app, { config: { conversation: { max_duration_seconds: 600 } }, public_enabled: true, allowed_origins: [ORIGIN] });
  t.equal((await create({ agent_id: agent })).body.max_duration_seconds, 600);
  t.equal((await anon(app, { agent_id: agent }, { Origin: ORIGIN })).status, 200);
  t.equal((await app.req('PATCH', `/v1/agent/agents/${agent}/config`, { conversation: { max_duration_seconds: 300 } })).status, 200);
  t.equal((await create({ agent_id: agent })).body.max_duration_seconds, 600, 'a draft change alone runs nothing new');
  t.equal((await app.req('POST', `/v1/agent/agents/${agent}/publish`)).status, 200);
  t.equal((await create({ agent_id: agent })).body.max_duration_seconds, 300, 'the version just published');
  t.equal((await app.req('PATCH', `/v1/agent/agents/${agent}`, { public_enabled: false })).status, 200);
  t.equal((await anon(app, { agent_id: agent }, { Origin: ORIGIN })).status, 403);
  t.equal((await app.req('PATCH', `/v1/agent/agents/${agent}`, { status: 'archived' })).status, 200);
  t.equal((await create({ agent_id: agent })).status, 409);
  t.equal((await app.req('DELETE', `/v1/agent/agents/${agent}`)).status, 204);
  t.equal((await create({ agent_id: agent })).status, 404);
});

t.test('404: unknown agent, and another team\'s agent exactly alike', async (t) => {
  const missing = await create({ agent_id: 'agent_000000000000000000000000' });
  t.equal(missing.status, 404);
  const other = await app.newTeam();
  const theirs = await makeAgent(app, { auth: other.auth });
  const r = await create({ agent_id: theirs });
  t.equal(r.status, 404);
  t.same(r.body, missing.body);
});

t.test('401: a present but invalid key on session creation; a malformed header is a bare 401', async (t) => {
  const agent = await makeAgent(app);
  const bad = await app.req('POST', '/v1/agent/sessions', { agent_id: agent }, { Authorization: 'Bearer pk_nope' });
  t.equal(bad.status, 401);
  t.same(bad.body, { status: 401, message: 'Invalid token' });
  const malformed = await app.req('POST', '/v1/agent/sessions', { agent_id: agent }, { Authorization: 'Basic abc' });
  t.equal(malformed.status, 401);
  t.equal(malformed.headers.get('www-authenticate'), 'Bearer');
});

t.test('name: up to 128 characters, stored and listed', async (t) => {
  const agent = await makeAgent(app);
  t.equal((await create({ agent_id: agent, name: 'x'.repeat(129) })).status, 422);
  const r = await create({ agent_id: agent, name: 'Order 42' });
  t.equal(r.status, 200);
  t.equal((await detail(r.body.session_id)).body.name, 'Order 42');
});

t.test('400: an override the agent does not allow, never silently dropped', async (t) => {
  const agent = await makeAgent(app, { overrides_allowed: ['language'] });
  const r = await create({ agent_id: agent, overrides: { language: 'fr', system_prompt: 'Be brief.' } });
  t.equal(r.status, 400);
  t.same(r.body, { status: 400, message: 'Override not allowed: system_prompt' });
  const none = await makeAgent(app);
  t.equal((await create({ agent_id: none, overrides: { voice_id: 'v1' } })).body.message, 'Override not allowed: voice_id', 'the default list allows nothing');
});

t.test('first_message_prompt is gated by first_message', async (t) => {
  const closed = await makeAgent(app, { overrides_allowed: ['system_prompt'] });
  const r = await create({ agent_id: closed, overrides: { first_message_prompt: 'Say hi.' } });
  t.equal(r.status, 400);
  t.equal(r.body.message, 'Override not allowed: first_message_prompt');
  const open = await makeAgent(app, { overrides_allowed: ['first_message'] });
  t.equal((await create({ agent_id: open, overrides: { first_message_prompt: 'Say hi.' } })).status, 200);
});

t.test('422: first_message together with first_message_prompt', async (t) => {
  const agent = await makeAgent(app, { overrides_allowed: ALL_OVERRIDES });
  const r = await create({ agent_id: agent, overrides: { first_message: 'Hi', first_message_prompt: 'Greet' } });
  t.equal(r.status, 422);
  t.same(r.body[0].loc, ['body', 'overrides', 'first_message_prompt']);
  t.equal(r.body[0].type, 'exclusive_overrides');
});

t.test('422: override limits (10,000 characters, 4,000 tokens, voice_id 256, language enum, unknown system variable)', async (t) => {
  const agent = await makeAgent(app, { overrides_allowed: ALL_OVERRIDES });
  const cases: [unknown, string[]][] = [
    [{ first_message: 'a'.repeat(10_001) }, ['body', 'overrides', 'first_message']],
    [{ first_message: '{{system.nope}}' }, ['body', 'overrides', 'first_message']],
    [{ system_prompt: 'hello world '.repeat(2_100) }, ['body', 'overrides', 'system_prompt']],
    [{ voice_id: 'v'.repeat(257) }, ['body', 'overrides', 'voice_id']],
    [{ language: 'xx' }, ['body', 'overrides', 'language']],
  ];
  for (const [overrides, loc] of cases) {
    const r = await create({ agent_id: agent, overrides });
    t.equal(r.status, 422, loc.join('.'));
    t.same(r.body[0].loc, loc);
  }
  const tokens = await create({ agent_id: agent, overrides: { system_prompt: 'hello world '.repeat(2_100) } });
  t.match(tokens.body[0].msg, /exceeds 4000 tokens \(got \d+\)/);
  t.equal((await create({ agent_id: agent, overrides: { first_message: 'a'.repeat(10_000) } })).status, 200, 'exactly 10,000 is fine');
});

t.test('422: unknown fields top-level or inside overrides', async (t) => {
  const agent = await makeAgent(app, { overrides_allowed: ALL_OVERRIDES });
  const top = await create({ agent_id: agent, max_duration_seconds: 60 });
  t.equal(top.status, 422);
  t.same(top.body[0].loc, ['body', 'max_duration_seconds']);
  t.equal(top.body[0].type, 'extra_forbidden');
  const inner = await create({ agent_id: agent, overrides: { speed: 2 } });
  t.equal(inner.status, 422);
  t.same(inner.body[0].loc, ['body', 'overrides', 'speed']);
});

t.test('the record stores the overrides in effect', async (t) => {
  const agent = await makeAgent(app, { overrides_allowed: ALL_OVERRIDES });
  const overrides = { first_message: 'Hello {{customer}}', system_prompt: 'Be brief.', voice_id: 'voice-7', language: 'de' };
  const r = await create({ agent_id: agent, overrides });
  t.equal(r.status, 200);
  t.same((await detail(r.body.session_id)).body.overrides, overrides);
  const bare = await create({ agent_id: agent });
  t.same((await detail(bare.body.session_id)).body.overrides, {});
});

t.test('dynamic_variables: up to 50, names [A-Za-z][A-Za-z0-9_]*, string/number/boolean values, system names refused (422)', async (t) => {
  const agent = await makeAgent(app);
  const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`v${i}`, i]));
  t.equal((await create({ agent_id: agent, dynamic_variables: fifty })).status, 200, '50 is fine');
  const bad: [Record<string, unknown>, string][] = [
    [{ ...fifty, v50: 1 }, 'too_many_variables'],
    [{ '1abc': 'x' }, 'variable_name'],
    [{ 'with-dash': 'x' }, 'variable_name'],
    [{ system__channel: 'x' }, 'reserved_variable'],
    [{ 'system.channel': 'x' }, 'reserved_variable'],
    [{ obj: { a: 1 } }, 'variable_type'],
    [{ list: [1] }, 'variable_type'],
    [{ nothing: null }, 'variable_type'],
    [{ long: 'x'.repeat(1_001) }, 'too_big_string'],
  ];
  for (const [vars, type] of bad) {
    const r = await create({ agent_id: agent, dynamic_variables: vars });
    t.equal(r.status, 422, JSON.stringify(Object.keys(vars).slice(-1)));
    t.equal(r.body[0].type, type);
  }
  const ok = await create({ agent_id: agent, dynamic_variables: { customer: 'Ada', visits: 3, vip: true, secret__token: 'tk' } });
  t.equal(ok.status, 200);
  t.same((await detail(ok.body.session_id)).body.dynamic_variables, { customer: 'Ada', visits: 3, vip: true }, 'secret__ variables are never returned');
  const [row] = await app.db.sql`select dynamic_variables, secret_variables from sessions where id = ${ok.body.session_id}`;
  t.notOk(JSON.stringify(row).includes('"tk"'), 'nor stored in clear');
  t.same(openSecretVariables(app.box, row as never), { secret__token: 'tk' }, 'they are stored sealed for tool requests');
});

t.test('tool_events (default true), record_audio (default: the agent\'s), world_context (default true)', async (t) => {
  const agent = await makeAgent(app, { config: { conversation: { record_audio: false } } });
  const d = await detail((await create({ agent_id: agent })).body.session_id);
  t.equal(d.body.tool_events, true);
  t.equal(d.body.record_audio, false);
  t.equal(d.body.world_context, true);
  const o = await detail((await create({ agent_id: agent, tool_events: false, record_audio: true, world_context: false })).body.session_id);
  t.equal(o.body.tool_events, false);
  t.equal(o.body.record_audio, true);
  t.equal(o.body.world_context, false);
  t.equal((await create({ agent_id: agent, tool_events: 'no' })).status, 422);
});

t.test('metadata and end_user_id are stored and returned verbatim (detail and list)', async (t) => {
  const agent = await makeAgent(app);
  const metadata = { zeta: 1, alpha: { nested: [1, 'two', null, { deep: true }], 'key with spaces': 'ünïcødé' }, beta: 2.5 };
  const r = await create({ agent_id: agent, metadata, end_user_id: 'user-üñ-42' });
  t.equal(r.status, 200);
  const d = await detail(r.body.session_id);
  t.same(d.body.metadata, metadata);
  t.same(Object.keys(d.body.metadata), ['zeta', 'alpha', 'beta'], 'key order kept');
  t.equal(d.body.end_user_id, 'user-üñ-42');
  await end(r.body.session_id);
  const row = (await list(`?agent_id=${agent}`)).body.sessions.find((s: { session_id: string }) => s.session_id === r.body.session_id);
  t.same(row.metadata, metadata);
  t.equal((await create({ agent_id: agent, end_user_id: 'u'.repeat(257) })).status, 422);
  t.equal((await create({ agent_id: agent, metadata: [1, 2] })).status, 422, 'metadata must be an object');
});

t.test('timezone: invalid → 422; request over agent; agent over client; client only when neither; invalid client ignored', async (t) => {
  const plain = await makeAgent(app);
  const zoned = await makeAgent(app, { config: { conversation: { timezone: 'Asia/Tokyo' } } });
  const bad = await create({ agent_id: plain, timezone: 'Mars/Olympus' });
  t.equal(bad.status, 422);
  t.same(bad.body[0].loc, ['body', 'timezone']);
  t.equal((await create({ agent_id: plain, timezone: 'x'.repeat(65) })).status, 422);
  const tz = async (body: Record<string, unknown>) => (await detail((await create(body)).body.session_id)).body.timezone;
  t.equal(await tz({ agent_id: zoned, timezone: 'Europe/Paris', client_timezone: 'America/Chicago' }), 'Europe/Paris');
  t.equal(await tz({ agent_id: zoned, client_timezone: 'America/Chicago' }), 'Asia/Tokyo');
  t.equal(await tz({ agent_id: plain, client_timezone: 'America/Chicago' }), 'America/Chicago');
  t.equal(await tz({ agent_id: plain, client_timezone: 'Not/AZone' }), 'UTC');
  t.equal(await tz({ agent_id: plain }), 'UTC');
});

t.test('402: Out of API credit, nothing charged and nothing inserted', async (t) => {
  const poor = await app.newTeam({ creditMicros: PRICE - 1n });
  const agent = await makeAgent(app, { auth: poor.auth });
  const r = await create({ agent_id: agent }, poor.auth);
  t.equal(r.status, 402);
  t.same(r.body, { status: 402, message: 'Out of API credit' });
  t.equal(await credit(app, poor.teamId), PRICE - 1n);
  t.equal((await list('?status=pending,active,completed,failed', poor.auth)).body.sessions.length, 0);
});

t.test('402 race: credit for exactly 3 sessions, 10 concurrent creations → 3 × 200, 7 × 402, balance exactly 0', async (t) => {
  const team = await app.newTeam({ creditMicros: 3n * PRICE });
  const agent = await makeAgent(app, { auth: team.auth });
  const results = await Promise.all(Array.from({ length: 10 }, () => app.req('POST', '/v1/agent/sessions', { agent_id: agent }, team.auth)));
  const statuses = results.map((r) => r.status).sort();
  t.same(statuses, [200, 200, 200, 402, 402, 402, 402, 402, 402, 402]);
  t.equal(await credit(app, team.teamId), 0n, 'never overdrawn');
  const holds = await app.db.sql`select amount_micros from credit_ledger where team_id = ${team.teamId} and reason = 'session_hold'`;
  t.equal(holds.length, 3);
  t.equal((await list('?status=pending', team.auth)).body.sessions.length, 3);
});

t.test('API-key creation holds one minute at the configured price', async (t) => {
  const team = await app.newTeam({ creditMicros: 10n * PRICE });
  const agent = await makeAgent(app, { auth: team.auth });
  await create({ agent_id: agent }, team.auth);
  t.equal(await credit(app, team.teamId), 9n * PRICE);
});

t.test('public: 403 Agent is not public', async (t) => {
  const agent = await makeAgent(app, { allowed_origins: [ORIGIN] });
  const r = await anon(app, { agent_id: agent }, { Origin: ORIGIN });
  t.equal(r.status, 403);
  t.same(r.body, { status: 403, message: 'Agent is not public' });
});

t.test('public: 403 Origin header is required for public agents', async (t) => {
  const agent = await makeAgent(app, { public_enabled: true, allowed_origins: [ORIGIN] });
  const r = await anon(app, { agent_id: agent });
  t.equal(r.status, 403);
  t.equal(r.body.message, 'Origin header is required for public agents');
});

t.test('public: 403 Origin not allowed; matching is exact scheme, host and port, host case-insensitive, trailing slash tolerated, no wildcards', async (t) => {
  const agent = await makeAgent(app, { public_enabled: true, allowed_origins: ['https://Shop.Example.com/', 'http://localhost:3000'] });
  const status = async (origin: string) => (await anon(app, { agent_id: agent }, { Origin: origin })).status;
  t.equal(await status('https://shop.example.com'), 200, 'host compare is case-insensitive; the entry\'s trailing slash is tolerated');
  t.equal(await status('https://SHOP.example.com'), 200);
  t.equal(await status('https://shop.example.com:443'), 200, 'the default port is the same origin');
  t.equal(await status('http://localhost:3000'), 200);
  const refused = ['http://shop.example.com', 'https://shop.example.com:8443', 'https://evil.example.com', 'https://sub.shop.example.com', 'http://127.0.0.1:3000', 'http://localhost:3001', 'http://localhost', 'null', 'https://shop.example.com.evil.io'];
  for (const origin of refused) {
    const r = await anon(app, { agent_id: agent }, { Origin: origin });
    t.equal(r.status, 403, origin);
    t.equal(r.body.message, 'Origin not allowed');
  }
  const wildcard = await makeAgent(app, { public_enabled: true, allowed_origins: ['https://example.com'] });
  t.equal((await anon(app, { agent_id: wildcard }, { Origin: 'https://www.example.com' })).status, 403, 'no wildcard or subdomain matching');
});

t.test('public: a keyless session is created without charging, with source public', async (t) => {
  const owner = await app.newTeam({ creditMicros: 5n * PRICE });
  const agent = await makeAgent(app, { auth: owner.auth, public_enabled: true, allowed_origins: [ORIGIN], overrides_allowed: ['language', 'voice_id'] });
  const r = await anon(app, { agent_id: agent, overrides: { language: 'es', voice_id: 'v2' }, client_timezone: 'Europe/Madrid' }, { Origin: ORIGIN });
  t.equal(r.status, 200);
  t.equal(await credit(app, owner.teamId), 5n * PRICE, 'nothing charged up front');
  const d = await detail(r.body.session_id, owner.auth);
  t.equal(d.body.source, 'public');
  t.same(d.body.overrides, { language: 'es', voice_id: 'v2' });
  t.equal(d.body.timezone, 'Europe/Madrid');
});

t.test('public: 400 for any override but language and voice_id (even when the agent allows it), and for name', async (t) => {
  const agent = await makeAgent(app, { public_enabled: true, allowed_origins: [ORIGIN], overrides_allowed: ALL_OVERRIDES });
  for (const field of ['system_prompt', 'first_message', 'first_message_prompt']) {
    const r = await anon(app, { agent_id: agent, overrides: { [field]: 'x' } }, { Origin: ORIGIN });
    t.equal(r.status, 400, field);
    t.equal(r.body.message, `Override not allowed: ${field}`);
  }
  const named = await anon(app, { agent_id: agent, name: 'mine' }, { Origin: ORIGIN });
  t.equal(named.status, 400);
  t.same(named.body, { status: 400, message: 'Session name requires an API key' });
  const closed = await makeAgent(app, { public_enabled: true, allowed_origins: [ORIGIN] });
  t.equal((await anon(app, { agent_id: closed, overrides: { language: 'fr' } }, { Origin: ORIGIN })).status, 400, 'the agent\'s own list applies too');
});

t.test('public: 403 Agent is unavailable when the owner is out of credit (never 402)', async (t) => {
  const owner = await app.newTeam({ creditMicros: 0n });
  const agent = await makeAgent(app, { auth: owner.auth, public_enabled: true, allowed_origins: [ORIGIN] });
  const r = await anon(app, { agent_id: agent }, { Origin: ORIGIN });
  t.equal(r.status, 403);
  t.same(r.body, { status: 403, message: 'Agent is unavailable' });
});

t.test('public: 409 and 404 still apply to keyless requests', async (t) => {
  const draft = await makeAgent(app, { publish: false, public_enabled: true, allowed_origins: [ORIGIN] });
  t.equal((await anon(app, { agent_id: draft }, { Origin: ORIGIN })).status, 409);
  t.equal((await anon(app, { agent_id: 'agent_000000000000000000000000' }, { Origin: ORIGIN })).status, 404);
  t.equal((await anon(app, { agent_id: draft, bogus: 1 }, { Origin: ORIGIN })).status, 422);
});

t.test('end: 204, a pending session is ended, its token deleted, the hold refunded, session-control told', async (t) => {
  const team = await app.newTeam({ creditMicros: 2n * PRICE });
  const agent = await makeAgent(app, { auth: team.auth });
  const s = (await create({ agent_id: agent }, team.auth)).body;
  t.equal(await credit(app, team.teamId), PRICE);
  const messages: string[] = [];
  const unsubscribe = await app.state.subscribe('session-control', (m) => void messages.push(m));
  t.teardown(unsubscribe);
  const r = await end(s.session_id, team.auth);
  t.equal(r.status, 204);
  t.equal(r.text, '');
  const d = await detail(s.session_id, team.auth);
  t.equal(d.body.status, 'completed');
  t.equal(d.body.ended_reason, 'ended_by_api');
  t.ok(d.body.ended_at);
  t.equal(await app.state.get(`session-token:${s.token}`), null, 'token deleted');
  t.equal(await credit(app, team.teamId), 2n * PRICE, 'a session nobody joined costs nothing');
  for (let i = 0; i < 100 && messages.length === 0; i++) await new Promise((res) => setTimeout(res, 10));
  t.same(messages.map((m) => JSON.parse(m)), [{ session_id: s.session_id, action: 'end', reason: 'api' }]);
  const again = await end(s.session_id, team.auth);
  t.equal(again.status, 204, 'ending an ended session is 204 too');
  t.equal((await detail(s.session_id, team.auth)).body.ended_reason, 'ended_by_api', 'the first end stays');
});

t.test('end: an active session is left to the node holding it, which session-control reaches', async (t) => {
  const { markSessionActive } = await import('../../src/sessions/store.ts');
  const agent = await makeAgent(app);
  const s = (await create({ agent_id: agent })).body;
  await markSessionActive(app.db.sql, s.session_id, 'node-x');
  const messages: string[] = [];
  const unsubscribe = await app.state.subscribe('session-control', (m) => void messages.push(m));
  t.teardown(unsubscribe);
  t.equal((await end(s.session_id)).status, 204);
  for (let i = 0; i < 100 && messages.length === 0; i++) await new Promise((res) => setTimeout(res, 10));
  t.same(messages.map((m) => JSON.parse(m)), [{ session_id: s.session_id, action: 'end', reason: 'api' }]);
  t.equal((await detail(s.session_id)).body.status, 'active', 'the runtime ends it on its node');
});

t.test('end and read: another team\'s session is 404, like a missing one', async (t) => {
  const agent = await makeAgent(app);
  const s = (await create({ agent_id: agent })).body;
  const other = await app.newTeam();
  t.equal((await end(s.session_id, other.auth)).status, 404);
  const theirs = await detail(s.session_id, other.auth);
  t.equal(theirs.status, 404);
  const missing = await detail('sess_000000000000000000000000');
  t.same(theirs.body, missing.body);
  t.same(missing.body, { status: 404, message: 'Session not found' });
  t.equal((await end('sess_000000000000000000000000')).status, 404);
  t.equal((await detail(s.session_id)).body.status, 'pending', 'untouched');
});

t.test('end and list need an API key', async (t) => {
  const bare = await fetch(`${app.url}/v1/agent/sessions`);
  t.equal(bare.status, 401);
  t.equal(bare.headers.get('www-authenticate'), 'Bearer');
  const e = await fetch(`${app.url}/v1/agent/sessions/sess_000000000000000000000000/end`, { method: 'POST' });
  t.equal(e.status, 401);
});

t.test('detail: items (transcript, tool calls) in order, analysis null, ended reason and metrics', async (t) => {
  const { appendSessionItems, markSessionActive, markSessionEnded } = await import('../../src/sessions/store.ts');
  const agent = await makeAgent(app);
  const s = (await create({ agent_id: agent })).body;
  await markSessionActive(app.db.sql, s.session_id, 'node-a');
  await appendSessionItems(app.db.sql, s.session_id, [
    { type: 'message', payload: { role: 'assistant', content: 'Hello!', turn_id: 0 } },
    { type: 'message', payload: { role: 'user', content: 'Order status?', turn_id: 1 } },
    { type: 'tool_call', payload: { call_id: 'c1', tool_name: 'lookup', tool_source: 'webhook', input: '{"id":1}', turn_id: 1 } },
  ]);
  await appendSessionItems(app.db.sql, s.session_id, [
    { type: 'tool_result', payload: { call_id: 'c1', tool_name: 'lookup', tool_source: 'webhook', status: 'completed', output: 'shipped', output_truncated: false, error: null, latency_ms: 12, turn_id: 1 } },
  ]);
  const metrics = { turns: [{ turn_id: 1, recognition_ms: 120, model_ms: 300, synthesis_ms: 80 }] };
  await markSessionEnded(app.db.sql, s.session_id, { status: 'completed', reason: 'hangup', metrics });
  const d = await detail(s.session_id);
  t.equal(d.status, 200);
  t.same(d.body.items.map((i: { type: string }) => i.type), ['message', 'message', 'tool_call', 'tool_result']);
  t.match(d.body.items[0], { type: 'message', role: 'assistant', content: 'Hello!', turn_id: 0, created_at: String });
  t.match(d.body.items[3], { type: 'tool_result', call_id: 'c1', status: 'completed', output: 'shipped', latency_ms: 12 });
  t.equal(d.body.analysis, null);
  t.equal(d.body.ended_reason, 'hangup');
  t.same(d.body.metrics, metrics);
  t.equal(d.body.status, 'completed');
  t.type(d.body.duration_seconds, 'number');
});

t.test('list: default excludes pending, status filter (comma list), agent_id, direction, caller_number, created_after/before', async (t) => {
  const team = await app.newTeam();
  const a = await makeAgent(app, { auth: team.auth });
  const b = await makeAgent(app, { auth: team.auth });
  const ids: string[] = [];
  for (const agent of [a, a, b]) ids.push((await create({ agent_id: agent }, team.auth)).body.session_id);
  await end(ids[0]!, team.auth);
  await end(ids[2]!, team.auth);
  const q = async (query: string) => (await list(query, team.auth)).body.sessions.map((s: { session_id: string }) => s.session_id);
  t.same(await q(''), [ids[2], ids[0]], 'newest first, pending excluded');
  t.same(await q('?status=pending'), [ids[1]]);
  t.same(await q('?status=pending,completed'), [ids[2], ids[1], ids[0]]);
  t.same(await q('?status=active,failed'), []);
  t.same(await q(`?agent_id=${a}&status=pending,completed`), [ids[1], ids[0]]);
  t.same(await q('?direction=inbound'), [ids[2], ids[0]]);
  t.same(await q('?direction=outbound'), []);
  t.same(await q('?caller_number=15551234567'), [], 'a bare number is accepted (+ prepended)');
  const mid = (await detail(ids[1]!, team.auth)).body.created_at;
  t.same(await q(`?status=pending,completed&created_after=${encodeURIComponent(mid)}`), [ids[2]]);
  t.same(await q(`?status=pending,completed&created_before=${encodeURIComponent(mid)}`), [ids[0]]);
  for (const bad of ['?status=done', '?direction=sideways', '?created_after=yesterday', '?caller_number=abc']) {
    const r = await list(bad, team.auth);
    t.equal(r.status, 422, bad);
  }
  const row = (await list(`?agent_id=${a}`, team.auth)).body.sessions[0];
  for (const k of ['session_id', 'agent_id', 'agent_name', 'name', 'status', 'source', 'direction', 'dial_status', 'answered_by', 'caller_number', 'dialed_number', 'timezone', 'created_at', 'started_at', 'ended_at', 'duration_seconds', 'metadata'])
    t.ok(k in row, k);
  t.notOk('items' in row, 'rows are thin');
});

t.test('list: pagination rules (cursor, page with total, page+cursor 400, bad cursor 400, page_size range 422)', async (t) => {
  const team = await app.newTeam();
  const agent = await makeAgent(app, { auth: team.auth });
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await create({ agent_id: agent }, team.auth)).body.session_id);
  ids.reverse();
  const first = await list('?status=pending&page_size=2', team.auth);
  t.same(first.body.sessions.map((s: { session_id: string }) => s.session_id), ids.slice(0, 2));
  t.equal(first.body.has_more, true);
  t.equal(first.body.total, null);
  const second = await list(`?status=pending&page_size=2&cursor=${first.body.next_cursor}`, team.auth);
  t.same(second.body.sessions.map((s: { session_id: string }) => s.session_id), ids.slice(2, 4));
  const third = await list(`?status=pending&page_size=2&cursor=${second.body.next_cursor}`, team.auth);
  t.same(third.body.sessions.map((s: { session_id: string }) => s.session_id), ids.slice(4));
  t.equal(third.body.has_more, false);
  t.equal(third.body.next_cursor, null);
  const page = await list('?status=pending&page_size=2&page=2', team.auth);
  t.same(page.body.sessions.map((s: { session_id: string }) => s.session_id), ids.slice(2, 4));
  t.equal(page.body.total, 5);
  t.equal((await list('?status=pending&include_total=true', team.auth)).body.total, 5);
  const both = await list(`?page=1&cursor=${first.body.next_cursor}`, team.auth);
  t.equal(both.status, 400);
  t.equal(both.body.message, 'page and cursor are mutually exclusive');
  t.equal((await list('?cursor=!!!', team.auth)).body.message, 'Invalid cursor');
  t.equal((await list('?page=3335&page_size=30', team.auth)).status, 400, 'offset past 100,000 rows');
  t.equal((await list('?page_size=101', team.auth)).status, 422);
  t.equal((await list('?page_size=0', team.auth)).status, 422);
});

t.test('API-key creations are never rate limited', async (t) => {
  const agent = await makeAgent(app);
  const statuses = new Set<number>();
  for (let i = 0; i < 15; i++) statuses.add((await create({ agent_id: agent })).status);
  t.same([...statuses], [200], 'more than the per-IP limit (10) from one IP');
});

t.test('503: Session capacity reached on this node', async (t) => {
  const { SessionService } = await import('../../src/sessions/service.ts');
  const full = new SessionService({ sql: app.db.sql, state: app.state, box: app.box, pricePerMinuteMicros: PRICE, publicRatePerAgent: 60, publicRatePerIp: 10, hasCapacity: () => false });
  const agent = await makeAgent(app);
  const before = await credit(app, app.teamId);
  const principal = { teamId: app.teamId, keyId: 'k', betaAccess: true };
  await t.rejects(full.create({ principal, body: { agent_id: agent }, ip: '127.0.0.1' }), { code: 'unavailable', message: 'Session capacity reached on this node' });
  t.equal(await credit(app, app.teamId), before, 'nothing charged');
});

t.test('livekit transport: livekit_url and the minted token when LiveKit is configured', async (t) => {
  const { SessionService } = await import('../../src/sessions/service.ts');
  const svc = new SessionService({
    sql: app.db.sql, state: app.state, box: app.box, pricePerMinuteMicros: PRICE, publicRatePerAgent: 60, publicRatePerIp: 10, hasCapacity: () => true,
    livekitUrl: 'wss://lk.example.test',
    mintTransportToken: async (s) => ({ token: `participant-for-${s.id}`, url: 'wss://lk.example.test' }),
  });
  const agent = await makeAgent(app);
  const out = await svc.create({ principal: { teamId: app.teamId, keyId: 'k', betaAccess: true }, body: { agent_id: agent }, ip: '127.0.0.1' });
  t.equal(out.transport, 'livekit');
  t.equal(out.livekit_url, 'wss://lk.example.test');
  t.equal(out.token, `participant-for-${out.session_id}`);
  t.notOk('websocket_url' in out);
  t.equal((await detail(out.session_id)).body.transport, 'livekit');
});
