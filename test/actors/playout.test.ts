// The playout sends each frame with its play time: after a stall of the event loop the frames
// that were held back leave together, but their play times stay on the schedule (contiguous),
// which is where the recording places them (docs/api/recordings.md).
import t from 'tap';
import type { Clock } from '../../actors/clock.ts';
import { Playout } from '../../actors/playout.ts';

/** A clock whose timers fire only when told, at whatever time it is then (a stalled loop fires late). */
function stallableClock(start = 1_000) {
  let now = start;
  let timers: { id: number; fn: () => void }[] = [];
  let next = 1;
  const clock: Clock = {
    now: () => now,
    setTimeout: (fn: () => void) => {
      const id = next++;
      timers.push({ id, fn });
      return id;
    },
    clearTimeout: (id: unknown) => { timers = timers.filter((x) => x.id !== id); },
  } as Clock;
  /** Lets `ms` pass, then fires the timers that were pending (late by however much). */
  const pass = (ms: number) => {
    now += ms;
    const due = timers;
    timers = [];
    for (const x of due) x.fn();
  };
  return { clock, pass };
}

const FRAME = 640; // 20 ms at 16 kHz, 16-bit
/** A 20 ms tick and a 60 ms lead, pinned: what is checked here is the play times, not the defaults. */
const PACING = { tickMs: 20, leadMs: 60 };

t.test('frames held back by a stall keep their scheduled play times', async (t) => {
  const { clock, pass } = stallableClock();
  const sent: { at: number; playAt: number }[] = [];
  const playout = new Playout(clock, (pcm, playAt) => { t.equal(pcm.length, FRAME); sent.push({ at: clock.now(), playAt }); }, undefined, PACING);
  void playout.enqueue(new Uint8Array(FRAME * 25)); // 500 ms
  t.same(sent.map((s) => s.playAt), [1000, 1020, 1040, 1060], 'the lead goes out at once, each frame with its play time');
  pass(20);
  pass(20);
  t.equal(sent.length, 6, 'then one a tick');
  pass(150); // the event loop was stalled: the tick fires 130 ms late
  const burst = sent.slice(6);
  t.ok(burst.length > 1 && burst.every((s) => s.at === 1190), 'the frames due during the stall leave together');
  t.same(sent.map((s) => s.playAt), sent.map((_, i) => 1000 + 20 * i), 'their play times stay contiguous');
  t.ok(burst.every((s) => s.playAt <= 1190 + 60), 'nothing further ahead than the lead');
  playout.stop();
});

t.test('after an underrun the schedule restarts when audio comes again', async (t) => {
  const { clock, pass } = stallableClock();
  const sent: number[] = [];
  const playout = new Playout(clock, (_pcm, playAt) => sent.push(playAt), undefined, PACING);
  void playout.enqueue(new Uint8Array(FRAME * 2));
  t.same(sent, [1000, 1020]);
  pass(500); // nothing queued for half a second: the caller heard silence
  void playout.enqueue(new Uint8Array(FRAME));
  t.same(sent, [1000, 1020, 1500], 'the next frame plays when it came, not right after the last');
  playout.stop();
});

t.test('chunks no longer than the lead, arriving at once, are still paced (defaults)', async (t) => {
  const { clock, pass } = stallableClock();
  const sent: number[] = [];
  const playout = new Playout(clock, (_pcm, playAt) => sent.push(playAt));
  // A provider that streams 60 ms chunks faster than real time: each one fits in the lead.
  for (let i = 0; i < 10; i++) void playout.enqueue(new Uint8Array(FRAME * 3));
  t.same(sent, [1000, 1020, 1040, 1060, 1080, 1100, 1120], 'only what is due within the 120 ms lead goes out');
  pass(80);
  t.same(sent.slice(7), [1140, 1160, 1180, 1200], 'then four frames an 80 ms tick');
  pass(80);
  t.equal(sent.length, 15);
  t.same(sent, sent.map((_, i) => 1000 + 20 * i), 'one contiguous schedule across the chunks');
  playout.stop();
});

t.test('a chunk that comes while earlier audio is still ahead of its play time continues the schedule', async (t) => {
  const { clock, pass } = stallableClock();
  const sent: number[] = [];
  const playout = new Playout(clock, (_pcm, playAt) => sent.push(playAt));
  void playout.enqueue(new Uint8Array(FRAME * 2)); // 40 ms, all sent at once
  pass(10); // the queue is empty, but the caller is still playing it
  void playout.enqueue(new Uint8Array(FRAME * 2));
  t.same(sent, [1000, 1020, 1040, 1060], 'the second chunk plays right after the first, not from now');
  playout.stop();
});

t.test('heardMs is the audio whose play time has come, not all that was sent', async (t) => {
  const { clock, pass } = stallableClock();
  const playout = new Playout(clock, () => {});
  void playout.enqueue(new Uint8Array(FRAME * 50)); // 1 s
  t.equal(playout.playedMs, 140, 'the lead went out at once');
  t.equal(playout.heardMs, 0, 'none of it has played yet');
  pass(80);
  t.equal(playout.playedMs, 220);
  t.equal(playout.heardMs, 80, 'what played in 80 ms');
  pass(40);
  t.equal(playout.heardMs, 120, 'it grows between ticks');
  playout.stop();
  pass(500);
  t.equal(playout.heardMs, 120, 'and stops with the playout');
});

t.test('heardMs after an underrun: the silence is not counted as audio heard', async (t) => {
  const { clock, pass } = stallableClock();
  const playout = new Playout(clock, () => {});
  void playout.enqueue(new Uint8Array(FRAME * 2)); // 40 ms
  pass(500);
  t.equal(playout.heardMs, 40, 'all of it, no more');
  void playout.enqueue(new Uint8Array(FRAME * 2));
  t.equal(playout.heardMs, 40, 'the new audio plays from now');
  pass(30);
  t.equal(playout.heardMs, 70);
  playout.stop();
});
