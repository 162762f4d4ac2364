/**
 * Every relative link of README.md and docs/*.md resolves: `[text](path)` names a file or folder that exists (relative
 * to the linking file), and `[text](path#anchor)` / `[text](#anchor)` an anchor that the target file's headings give,
 * computed as GitHub does (lowercase, punctuation dropped except '-' and '_', spaces to '-', a repeated heading gets
 * '-1', '-2', …). Links to http(s):// and mailto: are not followed, and nothing inside fenced code blocks or inline
 * code counts. Each docs page also starts with its `# Title` and a line linking back to the README.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withoutFences } from '../support/markdown.js';

const root = resolve(import.meta.dirname, '../..');
const docsDir = resolve(root, 'docs');
const pages = [resolve(root, 'README.md'), ...readdirSync(docsDir).filter((f) => f.endsWith('.md')).sort().map((f) => resolve(docsDir, f))];

/** Inline code spans blanked out the same way (a span does not cross a blank line). */
function withoutInlineCode(text: string): string {
  return text.replace(/(`+)((?:(?!\n\s*\n)[^`])+?)\1(?!`)/g, (m) => m.replace(/[^\n]/g, ' '));
}

/** A heading's text as GitHub renders it: inline code, emphasis and links reduced to their text. */
function headingText(raw: string): string {
  return raw
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/(\*\*|\*)(\S(?:.*?\S)?)\1/g, '$2')
    .replace(/(?<!\w)(__|_)(\S(?:.*?\S)?)\1(?!\w)/g, '$2');
}

/** GitHub's slug of a heading (github-slugger): lowercase, keep letters, marks, digits, '_', '-' and spaces; spaces → '-'. */
function githubSlug(text: string): string {
  return headingText(text)
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a markdown file's headings (ATX), duplicates numbered as GitHub does, plus explicit `<a id|name>`. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of withoutFences(text).split('\n')) {
    const heading = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (heading !== null) {
      const base = githubSlug(heading[1] ?? '');
      let slug = base;
      while (anchors.has(slug)) {
        const n = (seen.get(base) ?? 0) + 1;
        seen.set(base, n);
        slug = `${base}-${n}`;
      }
      anchors.add(slug);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1] ?? '');
  }
  return anchors;
}

interface Link {
  line: number;
  text: string;
  target: string;
}

/** Inline links and images `[text](target "title")`, and reference definitions `[ref]: target`, outside code. */
function linksOf(text: string): Link[] {
  // Matched on the text without code, reported as written (the blanking keeps every offset).
  const clean = withoutInlineCode(withoutFences(text));
  const lineAt = (offset: number) => clean.slice(0, offset).split('\n').length;
  const links: Link[] = [];
  const inline = /!?\[((?:[^[\]]|\[[^\]]*\])*)\]\(\s*(<[^>]*>|[^\s)]*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/g;
  for (const m of clean.matchAll(inline)) {
    const written = text.slice(m.index, m.index + m[0].length).replace(/\s+/g, ' ');
    links.push({ line: lineAt(m.index), text: written, target: (m[2] ?? '').replace(/^<|>$/g, '') });
  }
  for (const m of clean.matchAll(/^ {0,3}\[([^\]]+)\]:\s*(\S+)/gm)) {
    links.push({ line: lineAt(m.index), text: text.slice(m.index, m.index + m[0].length), target: m[2] ?? '' });
  }
  return links.sort((a, b) => a.line - b.line);
}

const anchorCache = new Map<string, Set<string>>();

function anchorsOfFile(file: string): Set<string> {
  let anchors = anchorCache.get(file);
  if (anchors === undefined) {
    anchors = anchorsOf(readFileSync(file, 'utf8'));
    anchorCache.set(file, anchors);
  }
  return anchors;
}

/** Why a link does not resolve from `file`, or undefined when it does (or is not ours to check). */
function brokenLink(file: string, target: string): string | undefined {
  if (/^(https?:|mailto:)/i.test(target)) return undefined;
  if (target === '') return 'empty link target';
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return `unexpected scheme in '${target}' (only http, https and mailto links may leave the repository)`;
  const hash = target.indexOf('#');
  const path = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const dest = path === '' ? file : path.startsWith('/') ? resolve(root, `.${path}`) : resolve(dirname(file), path);
  const shown = relative(root, dest) || '.';
  if (!existsSync(dest)) return `${shown} does not exist`;
  if (anchor === undefined) return undefined;
  if (anchor === '') return `empty anchor after '#'`;
  if (!statSync(dest).isFile()) return `${shown} is a folder; an anchor needs a file`;
  if (!dest.endsWith('.md')) {
    // A source file: GitHub's line anchors (#L10, #L10-L20) only, within the file.
    const lines = /^L(\d+)(?:-L(\d+))?$/.exec(anchor);
    if (lines === null) return `'#${anchor}' is not a line anchor (#L<n>) of ${shown}`;
    const count = readFileSync(dest, 'utf8').split('\n').length;
    return Number(lines[2] ?? lines[1]) > count ? `${shown} has only ${count} lines` : undefined;
  }
  const anchors = anchorsOfFile(dest);
  if (anchors.has(anchor)) return undefined;
  const close = [...anchors].filter((a) => a.includes(anchor) || anchor.includes(a)).slice(0, 3);
  return `no heading in ${shown} has the anchor '#${anchor}'${close.length > 0 ? ` (close: ${close.map((a) => `#${a}`).join(', ')})` : ''}`;
}

describe('GitHub-style anchors', () => {
  it('are computed as GitHub computes them', () => {
    expect(githubSlug('AMQP ↔ STOMP mapping')).toBe('amqp--stomp-mapping');
    expect(githubSlug('`broker-bridge check`')).toBe('broker-bridge-check');
    expect(githubSlug('Text or binary (STOMP)')).toBe('text-or-binary-stomp');
    expect(githubSlug("The cache's Redis under faults")).toBe('the-caches-redis-under-faults');
    expect(githubSlug('Faults (`npm run test:faults`)')).toBe('faults-npm-run-testfaults');
    expect(githubSlug('snake_case **bold** [link](x.md)')).toBe('snake_case-bold-link');
    expect([...anchorsOf('# A\n## Notes\n```\n## Not a heading\n```\n## Notes\n### Notes\n')]).toEqual(['a', 'notes', 'notes-1', 'notes-2']);
  });

  it('finds links outside code only, across line breaks too', () => {
    const links = linksOf('see [one](a.md)\n`[not](x.md)`\n```\n[not](y.md)\n```\n[two\nlines](b.md#c "title")\n[ref]: c.md\n');
    expect(links).toEqual([
      { line: 1, text: '[one](a.md)', target: 'a.md' },
      { line: 6, text: '[two lines](b.md#c "title")', target: 'b.md#c' },
      { line: 8, text: '[ref]: c.md', target: 'c.md' },
    ]);
  });
});

describe('links of README.md and docs/*.md', () => {
  it('covers the README and the docs pages', () => {
    expect(pages.map((p) => relative(root, p))).toEqual(expect.arrayContaining(['README.md', 'docs/delivery.md', 'docs/mapping.md']));
    expect(pages.length).toBeGreaterThanOrEqual(9);
  });

  it.each(pages.map((p) => [relative(root, p), p]))('%s: every relative link and anchor resolves', (name, file) => {
    const links = linksOf(readFileSync(file, 'utf8'));
    const broken = links.flatMap((l) => {
      const why = brokenLink(file, l.target);
      return why === undefined ? [] : [`${name}:${l.line}: ${l.text}: ${why}`];
    });
    expect(broken, `broken links:\n${broken.join('\n')}`).toEqual([]);
    if (name !== 'README.md') expect(links.length, `${name} has no links at all`).toBeGreaterThan(0);
  });

  it.each(pages.filter((p) => dirname(p) === docsDir).map((p) => [relative(root, p), p]))(
    '%s starts with a # title and a line linking back to the README',
    (name, file) => {
      const [title, blank, back] = readFileSync(file, 'utf8').split('\n');
      expect(title, `${name}:1`).toMatch(/^# \S/);
      expect(blank, `${name}:2`).toBe('');
      expect(back, `${name}:3`).toMatch(/\]\(\.\.\/README\.md(#[^)]*)?\)/);
    },
  );
});
