// Streaming behaviour of /v1/tts and /v1/tts/stream/with-timestamp: backpressure, client
// abort, failures before and after the first byte, the SSE alignment contract.
import t from 'tap';
import { HttpApp } from '../../src/http/app.ts';
import { createLogger } from '../../src/log.ts';
import { TtsService } from '../../src/speech/tts.ts';
import { mountTtsRoutes } from '../../src/speech/tts-routes.ts';
import { Metrics } from '../../src/telemetry/metrics.ts';
import { startTracing } from '../../src/telemetry/tracing.ts';
import { failingSpeechBackend, noVoices } from '../fixtures/failing-speech-backend.ts';
import { startTestServer } from '../helpers/server.ts';
import { heard, settle, until } from './tts-helpers.ts';

const app = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());
const backend = app.backend!;

const sentences = (n: number) => Array.from({ length: n }, (_, i) => `Sentence number ${i + 1} is here.`).join(' ');
const post = (body: unknown, signal?: AbortSignal, path = '/v1/tts') =>
  fetch(app.url + path, { method: 'POST', signal, headers: { ...app.auth, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

t.test('a slow reader pauses the backend; reading again resumes it to the end', async (t) => {
  const text = sentences(60); // 60 segments at chunk_length 100
  const before = backend.stats().segmentsSynthesized;
  const res = await post({ text, format: 'pcm', sample_rate: 44100, chunk_length: 100 });
  t.equal(res.status, 200);
  const reader = res.body!.getReader();
  const first = await reader.read(); // then stop reading
  const paused = (await settle(() => backend.stats().segmentsSynthesized)) - before;
  t.ok(paused < 60, `the backend stopped producing while the client did not read (${paused} of 60 segments)`);
  t.equal(backend.stats().activeCalls, 1, 'the call is paused, not ended');
  const parts: Uint8Array[] = [first.value!];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
  }
  t.equal(backend.stats().segmentsSynthesized - before, 60, 'all segments once the client read again');
  t.equal(await heard(Buffer.concat(parts), 'pcm', 44100), text, 'nothing lost across the pause');
});

t.test('a client that disconnects mid-stream cancels the backend call', async (t) => {
  const ac = new AbortController();
  const res = await post({ text: sentences(200), format: 'mp3' }, ac.signal);
  t.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read();
  t.equal(backend.stats().activeCalls, 1, 'backend call in progress');
  const at = backend.stats().segmentsSynthesized;
  ac.abort();
  t.ok(await until(() => backend.stats().activeCalls === 0), 'the backend saw the cancel');
  const after = await settle(() => backend.stats().segmentsSynthesized);
  t.ok(after - at < 10, 'the backend stopped synthesizing');
});

t.test('with-timestamp: SSE events assemble to the audio and replace-not-append alignment', async (t) => {
  const text = sentences(8);
  const res = await post({ text, format: 'pcm', sample_rate: 16000, chunk_length: 100 }, undefined, '/v1/tts/stream/with-timestamp');
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'text/event-stream');
  const raw = await res.text();
  const events = raw.split('\n\n').filter(Boolean).map((block) => {
    const lines = block.split('\n');
    return { event: lines.find((l) => l.startsWith('event: '))!.slice(7), data: JSON.parse(lines.find((l) => l.startsWith('data: '))!.slice(6)) };
  });
  t.ok(events.length > 3);
  t.ok(events.every((e) => e.event === 'message'));
  const audio: Buffer[] = [];
  const alignments = new Map<number, any>();
  const offsets = new Map<number, number>();
  let lastSeq = 0;
  const problems: string[] = [];
  for (const { data } of events) {
    if (Object.keys(data).sort().join() !== 'alignment,audio_base64,chunk_audio_offset_sec,chunk_seq,content') problems.push(`fields ${Object.keys(data)}`);
    if (data.chunk_seq < lastSeq) problems.push(`chunk_seq went back to ${data.chunk_seq}`);
    lastSeq = data.chunk_seq;
    audio.push(Buffer.from(data.audio_base64, 'base64'));
    if (data.alignment) {
      alignments.set(data.chunk_seq, data.alignment); // replace, never append
      offsets.set(data.chunk_seq, data.chunk_audio_offset_sec);
    }
  }
  t.same(problems, [], 'every event has the five fields; chunk_seq never goes back');
  t.equal(await heard(Buffer.concat(audio), 'pcm', 16000), text, 'concatenated audio transcribes back');
  t.ok(alignments.size > 1, `several text chunks (${alignments.size})`);
  const words = [...alignments.keys()].sort((a, b) => a - b).flatMap((k) => alignments.get(k).segments.map((s: any) => ({ ...s, start: s.start + offsets.get(k)!, end: s.end + offsets.get(k)! })));
  t.same(words.map((w) => w.text).join(' '), text, 'the snapshots cover every word once');
  for (let i = 1; i < words.length; i++) if (words[i].start < words[i - 1].end - 1e-6) t.fail(`word ${i} overlaps the previous one`);
  t.ok(words.every((w) => w.start >= 0 && w.end >= w.start), 'global times are ordered');
  for (const [k, a] of alignments) t.ok(a.audio_duration >= a.segments[a.segments.length - 1].end - 1e-6, `chunk ${k}: audio_duration covers its words`);
});

t.test('backend failures: JSON before the first byte; destroyed body or SSE error event after it', async (t) => {
  const log = createLogger({ level: 'silent' });
  const start = async (chunks: number) => {
    const http = new HttpApp({ log, metrics: new Metrics({ processMetrics: false }), authenticate: async () => ({ teamId: app.teamId, keyId: 'k', betaAccess: true }) });
    const tracing = startTracing({ env: {} });
    mountTtsRoutes(http, new TtsService({ inference: failingSpeechBackend(chunks), sql: app.db.sql, log, tracing, resolveVoice: noVoices, authenticate: async () => ({ teamId: app.teamId, keyId: 'k', betaAccess: true }) }));
    const port = await http.listen('127.0.0.1', 0);
    t.teardown(() => http.close());
    return `http://127.0.0.1:${port}`;
  };
  const body = JSON.stringify({ text: 'Doomed.', format: 'pcm', sample_rate: 16000 });
  const headers = { Authorization: 'Bearer x', 'Content-Type': 'application/json' };

  const early = await start(0);
  const r0 = await fetch(early + '/v1/tts', { method: 'POST', headers, body });
  t.equal(r0.status, 503);
  t.same(await r0.json(), { status: 503, message: 'Inference backend unavailable' });

  const late = await start(3);
  const r1 = await fetch(late + '/v1/tts', { method: 'POST', headers, body });
  t.equal(r1.status, 200, 'the stream had started');
  await t.rejects(r1.arrayBuffer(), 'the body is cut off, never a clean end');

  const r2 = await fetch(late + '/v1/tts/stream/with-timestamp', { method: 'POST', headers, body });
  t.equal(r2.status, 200);
  const sse = await r2.text();
  t.match(sse, /event: message\n/);
  t.ok(sse.trimEnd().endsWith('event: error\ndata: {"status":503,"message":"Inference backend unavailable"}'), 'an error event ends the stream');
});
