// Part of `npm run lint`: every file path and every section a code comment names must exist, so that comments cite the
// repository (docs/design.md §N, ./session/target-gate.ts) and never a document or module that is not there.
//
// What it reads: the comments of src/, test/, bench/ and scripts/ (TypeScript and JavaScript through TypeScript's
// parser, Lua `--`, shell `#`), and prints how many per folder. What it checks in them:
// - a relative path (./x.ts, ../y/z.lua) resolves from the file's folder; a path from the repository root (src/…,
//   test/…, bench/…, docs/…, scripts/…, examples/…, .ci/…) resolves from the root; `.js` may name the `.ts` file
//   (ESM import style); a `*` in a path needs only its folder; a `#anchor` after a Markdown path must be a heading there;
// - `§N` or `§N.M` cites a section of the Markdown file named just before it (`docs/design.md §7.2`, also
//   `docs/design.md §3, §4.3`), which must have a heading numbered so; a § after a specification's name and version
//   (`JMS 1.1 §3.8.1`) is someone else's and left alone; any other § is an error (it cites nothing that can be checked).
// Exit 1 with one line per dangling reference (file:line: what), else 0.
import { readdirSync, readFileSync, existsSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

// LINT_ROOT: another tree to check (the linter's own test points it at a tree of its own).
const root = process.env.LINT_ROOT ? resolve(process.env.LINT_ROOT) : resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ROOTS = ['src', 'test', 'bench', 'scripts', '.ci'];
const SKIP_DIRS = new Set(['node_modules', 'generated', 'dist', 'fixtures']);
const ROOT_PREFIX = /^(?:src|test|bench|docs|scripts|examples|\.ci)\//;

function files(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return SKIP_DIRS.has(e.name) ? [] : files(p);
    return /\.(ts|mts|mjs|cjs|lua|sh)$/.test(e.name) || e.name === 'run' ? [p] : [];
  });
}

/**
 * The comments of a file, each with the line it starts on (1-based). TypeScript and JavaScript through the parser: the
 * comments before and after every node and token of the tree (a raw scan loses track after a template literal's first
 * `${…}` and reads the rest of the file as template text, so it found no comment there).
 */
function comments(file, text) {
  if (/\.(ts|mts|mjs|cjs)$/.test(file)) {
    const kind = /\.(mjs|cjs)$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, kind);
    const found = new Map();
    const add = (ranges) => {
      for (const r of ranges ?? []) if (!found.has(r.pos)) found.set(r.pos, text.slice(r.pos, r.end));
    };
    const visit = (node) => {
      add(ts.getLeadingCommentRanges(text, node.pos));
      add(ts.getTrailingCommentRanges(text, node.end));
      for (const child of node.getChildren(source)) visit(child);
    };
    visit(source);
    const lineStarts = source.getLineStarts();
    return [...found]
      .sort(([a], [b]) => a - b)
      .map(([pos, body]) => ({ line: ts.computeLineAndCharacterOfPosition(lineStarts, pos).line + 1, text: body }));
  }
  const marker = file.endsWith('.lua') ? /--(.*)$/ : /(?:^|\s)#(?!!)(.*)$/;
  const out = [];
  let inBlock = false;
  text.split('\n').forEach((line, i) => {
    if (file.endsWith('.lua')) {
      if (line.includes('--[[')) inBlock = true;
      if (inBlock) {
        out.push({ line: i + 1, text: line });
        if (line.includes(']]')) inBlock = false;
        return;
      }
    }
    const m = marker.exec(line);
    if (m) out.push({ line: i + 1, text: m[1] });
  });
  return out;
}

const slug = (heading) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

const headingCache = new Map();
function headings(mdFile) {
  if (!headingCache.has(mdFile)) {
    const lines = existsSync(mdFile) ? readFileSync(mdFile, 'utf8').split('\n') : [];
    headingCache.set(
      mdFile,
      lines.filter((l) => /^#{1,6}\s/.test(l)).map((l) => l.replace(/^#{1,6}\s+/, '')),
    );
  }
  return headingCache.get(mdFile);
}

function hasSection(mdFile, section) {
  const re = new RegExp(`^${section.replace(/\./g, '\\.')}(?:\\.?\\s|\\.?$)`);
  return headings(mdFile).some((h) => re.test(h));
}

function resolvePath(file, ref) {
  const [path, anchor] = ref.split('#');
  const target = path.includes('*') ? dirname(path.slice(0, path.indexOf('*') + 1)) : path;
  // A path that starts with a root folder's name may still be relative (src/cache/ names its scripts/ folder so).
  const bases = ROOT_PREFIX.test(ref) ? [dirname(file), root] : [dirname(file)];
  const candidates = bases.flatMap((base) => {
    const full = resolve(base, target);
    return [full, full.replace(/\.js$/, '.ts'), full.replace(/\.mjs$/, '.mts')];
  });
  const found = candidates.find((c) => existsSync(c));
  if (!found) return `names ${ref}, which does not exist`;
  if (!relative(root, found).split('/')[0] || relative(root, found).startsWith('..')) return `names ${ref}, outside the repository`;
  if (anchor && found.endsWith('.md') && !headings(found).some((h) => slug(h) === anchor)) return `names ${ref}: no heading with that anchor`;
  if (anchor === undefined && path.endsWith('/') && !statSync(found).isDirectory()) return `names ${ref}, which is not a folder`;
  return undefined;
}

const PATH = /(?<![\w@:/.-])((?:\.\.?\/)+[\w@.*/-]*[\w*/]|(?:src|test|bench|docs|scripts|examples|\.ci)\/[\w@.*/-]*[\w*/])(#[\w-]+)?/g;
const CITED_SECTIONS = /(docs\/[\w./-]+\.md)((?:(?:,\s*|\s+and\s+|\s+)§\d+(?:\.\d+)*)+)/g;
const FOREIGN_SECTION = /[A-Z][\w-]*(?: [\w.-]+)? \d+(?:\.\d+)* §\d+(?:\.\d+)*/g;

// A word the code no longer uses for what it meant: the core's pipeline is the session (docs/design.md §7), and a
// comment in src/ that still says "worker" sends its reader looking for a module that is not there.
const RETIRED = [{ word: /\bworkers?\b/gi, under: 'src/', instead: 'the session (docs/design.md §7)' }];

const self = fileURLToPath(import.meta.url);
const problems = [];
/** Comments read per top folder, printed at the end: a lint that reads fewer comments than there are says so. */
const checked = new Map();
for (const file of ROOTS.flatMap((d) => files(join(root, d))).filter((f) => f !== self)) {
  const text = readFileSync(file, 'utf8');
  const where = relative(root, file);
  const found = comments(file, text);
  const top = where.split('/')[0];
  checked.set(top, (checked.get(top) ?? 0) + found.length);
  for (const c of found) {
    const body = c.text;
    const lineOf = (index) => c.line + (body.slice(0, index).match(/\n/g)?.length ?? 0);
    for (const r of RETIRED.filter((x) => where.startsWith(x.under))) {
      for (const m of body.matchAll(r.word)) problems.push(`${where}:${lineOf(m.index)}: the retired word '${m[0]}' (write ${r.instead})`);
    }
    for (const m of body.matchAll(PATH)) {
      const ref = m[1].replace(/[.,;:)]+$/, '') + (m[2] ?? '');
      // `./` or `../` alone, or a glob of files the comment talks about in general, are not references.
      if (/^\.\.?\/?$/.test(ref) || /^\.\.?\/\*/.test(ref)) continue;
      const problem = resolvePath(file, ref);
      if (problem) problems.push(`${where}:${lineOf(m.index)}: ${problem}`);
    }
    const cited = new Set();
    for (const m of body.matchAll(CITED_SECTIONS)) {
      const md = resolve(root, m[1]);
      for (const s of m[2].matchAll(/§(\d+(?:\.\d+)*)/g)) {
        const at = m.index + m[1].length + s.index;
        cited.add(at);
        if (!existsSync(md)) problems.push(`${where}:${lineOf(at)}: cites ${m[1]} §${s[1]}, and ${m[1]} does not exist`);
        else if (!hasSection(md, s[1])) problems.push(`${where}:${lineOf(at)}: cites ${m[1]} §${s[1]}, a section ${m[1]} does not have`);
      }
    }
    for (const m of body.matchAll(FOREIGN_SECTION)) cited.add(m.index + m[0].indexOf('§'));
    for (const m of body.matchAll(/§/g)) {
      if (!cited.has(m.index)) problems.push(`${where}:${lineOf(m.index)}: a § that names no file of this repository (write docs/design.md §N)`);
    }
  }
}
console.log(`lint-comment-refs: comments checked: ${[...checked].map(([top, n]) => `${top}/ ${n}`).join(', ')}`);
for (const p of problems) console.error(p);
if (problems.length > 0) {
  console.error(`lint-comment-refs: ${problems.length} comment reference(s) that do not resolve`);
  process.exit(1);
}
