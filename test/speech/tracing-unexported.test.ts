// Trace propagation with no exporter (no OTLP endpoint, no test capture): the platform's
// spans are not recorded, but a valid traceparent still continues its trace to the backend
// with a new span id, and a missing or invalid one still starts a new trace there.
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';

const seen: { rpc: string; traceparent: string }[] = [];
const app = await startTestServer({ backend: 'synthetic', backendOptions: { onCall: (c) => seen.push({ rpc: c.rpc, traceparent: c.traceparent }) } });
t.teardown(() => app.close());

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const PARENT_SPAN = 'b7ad6b7169203331';
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

async function backendTraceparent(traceparent?: string) {
  seen.length = 0;
  const res = await fetch(app.url + '/v1/tts', { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json', ...(traceparent ? { traceparent } : {}) }, body: JSON.stringify({ text: 'Traced.', format: 'pcm', sample_rate: 16000 }) });
  await res.arrayBuffer();
  t.equal(res.status, 200);
  t.equal(seen.length, 1, 'one backend call');
  return TRACEPARENT.exec(seen[0]?.traceparent ?? '');
}

t.test('a valid traceparent continues its trace to the backend, flags kept, with a span id of the platform', async (t) => {
  for (const flags of ['01', '00']) {
    const m = await backendTraceparent(`00-${TRACE}-${PARENT_SPAN}-${flags}`);
    t.ok(m, 'the backend got a W3C traceparent');
    t.equal(m![1], TRACE);
    t.not(m![2], PARENT_SPAN);
    t.not(m![2], '0000000000000000');
    t.equal(m![3], flags);
  }
});

t.test('a missing or invalid traceparent starts a new, sampled trace for each request', async (t) => {
  const a = await backendTraceparent();
  const b = await backendTraceparent('00-zz-not-valid');
  t.ok(a && b);
  t.not(a![1], b![1]);
  t.not(a![1], '00000000000000000000000000000000');
  t.equal(a![3], '01');
  t.equal(b![3], '01');
});
