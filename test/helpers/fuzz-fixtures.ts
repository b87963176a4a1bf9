import type { TestServer } from './server.ts';

/**
 * Objects for the fuzzer to aim at: one of each kind owned by the server's team, and one
 * agent of another team, so path parameters hit real rows (and a foreign one).
 */
export async function fuzzFixtures(app: TestServer): Promise<{ doc: { paths: Record<string, Record<string, any>> }; ids: string[] }> {
  const doc = (await app.req('GET', '/openapi.json')).body;
  const ids: string[] = [];
  const agent = await app.req('POST', '/v1/agent/agents', { name: 'fuzz target' });
  ids.push(agent.body.agent_id);
  await app.req('POST', `/v1/agent/agents/${agent.body.agent_id}/publish`);
  const tool = await app.req('POST', '/v1/agent/tools', { name: 'fuzz_tool', tool_type: 'client' });
  ids.push(tool.body.tool_id ?? tool.body.id);
  const test = await app.req('POST', '/v1/agent/tests', { agent_id: agent.body.agent_id, name: 'fuzz test', user_turns: ['hi'] });
  ids.push(test.body.test_id ?? test.body.id);
  const session = await app.req('POST', '/v1/agent/sessions', { agent_id: agent.body.agent_id });
  ids.push(session.body.session_id ?? session.body.id);
  const other = await app.newTeam();
  const foreign = await app.req('POST', '/v1/agent/agents', { name: 'foreign' }, other.auth);
  ids.push(foreign.body.agent_id, app.teamId, 'default', '1', '0', 'gpt-realtime', 'tts-1');
  return { doc, ids: ids.filter((x): x is string => typeof x === 'string') };
}
