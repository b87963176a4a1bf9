import type { HttpApp } from '../http/app.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';
import { PreviewService, previewCreateBody, previewStatus } from './service.ts';
import { sessionCreated } from '../sessions/service.ts';

/** /v1/agent/agents/{agent_id}/preview: builder preview calls of the draft (beta). */
export function mountPreviewRoutes(http: HttpApp, previews: PreviewService): void {
  const tags = ['Preview calls'];
  http.route({
    method: 'POST', path: '/v1/agent/agents/{agent_id}/preview', auth: 'required', beta: true, body: 'json', bodyOptional: true, input: { body: previewCreateBody },
    doc: {
      summary: 'Start a preview call of the draft as it is now (at most 600 s or the configured duration; never listed, no webhooks, no stored transcript; billed like a session)',
      tags,
      responses: {
        200: { description: 'Connection details and the single-use token, as for POST /v1/agent/sessions', schema: sessionCreated },
        402: { description: 'Out of API credit (nothing charged)', schema: errorBody },
        403: { description: 'No beta access', schema: errorBody },
        404: { description: 'Unknown agent, or another team\'s', schema: errorBody },
        409: { description: 'Agent is archived', schema: errorBody },
        502: { description: 'Agent gateway is unreachable (LiveKit; nothing charged, retry is safe)', schema: errorBody },
        503: { description: 'Session capacity reached on this node', schema: errorBody },
      },
    },
    handler: async (ctx) => ({
      status: 200,
      body: await previews.create(who(ctx), ctx.params.agent_id!, ctx.input.body, { host: ctx.headers.host, forwardedProto: ctx.headers['x-forwarded-proto'] }),
    }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/agents/{agent_id}/preview/{session_id}', auth: 'required',
    doc: {
      summary: 'Read a preview call: status and its analysis (the only place a preview\'s analysis is shown)',
      tags,
      responses: { 200: { description: 'The preview', schema: previewStatus }, 404: { description: 'Not a preview of this agent', schema: errorBody } },
    },
    handler: async (ctx) => ({ status: 200, body: await previews.get(who(ctx), ctx.params.agent_id!, ctx.params.session_id!) }),
  });
  http.route({
    method: 'POST', path: '/v1/agent/agents/{agent_id}/preview/{session_id}/end', auth: 'required',
    doc: {
      summary: 'End a preview call (204 also when already ended)',
      tags,
      responses: { 204: { description: 'Ended (or already ended)' }, 404: { description: 'Not a preview of this agent', schema: errorBody } },
    },
    handler: async (ctx) => {
      await previews.end(who(ctx), ctx.params.agent_id!, ctx.params.session_id!);
      return { status: 204 };
    },
  });
}
