import type { HttpApp } from '../http/app.ts';
import { pageBody, pageSchema } from '../http/pagination.ts';
import {
  KNOWLEDGE_BODY_LIMIT, KnowledgeService, knowledgeAgentsBody, knowledgeCreateForm, knowledgeEntity, knowledgeListQuery,
  knowledgePatchForm, knowledgeSummary, readKnowledgeForm, toKnowledgeEntity, toKnowledgeSummary,
} from './service.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';

const notFoundDoc = { description: 'Missing, deleted or another team\'s source', schema: errorBody };
const badUpload = { description: 'Not UTF-8 plain text, empty, or over 1 MB', schema: errorBody };

/** /v1/agent/knowledge-sources (docs/api/knowledge.md). */
export function mountKnowledgeRoutes(http: HttpApp, knowledge: KnowledgeService): void {
  const tags = ['Knowledge sources'];
  http.route({
    method: 'POST', path: '/v1/agent/knowledge-sources', auth: 'required', body: 'multipart', bodyLimit: KNOWLEDGE_BODY_LIMIT,
    doc: {
      summary: 'Upload a knowledge source (multipart/form-data, UTF-8 plain text)', tags, body: knowledgeCreateForm,
      responses: { 201: { description: 'The new source, indexed', schema: knowledgeEntity }, 400: badUpload, 403: { description: 'No beta access', schema: errorBody }, 413: { description: 'Request body over the route limit', schema: errorBody }, 415: { description: 'Not multipart/form-data (bare)' } },
    },
    handler: async (ctx) => ({ status: 201, body: await knowledge.create(who(ctx), readKnowledgeForm(ctx.form(), true)) }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/knowledge-sources', auth: 'required', input: { query: knowledgeListQuery, page: 'created' },
    doc: { summary: 'List knowledge sources (newest first)', tags, responses: { 200: { description: 'A page of sources (without content)', schema: pageSchema('knowledge_sources', knowledgeSummary) } } },
    handler: async (ctx) => {
      const page = await knowledge.list(who(ctx), { search: ctx.input.query.search }, ctx.input.page);
      return { status: 200, body: pageBody('knowledge_sources', page, toKnowledgeSummary) };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/knowledge-sources/{knowledge_source_id}', auth: 'required',
    doc: { summary: 'Read a knowledge source with its content', tags, responses: { 200: { description: 'The source', schema: knowledgeEntity }, 404: notFoundDoc } },
    handler: async (ctx) => ({ status: 200, body: toKnowledgeEntity(await knowledge.get(who(ctx), ctx.params.knowledge_source_id!)) }),
  });
  http.route({
    method: 'PATCH', path: '/v1/agent/knowledge-sources/{knowledge_source_id}', auth: 'required', body: 'multipart', bodyLimit: KNOWLEDGE_BODY_LIMIT,
    doc: {
      summary: 'Rename, describe, or replace the content (a new file adds a revision; the id stays)', tags, body: knowledgePatchForm,
      responses: { 200: { description: 'The source', schema: knowledgeEntity }, 400: badUpload, 404: notFoundDoc, 415: { description: 'Not multipart/form-data (bare)' } },
    },
    handler: async (ctx) => {
      const id = ctx.params.knowledge_source_id!;
      await knowledge.get(who(ctx), id); // a missing source is 404 before the body is judged
      return { status: 200, body: await knowledge.update(who(ctx), id, readKnowledgeForm(ctx.form(), false)) };
    },
  });
  http.route({
    method: 'DELETE', path: '/v1/agent/knowledge-sources/{knowledge_source_id}', auth: 'required',
    doc: { summary: 'Delete a knowledge source', tags, responses: { 204: { description: 'Deleted' }, 404: notFoundDoc, 409: { description: 'A draft or the latest published version references it', schema: errorBody } } },
    handler: async (ctx) => {
      await knowledge.delete(who(ctx), ctx.params.knowledge_source_id!);
      return { status: 204 };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/knowledge-sources/{knowledge_source_id}/agents', auth: 'required',
    doc: { summary: 'Agents whose draft or latest published version uses the source', tags, responses: { 200: { description: 'Agents', schema: knowledgeAgentsBody }, 404: notFoundDoc } },
    handler: async (ctx) => ({ status: 200, body: await knowledge.agents(who(ctx), ctx.params.knowledge_source_id!) }),
  });
}
