import type { HttpApp } from '../http/app.ts';
import { pageBody, pageSchema } from '../http/pagination.ts';
import { AgentService, agentCreateBody, agentEntity, agentListQuery, agentPatchBody, toEntity } from './service.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';


/** /v1/agent/agents: create, list, read, update, delete. */
export function mountAgentRoutes(http: HttpApp, agents: AgentService): void {
  const tags = ['Agents'];
  http.route({
    method: 'POST', path: '/v1/agent/agents', auth: 'required', body: 'json', input: { body: agentCreateBody },
    doc: { summary: 'Create an agent', tags, responses: { 201: { description: 'The new agent (draft)', schema: agentEntity }, 403: { description: 'No beta access', schema: errorBody } } },
    handler: async (ctx) => ({ status: 201, body: await agents.create(who(ctx), ctx.input.body) }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/agents', auth: 'required', input: { query: agentListQuery, page: 'created' },
    doc: { summary: 'List agents (newest first)', tags, responses: { 200: { description: 'A page of agents', schema: pageSchema('agents', agentEntity) } } },
    handler: async (ctx) => {
      const f = ctx.input.query;
      const page = await agents.list(who(ctx), { search: f.search, includeArchived: f.include_archived, publicationState: f.publication_state }, ctx.input.page);
      return { status: 200, body: pageBody('agents', page, toEntity) };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/agents/{agent_id}', auth: 'required',
    doc: { summary: 'Read an agent', tags, responses: { 200: { description: 'The agent', schema: agentEntity }, 404: { description: 'Missing or another team\'s', schema: errorBody } } },
    handler: async (ctx) => ({ status: 200, body: await agents.read(who(ctx), ctx.params.agent_id!) }),
  });
  http.route({
    method: 'PATCH', path: '/v1/agent/agents/{agent_id}', auth: 'required', body: 'json', input: { body: agentPatchBody },
    doc: { summary: 'Update an agent profile', tags, responses: { 200: { description: 'The agent', schema: agentEntity } } },
    handler: async (ctx) => ({ status: 200, body: await agents.update(who(ctx), ctx.params.agent_id!, ctx.input.body) }),
  });
  http.route({
    method: 'DELETE', path: '/v1/agent/agents/{agent_id}', auth: 'required',
    doc: { summary: 'Delete an agent with its draft and versions', tags, responses: { 204: { description: 'Deleted' } } },
    handler: async (ctx) => {
      await agents.delete(who(ctx), ctx.params.agent_id!);
      return { status: 204 };
    },
  });
}
