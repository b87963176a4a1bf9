// The native backend's turn-part timings (`onTiming`, PARLEY_BACKEND_TIMINGS), which
// bench/sessions.ts sets against the platform's turn timelines (bench/turn-timings.ts).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { startBackend } from '../../native/server.ts';
import type { CallTiming } from '../../native/service.ts';
import { AudioEncoding, Role } from '../../src/gen/inference/v1/inference_pb.ts';
import { createInferenceClient, spawnNativeBackend } from '../../src/inference/index.ts';
import { backendTimedPlatformMs, readBackendLoops, readBackendTimings } from '../../bench/turn-timings.ts';
import type { TurnTimeline } from '../../actors/types.ts';

const RATE = 16000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('onTiming: an end of speech, a Generate call and a synthesis stream, keyed by x-request-id', async (t) => {
  const timings: CallTiming[] = [];
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', onTiming: (x) => timings.push(x) });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const call = { requestId: 'sess_timed', teamId: 'team_1' };

  // Recognition: 0.5 s of silence, a phrase, 1 s of silence, sent as 100 ms frames in real time.
  const speech = encodeText('What time is it?', { sampleRateHz: RATE }).pcm;
  const audio = new Int16Array(RATE / 2 + speech.length + RATE);
  audio.set(speech, RATE / 2);
  const stt = await client.transcribeStream({ language: 'en', input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: RATE } }, call);
  const ended: number[] = [];
  const reading = (async () => {
    for await (const r of stt) if (r.event.case === 'speechEnded') ended.push(r.event.value.atMs);
  })();
  const sentAt: number[] = [];
  for (let at = 0; at < audio.length; at += 1600) {
    const piece = audio.slice(at, at + 1600);
    sentAt.push(Date.now());
    stt.sendAudio(new Uint8Array(piece.buffer));
    await sleep(100);
  }
  stt.end();
  await reading;
  t.equal(ended.length, 1, 'one end of speech');
  const rec = timings.filter((x) => x.rpc === 'transcribeStream');
  t.equal(rec.length, 1, 'one timing per end of speech');
  const r = rec[0] as Extract<CallTiming, { rpc: 'transcribeStream' }>;
  t.equal(r.requestId, 'sess_timed');
  t.equal(r.atMs, ended[0], 'the event’s stream position');
  t.ok(r.heardAt <= r.sentAt, 'heard before it was said to have ended');
  // The position's arrival is its piece's arrival less the audio after it in the piece. Only the
  // order of events is asserted (no wall-clock bound: timings belong in bench/): the piece that
  // holds the end of speech cannot have arrived before the test sent it.
  const piece = Math.floor(r.atMs / 100);
  const afterInPiece = (piece + 1) * 100 - r.atMs;
  t.ok(r.heardAt + afterInPiece >= sentAt[piece], 'the end of speech is timed from its piece’s arrival, not before it was sent');
  // The recognizer can only say the utterance ended once it has the 300 ms of silence after it:
  // the piece holding the gap's end was sent before the event was.
  const gapPiece = Math.floor((r.atMs + 300) / 100);
  t.ok(r.sentAt >= sentAt[gapPiece], 'the event was sent only after the audio holding the utterance gap');

  // The model: one timing per call, a time for each text delta.
  const deltas: number[] = [];
  for await (const g of client.generate({ model: 'llm-medium', messages: [{ role: Role.USER, content: 'Hello there' }] }, call)) if (g.event.case === 'textDelta') deltas.push(1);
  const gen = timings.filter((x) => x.rpc === 'generate') as Extract<CallTiming, { rpc: 'generate' }>[];
  t.equal(gen.length, 1);
  t.equal(gen[0].requestId, 'sess_timed');
  t.equal(gen[0].textAt.length, deltas.length, 'a time per text delta');
  t.ok(gen[0].textAt.every((x, i) => x >= (i ? gen[0].textAt[i - 1] : gen[0].receivedAt)), 'in order, after the call arrived');

  // Synthesis: the first text's arrival, then its first audio.
  const tts = await client.synthesizeStream({ output: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: RATE } }, call);
  const textSent = Date.now();
  tts.send('Hello there. ');
  tts.flush();
  tts.end();
  for await (const _ of tts) { /* drain */ }
  const syn = timings.filter((x) => x.rpc === 'synthesizeStream') as Extract<CallTiming, { rpc: 'synthesizeStream' }>[];
  t.equal(syn.length, 1, 'once per stream, at its first audio');
  t.ok(syn[0].textAt >= textSent && syn[0].audioAt >= syn[0].textAt);
});

t.test('PARLEY_BACKEND_TIMINGS: the program appends JSON lines, with its event-loop delay each second', async (t) => {
  const dir = mkdtempSync(join(os.tmpdir(), 'parley-timings-'));
  const file = join(dir, 'b.jsonl');
  const backend = await spawnNativeBackend({ engine: 'synthetic', env: { PARLEY_BACKEND_TIMINGS: file }, restart: false, stderr: 'ignore' });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  for await (const _ of client.generate({ model: 'llm-medium', messages: [{ role: Role.USER, content: 'Hi' }] }, { requestId: 'sess_file' })) { /* drain */ }
  await sleep(1200);
  await client.close();
  await backend.stop();
  const calls = readBackendTimings([file]);
  t.same(calls.map((c) => [c.rpc, c.requestId]), [['generate', 'sess_file']]);
  const [loop] = readBackendLoops([file]);
  t.ok(loop && loop.p99Ms >= loop.p50Ms && loop.maxMs >= loop.p99Ms, 'an event-loop delay line');
  t.ok(readFileSync(file, 'utf8').endsWith('\n'));
  t.same(readBackendLoops([join(dir, 'missing.jsonl')]), [null], 'a missing file reads as nothing');
});

t.test('backendTimedPlatformMs: the turn’s time less the backend’s parts and the eagerness wait, matched by session and time', async (t) => {
  const tl = (o: Partial<TurnTimeline> = {}): TurnTimeline => ({
    sessionId: 's1', turnId: 1, speechEndedAt: 1010, recognizedAt: 1400, decideMs: 0,
    startedAt: 1405, textEventsToSpeakable: 2, firstSpeakableAt: 1460, firstTtsAt: 1462, firstAudioAt: 1530, ...o,
  });
  const timings: CallTiming[] = [
    // an earlier end of speech, and the one this turn handled
    { rpc: 'transcribeStream', requestId: 's1', atMs: 100, heardAt: 500, sentAt: 810 },
    { rpc: 'transcribeStream', requestId: 's1', atMs: 900, heardAt: 1015, sentAt: 1390 },
    { rpc: 'generate', requestId: 's1', receivedAt: 1408, textAt: [1440, 1450, 1452] },
    { rpc: 'synthesizeStream', requestId: 's1', textAt: 1465, audioAt: 1520 },
    // another session's calls at the same times are not this turn's
    { rpc: 'generate', requestId: 's2', receivedAt: 1406, textAt: [1407, 1407] },
  ];
  // total 1530 − 1010 = 520; recognition 1390 − 1015 = 375; model 1450 − 1408 = 42 (the second
  // delta completed the sentence); synthesis 1520 − 1465 = 55; the platform: 48.
  const one = backendTimedPlatformMs([tl()], timings);
  t.same(one.values, [48]);
  t.equal(one.unmatched, 0);
  // ingest 1015 − 1010; recognized 1400 − 1390; to the model 1408 − 1405; from it 1460 − 1450;
  // to synthesis 1465 − 1462; from it 1530 − 1520; in the platform 1405 − 1400 + 1462 − 1460.
  t.same(one.hops, { ingest: [5], recognized: [10], toModel: [3], fromModel: [10], toSynthesis: [3], fromSynthesis: [10], inPlatform: [7] }, 'by hop, adding up to it');
  t.same(backendTimedPlatformMs([tl({ decideMs: 20 })], timings).values, [28], 'the eagerness wait is not the platform’s');
  const counts = (x: { values: number[]; unmatched: number }) => [x.values.length, x.unmatched];
  t.same(counts(backendTimedPlatformMs([tl({ sessionId: 's3' })], timings)), [0, 1], 'no calls of that session: unmatched');
  t.same(counts(backendTimedPlatformMs([tl({ speechEndedAt: null, recognizedAt: null })], timings)), [0, 0], 'a turn not spoken is not counted');
});
