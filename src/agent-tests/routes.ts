import type { HttpApp } from '../http/app.ts';
import { errorBody } from '../http/openapi.ts';
import { pageBody, pageSchema } from '../http/pagination.ts';
import { who } from '../http/router.ts';
import {
  agentTest, agentTestCreateBody, agentTestListQuery, agentTestPatchBody, agentTestRun, agentTestRunBody, agentTestRunResult, toRun,
  type AgentTestService,
} from './service.ts';

/** /v1/agent/tests CRUD, their runs, and POST /v1/agent/agents/{agent_id}/tests/run (D-TEST-1). */
export function mountAgentTestRoutes(http: HttpApp, tests: AgentTestService): void {
  const tags = ['Agent tests'];
  const missing = { description: 'Missing or another team\'s', schema: errorBody };
  http.route({
    method: 'POST', path: '/v1/agent/tests', auth: 'required', body: 'json', input: { body: agentTestCreateBody },
    doc: { summary: 'Create a test: a scripted user conversation for one agent and the criteria that judge it', tags, responses: { 201: { description: 'The test', schema: agentTest } } },
    handler: async (ctx) => ({ status: 201, body: await tests.create(who(ctx), ctx.input.body) }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/tests', auth: 'required', input: { query: agentTestListQuery, page: 'created' },
    doc: { summary: 'List tests (newest first), each with its last run', tags, responses: { 200: { description: 'A page of tests', schema: pageSchema('tests', agentTest) } } },
    handler: async (ctx) => {
      const q = ctx.input.query;
      const req = ctx.input.page;
      const page = await tests.list(who(ctx), q, req);
      return { status: 200, body: pageBody('tests', page, (t) => t) };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/tests/{test_id}', auth: 'required',
    doc: { summary: 'Read a test and its last run', tags, responses: { 200: { description: 'The test', schema: agentTest }, 404: missing } },
    handler: async (ctx) => ({ status: 200, body: await tests.get(who(ctx), ctx.params.test_id!) }),
  });
  http.route({
    method: 'PATCH', path: '/v1/agent/tests/{test_id}', auth: 'required', body: 'json', input: { body: agentTestPatchBody },
    doc: { summary: 'Update a test (lists replaced whole; criteria null: the agent\'s)', tags, responses: { 200: { description: 'The test', schema: agentTest }, 404: missing } },
    handler: async (ctx) => ({ status: 200, body: await tests.update(who(ctx), ctx.params.test_id!, ctx.input.body) }),
  });
  http.route({
    method: 'DELETE', path: '/v1/agent/tests/{test_id}', auth: 'required',
    doc: { summary: 'Delete a test and its runs', tags, responses: { 204: { description: 'Deleted' }, 404: missing } },
    handler: async (ctx) => {
      await tests.delete(who(ctx), ctx.params.test_id!);
      return { status: 204 };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/tests/{test_id}/runs', auth: 'required', input: { page: 'created' },
    doc: { summary: 'The runs of a test, newest first', tags, responses: { 200: { description: 'A page of runs', schema: pageSchema('runs', agentTestRun) }, 404: missing } },
    handler: async (ctx) => {
      return { status: 200, body: pageBody('runs', await tests.runs(who(ctx), ctx.params.test_id!, ctx.input.page), toRun) };
    },
  });
  http.route({
    method: 'POST', path: '/v1/agent/agents/{agent_id}/tests/run', auth: 'required', body: 'json', bodyOptional: true, input: { body: agentTestRunBody },
    doc: {
      summary: 'Run tests of an agent as text against its draft (or a published version); each run is stored with its verdict',
      tags,
      responses: {
        200: { description: 'One run per test, in test order', schema: agentTestRunResult },
        400: { description: 'Agent tests cannot run against a custom LLM', schema: errorBody },
        404: { description: 'Unknown agent or version', schema: errorBody },
      },
    },
    handler: async (ctx) => ({ status: 200, body: await tests.run(who(ctx), ctx.params.agent_id!, ctx.input.body, ctx.signal) }),
  });
}
