import type { HttpApp } from '../http/app.ts';
import { errorBody } from '../http/openapi.ts';
import { pageBody, pageSchema } from '../http/pagination.ts';
import { who } from '../http/router.ts';
import { ledgerEntry, ledgerQuery, teamEntity, toLedgerEntry, usageQuery, usageReport, type UsageService } from './service.ts';


/** GET /v1/team, /v1/usage, /v1/usage/ledger: the caller's team, its usage and its credit ledger. */
export function mountUsageRoutes(http: HttpApp, usage: UsageService): void {
  const tags = ['Usage'];
  http.route({
    method: 'GET', path: '/v1/team', auth: 'required',
    doc: { summary: 'The team of the API key: name, beta access, credit', tags, responses: { 200: { description: 'The team', schema: teamEntity }, 404: { description: 'The team is gone', schema: errorBody } } },
    handler: async (ctx) => ({ status: 200, body: await usage.team(who(ctx)) }),
  });
  http.route({
    method: 'GET', path: '/v1/usage', auth: 'required', input: { query: usageQuery },
    doc: { summary: 'Usage and its cost per UTC day and kind (speech characters and seconds, session and transfer minutes, phone-number days)', tags, responses: { 200: { description: 'Usage over the range', schema: usageReport } } },
    handler: async (ctx) => ({ status: 200, body: await usage.usage(who(ctx), ctx.input.query) }),
  });
  http.route({
    method: 'GET', path: '/v1/usage/ledger', auth: 'required', input: { query: ledgerQuery, page: 'number' },
    doc: { summary: 'The credit ledger: every grant, charge, hold and refund, newest first, with the balance after each', tags, responses: { 200: { description: 'A page of entries', schema: pageSchema('entries', ledgerEntry) } } },
    handler: async (ctx) => ({ status: 200, body: pageBody('entries', await usage.ledger(who(ctx), ctx.input.query, ctx.input.page), toLedgerEntry) }),
  });
}
