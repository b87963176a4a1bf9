// createPublicSession / startPublic against a real platform, from Node: every refusal of the
// session API becomes a `session_refused` ClientError with the platform's status and message
// (the browser test covers the origin rules with a real browser's Origin header; here a
// `fetch` option adds it, as only a browser may).
import t from 'tap';
import { ClientError, createPublicSession, startPublic } from '../../src/client/index.ts';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { startTestServer } from '../helpers/server.ts';

const ORIGIN = 'https://shop.example.com';
const app = await startTestServer({ backend: 'synthetic', config: { publicRatePerAgent: 2 } });
t.teardown(() => app.close());

/** `fetch` as a page on ORIGIN sends it. */
const fromPage: typeof fetch = (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), Origin: ORIGIN } });
const refusal = (p: Promise<unknown>) => p.then(() => null, (e) => (e instanceof ClientError ? { code: e.code, status: e.status, message: e.message, retryAfterMs: e.retryAfterMs } : e));

t.test('a public session from an allowed origin: the response start() takes, and the visitor zone', async (t) => {
  const agentId = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } }, public_enabled: true, allowed_origins: [ORIGIN], overrides_allowed: ['language'] });
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const session = await createPublicSession({ baseUrl: `${app.url}/`, agentId, overrides: { language: 'fr' }, endUserId: 'visitor-7', fetch: fromPage });
  t.equal(session.transport, 'websocket');
  t.match(session, { session_id: String, token: String, websocket_url: String });
  const rec = await app.req('GET', `/v1/agent/sessions/${session.session_id}`);
  t.equal(rec.body.client_timezone, zone, `client_timezone is this process's zone (${zone})`);
  t.equal(rec.body.end_user_id, 'visitor-7');
  t.same(rec.body.overrides, { language: 'fr' });
  const convo = await startPublic({ baseUrl: app.url, agentId, fetch: fromPage });
  t.match(convo.sessionId, /^sess_/);
  t.equal((await convo.hangup()).reason, 'user_hangup');
});

t.test('refusals carry the status and the platform message', async (t) => {
  const open = await makeAgent(app, { public_enabled: true, allowed_origins: [ORIGIN] });
  const unpublished = await makeAgent(app, { public_enabled: true, allowed_origins: [ORIGIN], publish: false });
  t.same(await refusal(createPublicSession({ baseUrl: app.url, agentId: open })), { code: 'session_refused', status: 403, message: 'Session refused (403): Origin header is required for public agents', retryAfterMs: undefined }, 'Node sends no Origin of its own');
  t.same(await refusal(createPublicSession({ baseUrl: app.url, agentId: unpublished, fetch: fromPage })), { code: 'session_refused', status: 409, message: 'Session refused (409): Agent has no published version', retryAfterMs: undefined });
  t.same(await refusal(createPublicSession({ baseUrl: app.url, agentId: open, overrides: { voice_id: 'v1' }, fetch: fromPage })), { code: 'session_refused', status: 400, message: 'Session refused (400): Override not allowed: voice_id', retryAfterMs: undefined });
  const invalid = await refusal(createPublicSession({ baseUrl: app.url, agentId: open, dynamicVariables: { 'bad name': 1 }, fetch: fromPage }));
  t.match(invalid, { code: 'session_refused', status: 422, message: /^Session refused \(422\): body\.dynamic_variables/ }, 'a 422 names the field');
  t.same(await refusal(createPublicSession({ baseUrl: app.url, agentId: 'agent_missing', fetch: fromPage })), { code: 'session_refused', status: 404, message: 'Session refused (404): Agent not found', retryAfterMs: undefined });
});

t.test('429 carries retryAfterMs from Retry-After', async (t) => {
  const agentId = await makeAgent(app, { public_enabled: true, allowed_origins: [ORIGIN] });
  let last: unknown = null;
  for (let i = 0; i < 3 && last === null; i++) last = await refusal(createPublicSession({ baseUrl: app.url, agentId, fetch: fromPage }));
  t.match(last, { code: 'session_refused', status: 429, message: 'Session refused (429): Too many requests' });
  const ms = (last as { retryAfterMs: number }).retryAfterMs;
  t.ok(ms >= 1000 && ms <= 60_000 && ms % 1000 === 0, `retryAfterMs ${ms}`);
});

t.test('a platform that cannot be reached: connection_failed', async (t) => {
  const err = await refusal(createPublicSession({ baseUrl: 'http://127.0.0.1:9', agentId: 'agent_x' }));
  t.match(err, { code: 'connection_failed', message: /^Could not reach http:\/\/127\.0\.0\.1:9\/v1\/agent\/sessions/ });
});
