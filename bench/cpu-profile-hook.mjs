// Loaded into a child process with `NODE_OPTIONS=--import <this file>` (Node 20 refuses
// `--cpu-prof` there): SIGUSR2 starts a CPU profile, the next SIGUSR2 writes it to
// `$BENCH_CPU_PROFILE` (a .cpuprofile file for Chrome DevTools) — so a benchmark can profile
// a child over its measured window only. bench/providers.ts uses it (`--backend-cpu-prof`).
import { writeFileSync } from 'node:fs';
import inspector from 'node:inspector';

const file = process.env.BENCH_CPU_PROFILE;
if (file) {
  const session = new inspector.Session();
  session.connect();
  let running = false;
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true;
      session.post('Profiler.enable', () => session.post('Profiler.start'));
      return;
    }
    running = false;
    session.post('Profiler.stop', (err, r) => {
      if (!err) writeFileSync(file, JSON.stringify(r.profile));
      process.stderr.write(`cpu profile ${err ? `failed: ${err.message}` : `written to ${file}`}\n`);
    });
  });
}
