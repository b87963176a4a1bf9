import { z } from 'zod';
import type { HttpApp } from '../http/app.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';
import { parse } from '../validation.ts';
import { SPEECH_AUTH_MESSAGES } from '../speech/asr-routes.ts';
import { checkModelHeader, voiceDesignBody, voiceDesignResponse, type VoiceDesignService } from './service.ts';

const fieldErrors = z.array(z.object({ type: z.string(), loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), ctx: z.record(z.string(), z.unknown()) }));

/** POST /v1/voice-design (header `model: voice-design-1`, JSON only). */
export function mountVoiceDesignRoutes(http: HttpApp, design: VoiceDesignService): void {
  http.route({
    method: 'POST', path: '/v1/voice-design', auth: 'required', authMessages: SPEECH_AUTH_MESSAGES, body: 'json',
    doc: {
      summary: 'Voice design: voice candidates from a description, each with a preview and the id POST /model saves it by (header model: voice-design-1)',
      tags: ['Voice models'],
      body: voiceDesignBody,
      responses: {
        200: { description: 'The candidates', schema: voiceDesignResponse },
        400: { description: 'Voice design is not supported by the inference backend (and why)', schema: errorBody },
        402: { description: 'Out of API credit', schema: errorBody },
        415: { description: 'Not JSON (bare)' },
        422: { description: 'The model header is missing or not voice-design-1; a field is missing, out of range, or not in the schema', schema: fieldErrors },
        429: { description: "Past the team's speech concurrency cap", schema: errorBody },
        503: { description: 'The inference backend is unavailable or busy', schema: errorBody },
      },
    },
    handler: async (ctx) => {
      checkModelHeader(ctx.headers.model);
      const body = parse(voiceDesignBody, ctx.body);
      return { status: 200, body: await design.design(who(ctx).teamId, body, { signal: ctx.signal, requestId: ctx.requestId }) };
    },
  });
}
