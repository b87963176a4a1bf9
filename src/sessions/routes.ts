import type { HttpApp } from '../http/app.ts';
import { pageBody, pageSchema } from '../http/pagination.ts';
import { SessionService, sessionCreateBody, sessionCreated, sessionDetail, sessionListQuery, sessionListRow, toListRow } from './service.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';

/** /v1/agent/sessions: create (API key or keyless for public agents), end, list, read. */
export function mountSessionRoutes(http: HttpApp, sessions: SessionService): void {
  const tags = ['Sessions'];
  http.route({
    method: 'POST', path: '/v1/agent/sessions', auth: 'optional', body: 'json', input: { body: sessionCreateBody },
    doc: {
      summary: 'Create a session (no Authorization header: a public-agent request, gated by Origin and rate limits)',
      tags,
      responses: {
        200: { description: 'Connection details and the single-use token', schema: sessionCreated },
        400: { description: 'Override not allowed (for the agent, or on keyless requests); name on a keyless request', schema: errorBody },
        402: { description: 'Out of API credit (API-key callers; nothing charged)', schema: errorBody },
        403: { description: 'Agent is not public; Origin header is required for public agents; Origin not allowed; Agent is unavailable', schema: errorBody },
        404: { description: 'Unknown agent, or another team\'s', schema: errorBody },
        409: { description: 'Agent has no published version; Agent is archived', schema: errorBody },
        429: { description: 'Too many requests (public agents: per-agent or per-IP window); Retry-After in seconds', schema: errorBody },
        503: { description: 'Session capacity reached on this node, or a dependency is unavailable', schema: errorBody },
      },
    },
    handler: async (ctx) => ({
      status: 200,
      body: await sessions.create({ principal: ctx.principal, body: ctx.input.body, origin: ctx.headers.origin, ip: ctx.ip, host: ctx.headers.host, forwardedProto: ctx.headers['x-forwarded-proto'] }),
    }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/sessions', auth: 'required', input: { query: sessionListQuery, page: 'created' },
    doc: {
      summary: 'List sessions (newest first; pending ones only when asked for by status)',
      tags,
      responses: { 200: { description: 'A page of sessions', schema: pageSchema('sessions', sessionListRow) } },
    },
    handler: async (ctx) => {
      const page = await sessions.list(who(ctx), ctx.input.query, ctx.input.page);
      return { status: 200, body: pageBody('sessions', page, toListRow) };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/sessions/{session_id}', auth: 'required',
    doc: {
      summary: 'Read a session: status, timings, overrides in effect, metadata, transcript and tool-call history, ended reason, metrics',
      tags,
      responses: { 200: { description: 'The session record', schema: sessionDetail }, 404: { description: 'Missing or another team\'s', schema: errorBody } },
    },
    handler: async (ctx) => ({ status: 200, body: await sessions.get(who(ctx), ctx.params.session_id!) }),
  });
  http.route({
    method: 'POST', path: '/v1/agent/sessions/{session_id}/end', auth: 'required',
    doc: {
      summary: 'Force-end a session on whichever node holds it (204 also when already ended)',
      tags,
      responses: { 204: { description: 'Ended (or already ended)' }, 404: { description: 'Missing or another team\'s', schema: errorBody } },
    },
    handler: async (ctx) => {
      await sessions.end(who(ctx), ctx.params.session_id!);
      return { status: 204 };
    },
  });
}
