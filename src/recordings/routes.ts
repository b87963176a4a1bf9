import type { HttpApp } from '../http/app.ts';
import { errorBody } from '../http/openapi.ts';
import { who } from '../http/router.ts';
import { recordingView, type RecordingService } from './index.ts';

/** GET /v1/agent/sessions/{session_id}/recording (docs/api/recordings.md) and the local signed track URLs. */
export function mountRecordingRoutes(http: HttpApp, recordings: RecordingService): void {
  const tags = ['Sessions'];
  http.route({
    method: 'GET', path: '/v1/agent/sessions/{session_id}/recording', auth: 'required',
    doc: {
      summary: 'The recording of a session: one WAV track per speaker, each with a signed URL valid for 1 h',
      tags,
      responses: {
        200: { description: 'Status and tracks', schema: recordingView },
        404: { description: 'Session not found (missing or another team\'s); Recording not found (the session was never recorded)', schema: errorBody },
      },
    },
    handler: async (ctx) => ({
      status: 200,
      body: await recordings.view(who(ctx), ctx.params.session_id!, { host: ctx.headers.host, forwardedProto: ctx.headers['x-forwarded-proto'] }),
    }),
  });
  http.route({
    method: 'GET', path: '/v1/agent/sessions/{session_id}/recording/tracks/{role}', auth: 'none',
    doc: {
      summary: 'A track\'s audio behind a signed URL (local storage); the URL is the credential',
      tags,
      responses: { 200: { description: 'WAV, 16 kHz mono 16-bit', contentType: 'audio/wav' }, 404: { description: 'Unknown, unsigned or expired URL', schema: errorBody } },
    },
    handler: async (ctx) => {
      const body = await recordings.download(ctx.params.session_id!, ctx.params.role!, ctx.query.get('expires'), ctx.query.get('signature'));
      ctx.reply.send(200, body, { 'Content-Type': 'audio/wav', 'Cache-Control': 'private, max-age=3600' });
    },
  });
}
