// GET /v1/agent/agents/{agent_id}/widget: the widget's display config, no key, public agents
// only, behind the same Origin gate (and messages) as keyless session creation.
import t from 'tap';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { anon, makeAgent } from './sessions-helpers.ts';

const app: TestServer = await startTestServer();
t.teardown(() => app.close());

const SITE = 'https://shop.example.com';
const widget = async (agentId: string, headers: Record<string, string> = {}) => {
  const res = await fetch(`${app.url}/v1/agent/agents/${agentId}/widget`, { headers });
  return { status: res.status, body: await res.json(), headers: res.headers };
};

t.test('a public agent, from an allowed origin: its display fields, with no key', async (t) => {
  const id = await makeAgent(app, { config: { voice: { speaking_language: 'fr' } }, public_enabled: true, allowed_origins: [SITE], overrides_allowed: ['language', 'first_message'] });
  await app.req('PATCH', `/v1/agent/agents/${id}`, { name: 'Boutique helper' });
  const r = await widget(id, { Origin: SITE });
  t.equal(r.status, 200);
  t.same(r.body, { agent_name: 'Boutique helper', language: 'fr', available: true, overrides_allowed: ['language'] }, 'only the overrides a public session can carry');
  t.equal(r.headers.get('access-control-allow-origin'), '*');
  t.equal((await widget(id, { Origin: `${SITE}/` })).status, 200, 'the origin is normalised as for sessions');
});

t.test('the gate: the same 403s, in the same order, as keyless session creation', async (t) => {
  const publicAgent = await makeAgent(app, { public_enabled: true, allowed_origins: [SITE] });
  const privateAgent = await makeAgent(app, { public_enabled: false, allowed_origins: [SITE] });
  const cases: [string, Record<string, string>, number, string][] = [
    [privateAgent, { Origin: SITE }, 403, 'Agent is not public'],
    [publicAgent, {}, 403, 'Origin header is required for public agents'],
    [publicAgent, { Origin: 'https://evil.example.com' }, 403, 'Origin not allowed'],
    [publicAgent, { Origin: 'null' }, 403, 'Origin not allowed'],
    ['agent_nope', { Origin: SITE }, 404, 'Agent not found'],
  ];
  for (const [id, headers, status, message] of cases) {
    const w = await widget(id, headers);
    t.same({ status: w.status, body: w.body }, { status, body: { status, message } }, `widget: ${message}`);
    const s = await anon(app, { agent_id: id }, headers);
    t.same({ status: s.status, body: s.body }, { status, body: { status, message } }, `session creation says the same: ${message}`);
  }
});

t.test('unpublished or archived: shown as unavailable, not refused', async (t) => {
  const draftOnly = await makeAgent(app, { publish: false, public_enabled: true, allowed_origins: [SITE] });
  t.same((await widget(draftOnly, { Origin: SITE })).body, { agent_name: 'Session agent', language: null, available: false, overrides_allowed: [] });
  const archived = await makeAgent(app, { public_enabled: true, allowed_origins: [SITE] });
  await app.req('PATCH', `/v1/agent/agents/${archived}`, { status: 'archived' });
  const r = await widget(archived, { Origin: SITE });
  t.equal(r.status, 200);
  t.equal(r.body.available, false);
  t.equal(r.body.language, 'en');
});

t.test("another team's public agent is reachable: the gate is the agent's, not a key's", async (t) => {
  const other = await app.newTeam();
  const id = await makeAgent(app, { auth: other.auth, public_enabled: true, allowed_origins: [SITE] });
  t.equal((await widget(id, { Origin: SITE })).status, 200);
  const withKey = await widget(id, { Origin: SITE, ...app.auth });
  t.equal(withKey.status, 200, 'a key, if sent, changes nothing');
});
