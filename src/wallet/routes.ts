import type { HttpApp } from '../http/app.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';
import { SPEECH_AUTH_MESSAGES } from '../speech/asr-routes.ts';
import { apiCreditEntity, apiCreditQuery, packageEntity, type WalletService } from './service.ts';


/** GET /wallet/{user_id}/api-credit and /wallet/{user_id}/package: the caller's team's wallet. */
export function mountWalletRoutes(http: HttpApp, wallet: WalletService): void {
  const tags = ['Wallet'];
  const notFound = { description: "user_id (or team_id) is neither self nor the caller's team", schema: errorBody };
  http.route({
    method: 'GET', path: '/wallet/{user_id}/api-credit', auth: 'required', authMessages: SPEECH_AUTH_MESSAGES, input: { query: apiCreditQuery },
    doc: { summary: "The team's API credit (user_id: self or the team id)", tags, responses: { 200: { description: 'The wallet', schema: apiCreditEntity }, 404: notFound } },
    handler: async (ctx) => ({
      status: 200,
      body: await wallet.apiCredit(who(ctx), ctx.params.user_id!, ctx.input.query),
    }),
  });
  http.route({
    method: 'GET', path: '/wallet/{user_id}/package', auth: 'required', authMessages: SPEECH_AUTH_MESSAGES,
    doc: { summary: "The team's package: none, usage is charged to credit (user_id: self or the team id)", tags, responses: { 200: { description: 'The package', schema: packageEntity }, 404: notFound } },
    handler: async (ctx) => ({ status: 200, body: await wallet.package(who(ctx), ctx.params.user_id!) }),
  });
}
