/**
 * The session machinery alone: `--sessions` sessions under one Supervisor on a test clock, each
 * taking `--turns` spoken turns (speech started, a committed text, speech ended; a reply
 * streamed word by word, synthesized and played out), with the fake backend of the actor tests
 * (`test/fixtures/session-backend.ts`): no network, no codecs, no store. Prints the CPU time
 * per turn of each run (the first warms up the JIT and is reported apart) and their median.
 *
 *   npx tsx bench/actors.ts [--sessions 300] [--turns 10] [--runs 5]
 */
import { TestClock } from '../actors/clock.ts';
import { Supervisor } from '../actors/supervisor.ts';
import type { SessionPlan } from '../actors/types.ts';
import { createFakeBackend, createRecorder, type FakeBackend } from '../test/fixtures/session-backend.ts';
import { percentile, round } from './lib.ts';

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const SESSIONS = arg('sessions', 300);
const TURNS = arg('turns', 10);
const RUNS = arg('runs', 5);

const plan = (sessionId: string): SessionPlan => ({
  sessionId, systemPrompt: '', context: () => [], firstMessage: { mode: 'off' }, language: 'en', voiceId: '',
  decideMs: 0, interruptible: true, bargeInMs: 0, maxDurationMs: 3_600_000, hangUpTool: false, reengage: null, toolEvents: true,
});

async function run(): Promise<{ turns: number; cpuMsPerTurn: number }> {
  const clock = new TestClock();
  const supervisor = new Supervisor({ maxSessions: SESSIONS, clock });
  const fakes: FakeBackend[] = [];
  let turns = 0;
  for (let i = 0; i < SESSIONS; i++) {
    const fake = createFakeBackend({ msPerChar: 2 });
    const rec = createRecorder();
    supervisor.start(plan(`s${i}`), { backend: fake, output: rec.output, record: rec.record, onTurn: () => { turns++; } }, () => {});
    fakes.push(fake);
  }
  await clock.tick(20);
  const start = process.cpuUsage();
  for (let k = 0; k < TURNS; k++) {
    for (const f of fakes) f.say('hello there');
    await clock.tick(400, 20);
  }
  const cpu = process.cpuUsage(start);
  await supervisor.drain('bench', 10_000);
  return { turns, cpuMsPerTurn: (cpu.user + cpu.system) / 1000 / turns };
}

const runs: { turns: number; cpuMsPerTurn: number }[] = [];
for (let r = 0; r < RUNS; r++) runs.push(await run());
const measured = runs.slice(1).map((r) => r.cpuMsPerTurn).sort((a, b) => a - b);
console.log(JSON.stringify({
  command: `npx tsx bench/actors.ts --sessions ${SESSIONS} --turns ${TURNS} --runs ${RUNS}`,
  sessions: SESSIONS,
  turns_per_run: runs.map((r) => r.turns),
  warmup_cpu_ms_per_turn: round(runs[0]!.cpuMsPerTurn, 4),
  cpu_ms_per_turn: measured.map((v) => round(v, 4)),
  cpu_ms_per_turn_median: round(percentile(measured, 50), 4),
}));
