import { z } from 'zod';
import type { HttpApp } from '../http/app.ts';
import { pageBody, pageSchema } from '../http/pagination.ts';
import {
  PhoneNumberService, availableNumberEntity, numberListQuery, numberPatchBody, numberPurchaseBody, numberSearchQuery, phoneNumberEntity, toEntity,
} from './service.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';


/** /v1/agent/available-phone-numbers and /v1/agent/phone-numbers (docs/api/phone.md). */
export function mountPhoneNumberRoutes(http: HttpApp, numbers: PhoneNumberService): void {
  const tags = ['Phone numbers'];
  http.route({
    method: 'GET', path: '/v1/agent/available-phone-numbers', auth: 'required', input: { query: numberSearchQuery },
    doc: {
      summary: 'Search numbers a carrier offers (not a reservation)', tags,
      responses: {
        200: { description: 'Numbers available now', schema: z.object({ available_phone_numbers: z.array(availableNumberEntity) }) },
        400: { description: 'Toll-free search, or a provider this platform does not have', schema: errorBody },
        502: { description: 'The carrier refused the request', schema: errorBody },
      },
    },
    handler: async (ctx) => ({ status: 200, body: await numbers.search(ctx.input.query, ctx.signal) }),
  });
  http.route({
    method: 'POST', path: '/v1/agent/phone-numbers', auth: 'required', body: 'json', input: { body: numberPurchaseBody },
    doc: {
      summary: 'Purchase a number (the first rental day is charged up front)', tags,
      responses: {
        201: { description: 'The number, active', schema: phoneNumberEntity },
        400: { description: 'The provider is not configured, or the number is not in its inventory (nothing charged)', schema: errorBody },
        402: { description: 'Out of API credit (nothing charged)', schema: errorBody },
        403: { description: 'No beta access, or the team holds its maximum of live numbers', schema: errorBody },
        409: { description: 'The number is already held on the platform', schema: errorBody },
        502: { description: 'The carrier refused; the row stays in status `error`, refunded, releasable', schema: errorBody },
      },
    },
    handler: async (ctx) => ({ status: 201, body: await numbers.purchase(who(ctx), ctx.input.body) }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/phone-numbers', auth: 'required', input: { query: numberListQuery, page: 'created' },
    doc: { summary: 'List the team\'s numbers (newest first; released numbers never appear)', tags, responses: { 200: { description: 'A page of numbers', schema: pageSchema('phone_numbers', phoneNumberEntity) } } },
    handler: async (ctx) => {
      const f = ctx.input.query;
      const req = ctx.input.page;
      const page = await numbers.list(who(ctx), { phoneNumber: f.phone_number, agentId: f.agent_id }, req);
      return { status: 200, body: pageBody('phone_numbers', page, toEntity) };
    },
  });
  http.route({
    method: 'GET', path: '/v1/agent/phone-numbers/{phone_number_id}', auth: 'required',
    doc: { summary: 'Read a number', tags, responses: { 200: { description: 'The number', schema: phoneNumberEntity }, 404: { description: 'Missing, released or another team\'s', schema: errorBody } } },
    handler: async (ctx) => ({ status: 200, body: toEntity(await numbers.get(who(ctx), ctx.params.phone_number_id!)) }),
  });
  http.route({
    method: 'PATCH', path: '/v1/agent/phone-numbers/{phone_number_id}', auth: 'required', body: 'json', input: { body: numberPatchBody },
    doc: { summary: 'Label a number, bind it to an agent, or unbind it (`agent_id: null`)', tags, responses: { 200: { description: 'The number', schema: phoneNumberEntity } } },
    handler: async (ctx) => ({ status: 200, body: await numbers.update(who(ctx), ctx.params.phone_number_id!, ctx.input.body) }),
  });
  http.route({
    method: 'DELETE', path: '/v1/agent/phone-numbers/{phone_number_id}', auth: 'required',
    doc: {
      summary: 'Release a number (irreversible; billing stops)', tags,
      responses: { 204: { description: 'Released' }, 502: { description: 'The carrier refused; the number stays active and releasing again retries', schema: errorBody } },
    },
    handler: async (ctx) => {
      await numbers.release(who(ctx), ctx.params.phone_number_id!);
      return { status: 204 };
    },
  });
}
