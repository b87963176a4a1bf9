/**
 * Other teams kept out (docs/reliability.md): for every route of the route table that
 * takes an id, a second team's key gets 404 (or the status listed here) for the first
 * team's objects, on reads, writes and deletes, and the objects are intact afterwards.
 * A new id-taking route fails this test until it is listed in COVERAGE.
 */
import t from 'tap';
import WebSocket from 'ws';
import { lyingWav } from '../helpers/fuzz.ts';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());
const other = await app.newTeam();

// The first team's objects.
const agentId: string = (await app.req('POST', '/v1/agent/agents', { name: 'mine' })).body.agent_id;
await app.req('POST', `/v1/agent/agents/${agentId}/publish`);
const toolId: string = (await app.req('POST', '/v1/agent/tools', { name: 'my_tool', tool_type: 'client' })).body.tool_id;
const testId: string = (await app.req('POST', '/v1/agent/tests', { agent_id: agentId, name: 'mine', user_turns: ['hi'] })).body.test_id;
const session = (await app.req('POST', '/v1/agent/sessions', { agent_id: agentId })).body;
const sessionId: string = session.session_id;
const ks = new FormData();
ks.append('source', new Blob(['Opening hours are nine to five.'], { type: 'text/plain' }), 'hours.txt');
const ksRes = await fetch(`${app.url}/v1/agent/knowledge-sources`, { method: 'POST', headers: app.auth, body: ks });
const knowledgeId: string = (await ksRes.json()).knowledge_source_id;
const voice = (await app.req('POST', '/model', { type: 'tts', title: 'Mine', train_mode: 'fast', voices: [Buffer.from(lyingWav(48_000, 48_000)).toString('base64')], texts: ['mine'] })).body;
const voiceId: string = voice?._id ?? voice?.id;
const phone = (await app.req('POST', '/v1/agent/phone-numbers', { provider: 'sandbox', phone_number: '+12065550141' })).body;
if (!phone?.phone_number_id) throw new Error(`phone number fixture: ${JSON.stringify(phone)}`);
const phoneId: string = phone?.phone_number_id;
const preview = (await app.req('POST', `/v1/agent/agents/${agentId}/preview`, {})).body;
const previewId: string = preview?.session_id ?? 'none';

const values: Record<string, string> = {
  agent_id: agentId,
  tool_id: toolId,
  test_id: testId,
  session_id: sessionId,
  knowledge_source_id: knowledgeId,
  id: voiceId,
  voice_id: voiceId,
  phone_number_id: phoneId,
  version_number: '1',
  delivery_id: 'whd_0',
  role: 'user',
  index: '0',
  user_id: app.teamId,
};

/**
 * Every id-taking route: the status a second team's key gets for the first team's object
 * (404 unless listed), or `exempt` with the reason the path parameter is not an object of a team.
 */
const COVERAGE: Record<string, number | { exempt: string } | { status: number; param?: Record<string, string> }> = {
  'GET /v1/agent/agents/{agent_id}': 404,
  'PATCH /v1/agent/agents/{agent_id}': 404,
  'DELETE /v1/agent/agents/{agent_id}': 404,
  'GET /v1/agent/agents/{agent_id}/config': 404,
  'PATCH /v1/agent/agents/{agent_id}/config': 404,
  'POST /v1/agent/agents/{agent_id}/publish': 404,
  'GET /v1/agent/agents/{agent_id}/versions': 404,
  'GET /v1/agent/agents/{agent_id}/versions/{version_number}': 404,
  // A public-agent route: every caller (owner or not) gets 403 while the agent is not public.
  'GET /v1/agent/agents/{agent_id}/widget': 403,
  'POST /v1/agent/agents/{agent_id}/preview': 404,
  'GET /v1/agent/agents/{agent_id}/preview/{session_id}': 404,
  'POST /v1/agent/agents/{agent_id}/preview/{session_id}/end': 404,
  'POST /v1/agent/agents/{agent_id}/tests/run': 404,
  'GET /v1/agent/tools/{tool_id}': 404,
  'PATCH /v1/agent/tools/{tool_id}': 404,
  'DELETE /v1/agent/tools/{tool_id}': 404,
  'GET /v1/agent/tools/{tool_id}/agents': 404,
  'POST /v1/agent/tools/{tool_id}/test': 404,
  'GET /v1/agent/knowledge-sources/{knowledge_source_id}': 404,
  'PATCH /v1/agent/knowledge-sources/{knowledge_source_id}': 404,
  'DELETE /v1/agent/knowledge-sources/{knowledge_source_id}': 404,
  'GET /v1/agent/knowledge-sources/{knowledge_source_id}/agents': 404,
  'GET /v1/agent/tests/{test_id}': 404,
  'PATCH /v1/agent/tests/{test_id}': 404,
  'DELETE /v1/agent/tests/{test_id}': 404,
  'GET /v1/agent/tests/{test_id}/runs': 404,
  'GET /v1/agent/sessions/{session_id}': 404,
  'POST /v1/agent/sessions/{session_id}/end': 404,
  'GET /v1/agent/sessions/{session_id}/recording': 404,
  'GET /v1/agent/sessions/{session_id}/recording/tracks/{role}': 404,
  'GET /v1/agent/sessions/{session_id}/webhook-deliveries': 404,
  'POST /v1/agent/sessions/{session_id}/webhook-deliveries/{delivery_id}/redeliver': 404,
  'GET /v1/agent/phone-numbers/{phone_number_id}': 404,
  'PATCH /v1/agent/phone-numbers/{phone_number_id}': 404,
  'DELETE /v1/agent/phone-numbers/{phone_number_id}': 404,
  'GET /model/{id}': 404,
  'PATCH /model/{id}': 404,
  'DELETE /model/{id}': 404,
  'GET /model/{id}/samples/{index}': 404,
  'GET /model/{id}/cover': 404,
  'GET /wallet/{user_id}/api-credit': 404,
  'GET /wallet/{user_id}/package': 404,
  'GET /compat/elevenlabs/v1/voices/{voice_id}': 404,
  'POST /compat/elevenlabs/v1/text-to-speech/{voice_id}': 400, // `Reference not found`, as for a voice that does not exist
  'POST /compat/elevenlabs/v1/text-to-speech/{voice_id}/stream': 400, // `Reference not found`, as for a voice that does not exist
  'POST /compat/elevenlabs/v1/text-to-speech/{voice_id}/with-timestamps': 400, // `Reference not found`, as for a voice that does not exist
  'POST /compat/elevenlabs/v1/text-to-speech/{voice_id}/stream/with-timestamps': 400, // `Reference not found`, as for a voice that does not exist
  'POST /compat/elevenlabs/v1/single-use-token/{token_type}': { exempt: 'a token kind, not an object' },
  'GET /assets/{file}': { exempt: 'static console files' },
  'GET /sdk/{file}': { exempt: 'static SDK files' },
};
for (const base of ['/compat/v1', '/compat/api/v1', '/compat/openai/v1']) {
  for (const p of ['/models/{id}', '/models/{id}/{slug}', '/models/{id}/{slug}/endpoints']) COVERAGE[`GET ${base}${p}`] = { exempt: 'the public model catalog, the same for every team' };
}

/** A body a write route accepts from its owner, so a refusal is about ownership, not shape. */
const BODIES: Record<string, unknown> = {
  'PATCH /v1/agent/agents/{agent_id}': { name: 'stolen' },
  'PATCH /v1/agent/agents/{agent_id}/config': {},
  'PATCH /v1/agent/tools/{tool_id}': { name: 'stolen' },
  'POST /v1/agent/tools/{tool_id}/test': { arguments: {} },
  'PATCH /v1/agent/tests/{test_id}': { name: 'stolen' },
  'PATCH /v1/agent/phone-numbers/{phone_number_id}': { label: 'stolen' },
  'PATCH /model/{id}': { title: 'stolen' },
  'POST /v1/agent/agents/{agent_id}/preview': {},
  'POST /v1/agent/agents/{agent_id}/tests/run': {},
  'POST /compat/elevenlabs/v1/text-to-speech/{voice_id}': { text: 'hi' },
  'POST /compat/elevenlabs/v1/text-to-speech/{voice_id}/stream': { text: 'hi' },
  'POST /compat/elevenlabs/v1/text-to-speech/{voice_id}/with-timestamps': { text: 'hi' },
  'POST /compat/elevenlabs/v1/text-to-speech/{voice_id}/stream/with-timestamps': { text: 'hi' },
};

t.test('the fixtures exist', async (t) => {
  for (const [k, v] of Object.entries(values)) t.ok(v && v !== 'undefined', k);
});

const idRoutes = app.http.router.specs.filter((s) => s.path.includes('{'));

t.test('every id-taking route of the route table is covered', async (t) => {
  for (const s of idRoutes) t.ok(`${s.method} ${s.path}` in COVERAGE, `${s.method} ${s.path} is in COVERAGE`);
});

t.test("a second team's key gets 404 for the first team's objects", async (t) => {
  for (const s of idRoutes) {
    const key = `${s.method} ${s.path}`;
    const want = COVERAGE[key];
    if (want === undefined || typeof want === 'object') continue;
    const path = s.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? 'x'));
    const headers: Record<string, string> = path.startsWith('/compat/elevenlabs') ? { 'xi-api-key': other.key } : { ...other.auth };
    const body = s.method === 'GET' || s.method === 'DELETE' ? undefined : JSON.stringify(BODIES[key] ?? {});
    if (body) headers['Content-Type'] = s.body === 'multipart' ? 'multipart/form-data; boundary=B' : 'application/json';
    const res = await fetch(app.url + path, { method: s.method, headers, body: s.body === 'multipart' && body ? '--B\r\nContent-Disposition: form-data; name="name"\r\n\r\nstolen\r\n--B--\r\n' : body });
    const text = await res.text();
    t.equal(res.status, want, `${key} → ${res.status} ${text.slice(0, 120)}`);
  }
});

t.test("the first team's objects are intact afterwards", async (t) => {
  for (const path of [`/v1/agent/agents/${agentId}`, `/v1/agent/tools/${toolId}`, `/v1/agent/tests/${testId}`, `/v1/agent/sessions/${sessionId}`, `/v1/agent/knowledge-sources/${knowledgeId}`, `/model/${voiceId}`, `/v1/agent/phone-numbers/${phoneId}`]) {
    const res = await app.req('GET', path);
    t.equal(res.status, 200, path);
    t.notMatch(res.text, /stolen/, path);
  }
});

t.test("a second team's WebSocket connects are refused for the first team's objects", async (t) => {
  const ws = app.url.replace(/^http/, 'ws');
  const attempt = (url: string, headers: Record<string, string>, send: unknown[] = []) =>
    new Promise<{ end: string; frames: string[] }>((resolve) => {
      const frames: string[] = [];
      const sock = new WebSocket(url, { headers });
      sock.on('error', () => {});
      sock.on('message', (d) => frames.push(d.toString()));
      sock.on('unexpected-response', (_q, res) => resolve({ end: `http ${res.statusCode}`, frames }));
      sock.on('close', (code) => resolve({ end: `close ${code}`, frames }));
      sock.on('open', () => {
        send.forEach((m) => sock.send(JSON.stringify(m)));
        setTimeout(() => sock.close(1000), 3000).unref(); // still open: we end it (the assertions say whether that was right)
      });
    });
  // Another team's voice is `Reference not found` (as an unknown one), and no audio is made.
  const r = await attempt(`${ws}/compat/elevenlabs/v1/text-to-speech/${voiceId}/stream-input`, { 'xi-api-key': other.key }, [{ text: ' ' }, { text: 'Hello there. ' }, { text: '' }]);
  t.match(r.frames, [/Reference not found/], `stream-input with another team's voice: ${r.end} ${r.frames}`);
  t.notOk(r.frames.some((f) => f.includes('"audio"')), 'no audio');
  const m = await attempt(`${ws}/compat/elevenlabs/v1/text-to-speech/${voiceId}/multi-stream-input`, { 'xi-api-key': other.key }, [{ text: ' ', context_id: 'a' }, { text: 'Hello there. ', context_id: 'a' }, { close_context: true, context_id: 'a' }, { close_socket: true }]);
  t.notOk(m.frames.some((f) => /"audio":"[A-Za-z0-9+/]/.test(f)), `multi-stream-input with another team's voice makes no audio: ${m.end} ${m.frames.join(' ').slice(0, 200)}`);
  // Not covered: the sandbox phone socket (`/v1/telephony/sandbox/calls`) takes phone numbers,
  // not team objects; sandbox phones are a simulated outside world shared by every team
  // (docs/reliability.md).
  // A session's socket takes the session's own token; another session's token does not open it.
  const theirs = await app.req('POST', '/v1/agent/sessions', { agent_id: (await app.req('POST', '/v1/agent/agents', { name: 'theirs' }, other.auth)).body.agent_id }, other.auth);
  t.not(theirs.status, 200, 'an unpublished agent of theirs has no session');
  // The token with its first character changed (a random token starts with 'x' one time in 64).
  const forged = (session.token[0] === 'x' ? 'y' : 'x') + session.token.slice(1);
  const wrong = await attempt(`${session.websocket_url}?token=${encodeURIComponent(forged)}`, {});
  t.match(wrong.end, /^close 44\d\d$|^http 4\d\d$/, `a forged session token: ${wrong.end}`);
});
