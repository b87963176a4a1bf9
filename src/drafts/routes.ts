import { configPatchSchema, configReadSchema } from '../agent-config/index.ts';
import type { HttpApp } from '../http/app.ts';
import { pageBody, pageSchema } from '../http/pagination.ts';
import { DraftService, publishBody, toSummary, versionNumber, versionSummary } from './service.ts';
import { who } from '../http/router.ts';


/** Draft config, publish, versions. */
export function mountDraftRoutes(http: HttpApp, drafts: DraftService): void {
  const tags = ['Agent configuration'];
  http.route({
    method: 'GET', path: '/v1/agent/agents/{agent_id}/config', auth: 'required',
    doc: { summary: "Read an agent's draft configuration", tags, responses: { 200: { description: 'The draft (every top-level field present)', schema: configReadSchema } } },
    handler: async (ctx) => ({ status: 200, body: await drafts.get(who(ctx), ctx.params.agent_id!) }),
  });
  http.route({
    method: 'PATCH', path: '/v1/agent/agents/{agent_id}/config', auth: 'required', body: 'json',
    doc: { summary: 'Update the draft (deep merge; lists replaced whole)', tags, body: configPatchSchema, responses: { 200: { description: 'The draft with its new config_hash', schema: configReadSchema } } },
    handler: async (ctx) => ({ status: 200, body: await drafts.patch(who(ctx), ctx.params.agent_id!, ctx.body) }),
  });
  http.route({
    method: 'POST', path: '/v1/agent/agents/{agent_id}/publish', auth: 'required', body: 'json', bodyOptional: true, input: { body: publishBody },
    doc: { summary: 'Publish the draft as the next immutable version', tags, responses: { 200: { description: 'The version (the existing one when nothing changed)', schema: versionSummary } } },
    handler: async (ctx) => ({ status: 200, body: await drafts.publish(who(ctx), ctx.params.agent_id!, ctx.input.body) }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/agents/{agent_id}/versions', auth: 'required', input: { page: 'number' },
    doc: { summary: 'List published versions (highest first)', tags, responses: { 200: { description: 'A page of versions', schema: pageSchema('versions', versionSummary) } } },
    handler: async (ctx) => {
      return { status: 200, body: pageBody('versions', await drafts.listVersions(who(ctx), ctx.params.agent_id!, ctx.input.page), toSummary) };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/agents/{agent_id}/versions/{version_number}', auth: 'required',
    doc: { summary: 'Read one version with its frozen config', tags, responses: { 200: { description: 'The version', schema: versionSummary.extend({ config: configReadSchema }) } } },
    handler: async (ctx) => ({ status: 200, body: await drafts.version(who(ctx), ctx.params.agent_id!, versionNumber(ctx.params.version_number!)) }),
  });
}
