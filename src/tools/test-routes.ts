import type { HttpApp } from '../http/app.ts';
import { toolTestBody, toolTestResult, type ToolTestService } from './test-service.ts';
import { errorBody } from '../http/openapi.ts';


/** POST /v1/agent/tools/{tool_id}/test (docs/api/tools.md; D-TOOL-2). */
export function mountToolTestRoutes(http: HttpApp, tests: ToolTestService): void {
  http.route({
    method: 'POST', path: '/v1/agent/tools/{tool_id}/test', auth: 'required', body: 'json', input: { body: toolTestBody },
    doc: {
      summary: 'Call a webhook tool once with given arguments (or answer from a stored mock response)',
      tags: ['Tools'],
      responses: {
        200: { description: 'The endpoint\'s response: status, headers, the first 64 KB of the body', schema: toolTestResult },
        400: { description: 'A client tool, or a destination the SSRF guard refuses', schema: errorBody },
        404: { description: 'Missing or another team\'s tool', schema: errorBody },
        502: { description: 'The endpoint could not be reached', schema: errorBody },
        504: { description: 'No response within the tool\'s timeout_seconds', schema: errorBody },
      },
    },
    handler: async (ctx) => ({ status: 200, body: await tests.test(ctx.principal!, ctx.params.tool_id!, ctx.input.body, ctx.signal) }),
  });
}
