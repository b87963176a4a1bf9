// Caller audio goes to the recognizer in batches (src/sessions/audio-batch.ts): fewer, larger
// gRPC messages, the same bytes in the same order, and a batch never held once frames stop.
import t from 'tap';
import { AudioBatcher, RECOGNIZER_BATCH_MS, type BatchClock } from '../../src/sessions/audio-batch.ts';
import { inferenceBackend } from '../../src/sessions/runtime.ts';
import type { InferenceClient } from '../../src/inference/index.ts';

/** A manual clock: intervals fire only through `advance`. */
function manualClock() {
  let now = 0;
  const intervals = new Map<number, { fn: () => void; ms: number; next: number }>();
  let ids = 0;
  const clock: BatchClock & { advance(ms: number): void; running(): number } = {
    now: () => now,
    setInterval: (fn, ms) => {
      intervals.set(++ids, { fn, ms, next: now + ms });
      return ids;
    },
    clearInterval: (id) => void intervals.delete(id as number),
    advance(ms) {
      const end = now + ms;
      for (;;) {
        const due = [...intervals.values()].filter((i) => i.next <= end).sort((a, b) => a.next - b.next)[0];
        if (!due) break;
        now = due.next;
        due.next += due.ms;
        due.fn();
      }
      now = end;
    },
    running: () => intervals.size,
  };
  return clock;
}

/** `ms` of 16 kHz 16-bit audio whose bytes count up from `from`. */
const frame = (ms: number, from = 0) => Uint8Array.from({ length: ms * 32 }, (_, i) => (from + i) & 0xff);
const concat = (parts: Uint8Array[]) => Uint8Array.from(parts.flatMap((p) => [...p]));

t.test('20 ms frames go out in messages of 60 ms (batchMs 60), the same bytes in the same order', async (t) => {
  const clock = manualClock();
  const sent: Uint8Array[] = [];
  const b = new AudioBatcher((pcm) => sent.push(pcm.slice()), { batchMs: 60, clock });
  const frames = Array.from({ length: 9 }, (_, i) => frame(20, i * 7));
  for (const f of frames) {
    b.push(f);
    clock.advance(20);
  }
  t.same(sent.map((m) => m.length), [1920, 1920, 1920], 'three messages of 60 ms for nine frames of 20 ms');
  t.same(concat(sent), concat(frames), 'every byte, in order');
});

t.test('a frame of the batch size or more, with nothing pending, goes out at once and as it is', async (t) => {
  const clock = manualClock();
  const sent: Uint8Array[] = [];
  const given: Uint8Array[] = [];
  const b = new AudioBatcher((pcm) => {
    given.push(pcm);
    sent.push(pcm.slice());
  }, { batchMs: 60, clock });
  const big = frame(100);
  b.push(big);
  t.equal(sent.length, 1);
  t.equal(given[0], big, 'not copied');
  b.push(frame(20, 1));
  b.push(frame(100, 2));
  t.same(sent.map((m) => m.length), [3200, 3840], 'pending audio goes out with the next frame');
  t.same(sent[1], concat([frame(20, 1), frame(100, 2)]));
});

t.test("a frame is read during push only, and a batch during send only: both sides' buffers are reused", async (t) => {
  const clock = manualClock();
  const sent: Uint8Array[] = [];
  const b = new AudioBatcher((pcm) => {
    sent.push(pcm.slice());
    pcm.fill(0xee); // the receiver may not keep it: this must not reach later batches
  }, { batchMs: 60, clock });
  const scratch = new Uint8Array(640); // the transport's one buffer, as uWebSockets.js's
  const frames = Array.from({ length: 6 }, (_, i) => frame(20, i * 11));
  for (const f of frames) {
    scratch.set(f);
    b.push(scratch);
    scratch.fill(0x55); // the transport's next frame
    clock.advance(20);
  }
  t.same(sent.map((m) => m.length), [1920, 1920], 'two batches of 60 ms');
  t.same(concat(sent), concat(frames), 'every byte as it was when pushed');
});

t.test('when frames stop, what is pending goes out within the batch time (the end of speech is not held back)', async (t) => {
  const clock = manualClock();
  const sent: Uint8Array[] = [];
  const b = new AudioBatcher((pcm) => sent.push(pcm.slice()), { batchMs: 60, clock });
  b.push(frame(20));
  b.push(frame(20, 3));
  clock.advance(20);
  t.equal(sent.length, 0, 'not yet: the batch is not full and its first frame is 20 ms old');
  clock.advance(60);
  t.same(sent.map((m) => m.length), [1280], 'sent by the sweep, whatever it holds');
  t.equal(clock.running(), 0, 'the sweep stops once nothing is pending');
});

t.test('end() sends what is pending; cancel() drops it; neither takes more audio', async (t) => {
  const clock = manualClock();
  const sent: Uint8Array[] = [];
  const ended = new AudioBatcher((pcm) => sent.push(pcm.slice()), { clock });
  ended.push(frame(20, 5));
  ended.end();
  ended.push(frame(100));
  t.same(sent, [frame(20, 5)]);
  const cancelled = new AudioBatcher((pcm) => sent.push(pcm.slice()), { clock });
  cancelled.push(frame(20));
  cancelled.cancel();
  cancelled.push(frame(100));
  clock.advance(200);
  t.equal(sent.length, 1, 'nothing more');
  t.equal(clock.running(), 0);
});

t.test('batchMs 0: every frame on its own, as before batching', async (t) => {
  const sent: Uint8Array[] = [];
  const b = new AudioBatcher((pcm) => sent.push(pcm.slice()), { batchMs: 0, clock: manualClock() });
  b.push(frame(20));
  b.push(frame(10));
  t.same(sent.map((m) => m.length), [640, 320]);
});

t.test('a session backend batches its recognizer audio (RECOGNIZER_BATCH_MS, 40 ms) and sends the rest before the stream ends', async (t) => {
  const calls: string[] = [];
  const inference = {
    async transcribeStream() {
      return {
        sendAudio: (pcm: Uint8Array) => calls.push(`audio ${pcm.length}`),
        commit() {},
        end: () => calls.push('end'),
        cancel: () => calls.push('cancel'),
        async *[Symbol.asyncIterator]() {},
      };
    },
  } as unknown as InferenceClient;
  const backend = inferenceBackend(inference, { teamId: 'team_1', chatModel: 'llm-medium' });
  const stt = await backend.transcribe({ language: 'en', signal: new AbortController().signal });
  t.equal(RECOGNIZER_BATCH_MS, 40);
  for (let i = 0; i < 5; i++) stt.sendAudio(frame(20, i));
  stt.end();
  t.same(calls, ['audio 1280', 'audio 1280', 'audio 640', 'end']);
});
