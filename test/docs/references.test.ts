// The repository explains itself (issue 17): every reference in code and docs resolves inside
// the repository. Nothing here starts a server; it reads files.
//
// - No file cites the specification files kept outside the repository (their names are built
//   below so that this file does not cite them either); the README may say where the
//   specification came from, in the one paragraph that starts with ORIGIN.
// - Relative markdown links in README.md, docs/**/*.md and the READMEs beside the code point at
//   files that exist, and `#anchors` at headings that exist (GitHub's heading slugs).
// - Every decision id cited (`D-AREA-n`) is defined as a `### D-AREA-n` heading in
//   docs/decisions.md, and every id defined there is listed in its index.
// - `docs/….md` paths named in code exist; a quoted heading after a docs/api page
//   (`docs/api/phone.md "Limits"`) names a heading of that page.
// - Decisions are cited by id, never by title (`docs/decisions.md "Cross-node resume"`).
// - Repository paths named in backticks in README.md and docs/ exist (a `*` matches within a
//   folder), so the docs follow the tree when files move.
// - docs/spec-coverage.md: the counts it states are the counts of its tables, and every test
//   file it names exists.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, dirname, resolve } from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/process.ts';

const SCANNED = ['src', 'actors', 'native', 'bench', 'test', 'docs', 'scripts', 'bin', 'proto', 'README.md'];
const SKIP_DIRS = new Set(['node_modules', 'dist', 'data', 'coverage', '.tap', 'scratch', 'test-screenshots', '.git']);
const SELF = 'test/docs/references.test.ts';
const ORIGIN = 'Where the specification came from:';

/** Repository-relative paths of the text files under `roots` (binary files are left out). */
function filesUnder(roots: string[]): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    const abs = join(ROOT, rel);
    if (!existsSync(abs)) return;
    const st = statSync(abs);
    if (st.isDirectory()) {
      for (const name of readdirSync(abs).sort()) if (!SKIP_DIRS.has(name)) walk(rel === '' ? name : `${rel}/${name}`);
    } else if (st.isFile() && st.size < 4_000_000) {
      out.push(rel);
    }
  };
  for (const r of roots) walk(r);
  return out;
}

const textCache = new Map<string, string | null>();
/** The file's text, or null for a binary file. */
function text(rel: string): string | null {
  if (!textCache.has(rel)) {
    const buf = readFileSync(join(ROOT, rel));
    textCache.set(rel, buf.includes(0) ? null : buf.toString('utf8'));
  }
  return textCache.get(rel)!;
}

const ALL = filesUnder(SCANNED).filter((f) => text(f) !== null);
const MARKDOWN = ALL.filter((f) => f.endsWith('.md') && (f === 'README.md' || f.startsWith('docs/') || f.endsWith('/README.md')));

// Built from parts so that this file names none of them literally.
const OUTSIDE = [
  ['gap-fill', new RegExp('\\b' + 'GA' + 'PS' + '\\b')],
  ['specification file', new RegExp('\\b' + 'SP' + 'EC-[A-Za-z]')],
  ['client notes', new RegExp('CLI' + 'ENTS\\.md')],
  ['shared folder', new RegExp('\\.\\./' + 'shared\\b')],
] as const;

/** The README's paragraph on where the specification came from: its line numbers (1-based). */
function originLines(readme: string): Set<number> {
  const lines = readme.split('\n');
  const start = lines.findIndex((l) => l.startsWith(ORIGIN));
  const allowed = new Set<number>();
  if (start < 0) return allowed;
  for (let i = start; i < lines.length && lines[i]!.trim() !== ''; i++) allowed.add(i + 1);
  return allowed;
}

t.test('no file cites the specification files kept outside the repository', async (t) => {
  const found: string[] = [];
  for (const file of ALL) {
    if (file === SELF) continue;
    const allowed = file === 'README.md' ? originLines(text(file)!) : new Set<number>();
    text(file)!.split('\n').forEach((line, i) => {
      if (allowed.has(i + 1)) return;
      for (const [what, re] of OUTSIDE) if (re.test(line)) found.push(`${file}:${i + 1} cites the ${what}: ${line.trim().slice(0, 120)}`);
    });
  }
  t.same(found, [], 'cite docs/api, docs/spec-coverage.md or a decision id instead');
  t.ok(originLines(text('README.md')!).size > 0, `the README says where the specification came from ("${ORIGIN}")`);
});

/** Markdown with fenced code blocks blanked out (line count kept) and inline code spans emptied. */
function prose(md: string): string {
  let fenced = false;
  return md
    .split('\n')
    .map((line) => {
      if (/^\s*(```|~~~)/.test(line)) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line.replace(/`[^`]*`/g, (m) => (m.length > 2 ? '`x`' : m));
    })
    .join('\n');
}

/** GitHub's anchor of a heading text. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

const anchorCache = new Map<string, Set<string>>();
/** The anchors of a markdown file's headings, with GitHub's `-1`, `-2` suffixes for repeats. */
function anchors(rel: string): Set<string> {
  if (!anchorCache.has(rel)) {
    const seen = new Map<string, number>();
    const set = new Set<string>();
    let fenced = false;
    for (const line of readFileSync(join(ROOT, rel), 'utf8').split('\n')) {
      if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
      const m = !fenced && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
      if (!m) continue;
      const base = slug(m[1]!);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      set.add(n === 0 ? base : `${base}-${n}`);
    }
    anchorCache.set(rel, set);
  }
  return anchorCache.get(rel)!;
}

t.test('relative markdown links point at files and headings that exist', async (t) => {
  const broken: string[] = [];
  const LINK = /\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;
  for (const file of MARKDOWN) {
    prose(text(file)!).split('\n').forEach((line, i) => {
      for (const m of line.matchAll(LINK)) {
        const target = m[1]!;
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue; // http:, mailto:, …
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const rel = path === '' ? file : relative(ROOT, resolve(ROOT, dirname(file), decodeURIComponent(path)));
        const where = `${file}:${i + 1} → ${target}`;
        if (rel.startsWith('..') || !existsSync(join(ROOT, rel))) {
          broken.push(`${where}: no such file`);
          continue;
        }
        if (anchor && rel.endsWith('.md') && !anchors(rel).has(anchor)) broken.push(`${where}: no such heading in ${rel}`);
      }
    });
  }
  t.same(broken, [], `${MARKDOWN.length} markdown files checked`);
});

const DECISIONS = 'docs/decisions.md';
const decisionText = readFileSync(join(ROOT, DECISIONS), 'utf8');
const defined = new Set([...decisionText.matchAll(/^### (D-[A-Z]+-\d+)\s*$/gm)].map((m) => m[1]!));

t.test('decision ids cited in code and docs are defined in docs/decisions.md', async (t) => {
  t.ok(defined.size > 0, `${defined.size} decisions defined`);
  const undefinedIds: string[] = [];
  for (const file of ALL) {
    if (file === SELF) continue;
    text(file)!.split('\n').forEach((line, i) => {
      for (const m of line.matchAll(/\bD-[A-Z]+-\d+\b/g)) if (!defined.has(m[0])) undefinedIds.push(`${file}:${i + 1} ${m[0]}`);
    });
  }
  t.same(undefinedIds, [], 'every cited id has its `### D-…` entry');

  const index = decisionText.slice(0, decisionText.search(/^## (?!Index)/m));
  const unlisted = [...defined].filter((id) => !index.includes(`[${id}](#${id.toLowerCase()})`));
  t.same(unlisted, [], 'every decision is listed in the index at the top');
  const dup = [...decisionText.matchAll(/^### (D-[A-Z]+-\d+)\s*$/gm)].map((m) => m[1]!).filter((id, i, all) => all.indexOf(id) !== i);
  t.same(dup, [], 'no id is defined twice');
});

t.test('docs paths named in code exist, and quoted docs/api headings too', async (t) => {
  const missing: string[] = [];
  for (const file of ALL) {
    if (file === SELF || file.startsWith('docs/') || file === 'README.md') continue;
    text(file)!.split('\n').forEach((line, i) => {
      for (const m of line.matchAll(/\bdocs\/[\w./-]*\w\.md\b(?:,? "([^"]+)")?/g)) {
        const path = m[0].split(/,? "/)[0]!;
        const where = `${file}:${i + 1} ${m[0]}`;
        if (!existsSync(join(ROOT, path))) {
          missing.push(`${where}: no such file`);
          continue;
        }
        const heading = m[1];
        if (heading && path.startsWith('docs/api/') && !headingTexts(path).some((h) => h.startsWith(heading))) {
          missing.push(`${where}: no heading "${heading}" in ${path}`);
        }
      }
    });
  }
  t.same(missing, []);
});

t.test('decisions are cited by id, not by their title', async (t) => {
  const byTitle: string[] = [];
  for (const file of ALL) {
    if (file === SELF || file === DECISIONS) continue;
    text(file)!.split('\n').forEach((line, i) => {
      if (/decisions\.md[)`]*,?\s*\(?"/.test(line)) byTitle.push(`${file}:${i + 1} ${line.trim().slice(0, 120)}`);
    });
  }
  t.same(byTitle, [], 'write the D-AREA-n id (see the index of docs/decisions.md)');
});

t.test('repository paths named in README.md and docs/ exist', async (t) => {
  const missing: string[] = [];
  const PATH = /`((?:src|actors|native|bench|test|scripts|proto|bin)\/[\w./*-]*)`/g;
  for (const file of MARKDOWN.filter((f) => f === 'README.md' || f.startsWith('docs/'))) {
    prose(text(file)!.replace(/`([^`]*)`/g, '\u0000$1\u0000')).split('\n').forEach((line, i) => {
      for (const m of line.replace(/\u0000/g, '`').matchAll(PATH)) {
        const p = m[1]!.replace(/\/$/, '');
        if (!pathExists(p) && !pathExists(`test/${p}`)) missing.push(`${file}:${i + 1} ${m[1]}`);
      }
    });
  }
  t.same(missing, [], 'docs follow the tree: update the path where the file moved');
});

/** Whether `p` exists; a `*` matches within one path segment. */
function pathExists(p: string): boolean {
  if (!p.includes('*')) return existsSync(join(ROOT, p));
  if (p.includes('**')) return existsSync(join(ROOT, p.slice(0, p.indexOf('/**'))));
  const dir = dirname(p);
  if (dir.includes('*') || !existsSync(join(ROOT, dir))) return false;
  const re = new RegExp('^' + p.slice(dir.length + 1).replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*') + '$');
  return readdirSync(join(ROOT, dir)).some((name) => re.test(name));
}

function headingTexts(rel: string): string[] {
  return [...readFileSync(join(ROOT, rel), 'utf8').matchAll(/^#{1,6}\s+(.*)$/gm)].map((m) => m[1]!.replace(/`/g, '').trim());
}

t.test('docs/spec-coverage.md: its counts are current and the test files it names exist', async (t) => {
  const md = readFileSync(join(ROOT, 'docs/spec-coverage.md'), 'utf8');
  let rows = 0;
  let notApplicable = 0;
  let notBuilt = 0;
  let inTable = false;
  for (const line of md.split('\n')) {
    if (/^\| (Rule|Row|Status) \| Test \|$/.test(line)) {
      inTable = true;
      continue;
    }
    if (inTable && /^\|\s*-/.test(line)) continue;
    if (inTable && line.startsWith('|')) {
      rows++;
      const last = line.trim().replace(/^\||\|$/g, '').split(' | ').at(-1)!.trim();
      if (last.startsWith('n/a')) notApplicable++;
      else if (last.includes('NOT BUILT')) notBuilt++;
      continue;
    }
    inTable = false;
  }
  const stated = /\*\*(\d+)\*\* rows; \*\*(\d+)\*\* name the test that asserts them; \*\*(\d+)\*\* are\s+not applicable[^;]*; \*\*(\d+)\*\* is not built/.exec(md);
  t.ok(stated, 'the counts sentence is there');
  if (stated) {
    t.same(stated.slice(1).map(Number), [rows, rows - notApplicable - notBuilt, notApplicable, notBuilt], 'stated counts = counted rows');
  }

  // Abbreviations (`conf` = `agent/config/conformance.test.ts`) and paths named in backticks.
  const flat = md.replace(/\n/g, ' ');
  const named = new Set<string>([...flat.matchAll(/`\w+` =\s+`([^`]+)`/g)].map((m) => m[1]!));
  for (const m of md.matchAll(/`((?:[\w-]+\/)+[\w.-]+\.ts)`/g)) named.add(m[1]!);
  const missing = [...named].filter((p) => !existsSync(join(ROOT, 'test', p)) && !existsSync(join(ROOT, p)));
  t.ok(named.size > 30, `${named.size} test files named`);
  t.same(missing, [], 'every test file named exists under test/');
});
