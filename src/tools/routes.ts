import type { HttpApp } from '../http/app.ts';
import { pageBody, pageSchema } from '../http/pagination.ts';
import { parse } from '../validation.ts';
import { ToolService, toSummary, toToolEntity, toolAgentsBody, toolCreateBody, toolEntity, toolListQuery, toolPatchBody, toolSummary } from './service.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';

const notFoundDoc = { description: 'Missing or another team\'s tool', schema: errorBody };

/** /v1/agent/tools: workspace tools (docs/api/tools.md). */
export function mountToolRoutes(http: HttpApp, tools: ToolService): void {
  const tags = ['Tools'];
  http.route({
    method: 'POST', path: '/v1/agent/tools', auth: 'required', body: 'json', input: { body: toolCreateBody },
    doc: { summary: 'Create a workspace tool', tags, responses: { 201: { description: 'The new tool (credential header values are never echoed)', schema: toolEntity }, 403: { description: 'No beta access', schema: errorBody } } },
    handler: async (ctx) => ({ status: 201, body: await tools.create(who(ctx), ctx.input.body) }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/tools', auth: 'required', input: { query: toolListQuery, page: 'created' },
    doc: { summary: 'List workspace tools (newest first)', tags, responses: { 200: { description: 'A page of tools', schema: pageSchema('tools', toolSummary) }, 404: { description: '`agent_id` is not an agent of the team', schema: errorBody } } },
    handler: async (ctx) => {
      const f = ctx.input.query;
      const req = ctx.input.page;
      const page = await tools.list(who(ctx), { search: f.search, agentId: f.agent_id }, req);
      return { status: 200, body: pageBody('tools', page, toSummary) };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/tools/{tool_id}', auth: 'required',
    doc: { summary: 'Read a tool', tags, responses: { 200: { description: 'The tool', schema: toolEntity }, 404: notFoundDoc } },
    handler: async (ctx) => ({ status: 200, body: toToolEntity(await tools.get(who(ctx), ctx.params.tool_id!)) }),
  });
  http.route({
    method: 'PATCH', path: '/v1/agent/tools/{tool_id}', auth: 'required', body: 'json',
    doc: { summary: 'Update a tool (headers are replaced whole)', tags, body: toolPatchBody, responses: { 200: { description: 'The tool', schema: toolEntity }, 404: notFoundDoc } },
    handler: async (ctx) => {
      const id = ctx.params.tool_id!;
      await tools.get(who(ctx), id); // a missing tool is 404 before the body is judged
      return { status: 200, body: await tools.update(who(ctx), id, parse(toolPatchBody, ctx.body)) };
    },
  });
  http.route({
    method: 'DELETE', path: '/v1/agent/tools/{tool_id}', auth: 'required',
    doc: { summary: 'Delete a tool', tags, responses: { 204: { description: 'Deleted' }, 404: notFoundDoc, 409: { description: 'An agent draft references the tool', schema: errorBody } } },
    handler: async (ctx) => {
      await tools.delete(who(ctx), ctx.params.tool_id!);
      return { status: 204 };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/tools/{tool_id}/agents', auth: 'required',
    doc: { summary: 'Agents whose draft uses the tool', tags, responses: { 200: { description: 'Agents', schema: toolAgentsBody }, 404: notFoundDoc } },
    handler: async (ctx) => ({ status: 200, body: await tools.agents(who(ctx), ctx.params.tool_id!) }),
  });
}
