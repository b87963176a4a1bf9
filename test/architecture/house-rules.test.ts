// The house rules of docs/architecture.md, checked on the source tree: only route
// declarations and the composition root import the HTTP layer; only the configuration
// modules read the environment; no module-level map is a hidden service locator.
import t from 'tap';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir))) {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) out.push(...sources(path));
    else if (/\.(ts|tsx)$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const files = ['src', 'actors', 'native', 'bin'].flatMap((d) => {
  try {
    return sources(d);
  } catch {
    return [];
  }
});

/** The code without comments (so a comment may name what the code must not do). */
function code(path: string): string {
  return readFileSync(join(root, path), 'utf8')
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

t.test('only route declarations and the composition root import from src/http/', async (t) => {
  // Route declarations: a feature's routes (routes.ts, *-routes.ts) and the sockets and
  // webhooks that are routes too; the compatibility layer, whose every file translates a
  // wire format; the composition root (platform.ts, modules.ts, each feature's module.ts).
  const allowed = (f: string) =>
    f.startsWith('src/http/') ||
    f.startsWith('src/compat/') ||
    /(^|\/)(routes|[\w-]+-routes|[\w-]+-route|module)\.ts$/.test(f) ||
    ['src/platform.ts', 'src/modules.ts', 'src/speech/live.ts', 'src/transport/websocket.ts', 'src/telephony/sandbox-socket.ts', 'src/telephony/livekit-webhook.ts'].includes(f);
  const offenders: string[] = [];
  for (const f of files) {
    if (allowed(f)) continue;
    for (const m of code(f).matchAll(/(?:from\s+|import\(\s*)'(\.{1,2}\/[^']+)'/g)) {
      const target = relative(root, resolve(root, dirname(f), m[1]!));
      if (target.startsWith('src/http/')) offenders.push(`${f} imports ${target}`);
    }
  }
  t.same(offenders, [], 'services and other layers know nothing of HTTP');
});

t.test('process.env is read only by the configuration modules', async (t) => {
  // src/config.ts (the platform), native/config.ts (the native backend), the CLI's own flags.
  const allowed = new Set(['src/config.ts', 'native/config.ts', 'src/cli.ts']);
  const offenders = files.filter((f) => !allowed.has(f) && /\bprocess\.env\b/.test(code(f)));
  t.same(offenders, [], 'every variable is read (and documented) in src/config.ts');
});

t.test('no module-level map finds a service', async (t) => {
  // A map at module level that other modules read (exported), or one keyed by a running
  // app (`object`, `HttpApp`), is a hidden service locator: the platform returns typed
  // handles instead. Private caches keyed by a value they describe are fine.
  const offenders: string[] = [];
  for (const f of files) {
    for (const line of code(f).split('\n')) {
      if (/^export\s+(const|let|var)\s+\w+(\s*:[^=]+)?=\s*new\s+(Weak)?Map\b/.test(line)) offenders.push(`${f}: ${line.trim()}`);
      else if (/^(const|let|var)\s+\w+(\s*:[^=]+)?=\s*new\s+WeakMap\s*<\s*(object|HttpApp)\b/.test(line)) offenders.push(`${f}: ${line.trim()}`);
    }
  }
  t.same(offenders, [], 'tests and benchmarks use the handles startPlatform returns');
});
