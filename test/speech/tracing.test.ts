// Trace propagation: a valid traceparent continues its trace in the platform's spans and
// reaches the backend in gRPC metadata; an invalid or missing one starts a new trace.
import t from 'tap';
import { pack } from 'msgpackr';
import WebSocket from 'ws';
import { captureSpansForTests } from '../../src/telemetry/tracing.ts';
import { startTestServer } from '../helpers/server.ts';

const spans = captureSpansForTests();
const seen: { rpc: string; traceparent: string }[] = [];
const app = await startTestServer({ backend: 'synthetic', backendOptions: { onCall: (c) => seen.push({ rpc: c.rpc, traceparent: c.traceparent }) } });
t.teardown(() => app.close());

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const VALID = `00-${TRACE}-b7ad6b7169203331-01`;
const traceOf = (tp: string) => tp.split('-')[1];

async function tts(path: string, traceparent?: string) {
  seen.length = 0;
  spans.reset();
  const res = await fetch(app.url + path, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', ...(traceparent ? { traceparent } : {}) }, body: JSON.stringify({ text: 'Traced.', format: 'pcm', sample_rate: 16000 }) });
  const body = Buffer.from(await res.arrayBuffer());
  for (let i = 0; i < 50 && spans.getFinishedSpans().length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  return { res, body };
}

for (const path of ['/v1/tts', '/v1/tts/stream/with-timestamp']) {
  t.test(`${path}: a valid traceparent continues the trace in the platform and the backend`, async (t) => {
    const { res } = await tts(path, VALID);
    t.equal(res.status, 200);
    const finished = spans.getFinishedSpans();
    t.ok(finished.length >= 2, 'a request span and a backend-call span');
    t.ok(finished.every((s) => s.spanContext().traceId === TRACE), 'every platform span has the caller trace id');
    const server = finished.find((s) => s.name.startsWith('POST '))!;
    t.equal(server.parentSpanContext?.spanId, 'b7ad6b7169203331', 'the request span is a child of the caller span');
    t.equal(seen.length, 1);
    t.equal(traceOf(seen[0]!.traceparent), TRACE, 'the backend saw the same trace id');
    const client = finished.find((s) => s.name === 'inference.Synthesize')!;
    t.equal(seen[0]!.traceparent.split('-')[2], client.spanContext().spanId, 'the backend parent is the platform backend-call span');
  });
}

t.test('an invalid or missing traceparent starts a new trace', async (t) => {
  for (const bad of ['00-00000000000000000000000000000000-b7ad6b7169203331-01', 'garbage', `00-${TRACE}-0000000000000000-01`, undefined]) {
    const { res, body } = await tts('/v1/tts', bad);
    t.equal(res.status, 200, `${bad}: served as usual`);
    t.ok(body.length > 0);
    const ids = new Set(spans.getFinishedSpans().map((s) => s.spanContext().traceId));
    t.equal(ids.size, 1, 'one trace');
    const id = [...ids][0]!;
    t.not(id, TRACE);
    t.match(id, /^[0-9a-f]{32}$/);
    t.not(id, '0'.repeat(32));
    t.equal(traceOf(seen[0]!.traceparent), id, 'the backend joined the new trace');
  }
});

t.test('the live socket upgrade carries traceparent', async (t) => {
  seen.length = 0;
  spans.reset();
  const ws = new WebSocket(app.url.replace('http://', 'ws://') + '/v1/tts/live', { headers: { ...app.auth, traceparent: VALID } });
  await new Promise((r) => ws.once('open', r));
  ws.send(pack({ event: 'start', request: { text: '', format: 'pcm' } }));
  ws.send(pack({ event: 'text', text: 'Live trace.' }));
  ws.send(pack({ event: 'stop' }));
  await new Promise((r) => ws.once('close', r));
  for (let i = 0; i < 50 && spans.getFinishedSpans().length < 2; i++) await new Promise((r) => setTimeout(r, 20));
  t.ok(spans.getFinishedSpans().some((s) => s.name === 'wss /v1/tts/live' && s.spanContext().traceId === TRACE));
  t.equal(traceOf(seen.find((c) => c.rpc === 'synthesizeStream')!.traceparent), TRACE);
});

t.test('/v1/asr: a valid traceparent continues the trace in the platform and the backend; an invalid one starts a new trace', async (t) => {
  const { encodeText } = await import('../../native/engines/synthetic/modem.ts');
  const { wavHeader, int16ToPcmBytes } = await import('../../src/audio/index.ts');
  const speech = encodeText('Traced speech.', { sampleRateHz: 16000 });
  const pcm = int16ToPcmBytes(speech.pcm);
  const wav = Buffer.concat([Buffer.from(wavHeader(16000, pcm.byteLength)), Buffer.from(pcm)]);
  for (const traceparent of [VALID, 'garbage']) {
    seen.length = 0;
    spans.reset();
    const form = new FormData();
    form.set('audio', new Blob([wav], { type: 'audio/wav' }), 'a.wav');
    const res = await fetch(`${app.url}/v1/asr`, { method: 'POST', headers: { ...app.auth, traceparent }, body: form });
    t.equal(res.status, 200);
    t.equal(((await res.json()) as { text: string }).text, 'Traced speech.', 'tracing changes nothing in the output');
    for (let i = 0; i < 50 && spans.getFinishedSpans().length < 2; i++) await new Promise((r) => setTimeout(r, 20));
    const ids = new Set(spans.getFinishedSpans().map((s) => s.spanContext().traceId));
    t.equal(ids.size, 1, 'one trace');
    const id = [...ids][0]!;
    if (traceparent === VALID) t.equal(id, TRACE, 'the caller trace continues');
    else t.not(id, TRACE, 'a new trace');
    const call = seen.find((c) => c.rpc === 'transcribe');
    t.ok(call, 'the backend got the Transcribe call');
    t.equal(traceOf(call!.traceparent), id, 'the backend saw the same trace id');
  }
});
