// A synthesis that fails (docs/api/compat.md "Errors": a failure mid-stream is an error frame
// or a 502, never a truncated 200): chat audio before the first byte is the family's JSON error; after the
// SSE stream started it ends with an error payload the `openai` client raises, never [DONE].
import t from 'tap';
import OpenAI from 'openai';
import { HttpApp } from '../../src/http/app.ts';
import { createLogger } from '../../src/log.ts';
import { mountOpenAiCompat } from '../../src/compat/openai/index.ts';
import { AsrService } from '../../src/speech/asr.ts';
import { TtsService } from '../../src/speech/tts.ts';
import { Metrics } from '../../src/telemetry/metrics.ts';
import { startTracing } from '../../src/telemetry/tracing.ts';
import { failingSpeechBackend } from '../fixtures/failing-speech-backend.ts';
import { startTestServer } from '../helpers/server.ts';

const app = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());

const log = createLogger({ level: 'silent' });
const principal = async () => ({ teamId: app.teamId, keyId: 'k', betaAccess: true });
const start = async (chunks: number) => {
  const http = new HttpApp({ log, metrics: new Metrics({ processMetrics: false }), authenticate: principal });
  const tts = new TtsService({ inference: failingSpeechBackend(chunks), sql: app.db.sql, log, tracing: startTracing({ env: {} }), resolveVoice: async () => ({}) as never, authenticate: principal });
  mountOpenAiCompat(http, { tts, asr: new AsrService(app.inference, { log }), authenticate: principal });
  const port = await http.listen('127.0.0.1', 0);
  t.teardown(() => http.close());
  return new OpenAI({ apiKey: 'k', baseURL: `http://127.0.0.1:${port}/compat/v1`, maxRetries: 0 });
};
const body = { model: 'tts-1', modalities: ['text', 'audio'] as ('text' | 'audio')[], audio: { voice: '', format: 'pcm16' as const }, messages: [{ role: 'user' as const, content: 'Doomed.' }] };

t.test('before the first byte: 503 in the family envelope', async (t) => {
  const oa = await start(0);
  const e = await oa.chat.completions.create(body).then(() => null, (err) => err);
  t.ok(e instanceof OpenAI.InternalServerError, '503');
  t.equal(e?.status, 503);
  t.match(e?.error, { code: 503, type: 'provider_error', message: 'Inference backend unavailable' });
});

t.test('after the stream started: an error payload ends it, the client raises it, no [DONE]', async (t) => {
  const oa = await start(3);
  const stream = await oa.chat.completions.create({ ...body, stream: true });
  let pieces = 0;
  const e = await (async () => {
    for await (const chunk of stream) if ((chunk.choices[0]?.delta as { audio?: { data?: string } }).audio?.data) pieces++;
  })().then(() => null, (err) => err);
  t.ok(pieces > 0, 'audio had started');
  t.ok(e instanceof OpenAI.APIError, 'the client raises the error payload');
  t.match(String(e?.message), /Inference backend unavailable/);
});
