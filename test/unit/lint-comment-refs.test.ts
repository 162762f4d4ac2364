/**
 * scripts/lint-comment-refs.mjs (part of `npm run lint`): a comment that names a file or a section that does not
 * exist fails the lint, with the place and what is wrong; one that names what exists passes.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

const SCRIPT = new URL('../../scripts/lint-comment-refs.mjs', import.meta.url).pathname;
const run = promisify(execFile);
let dir: string | undefined;

function tree(files: Record<string, string>): string {
  dir = mkdtempSync(join(tmpdir(), 'lint-refs-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

async function lint(root: string): Promise<{ code: number; stderr: string; stdout: string }> {
  try {
    const { stdout } = await run(process.execPath, [SCRIPT], { env: { ...process.env, LINT_ROOT: root } });
    return { code: 0, stderr: '', stdout };
  } catch (err) {
    const e = err as { code: number; stderr: string; stdout: string };
    return { code: e.code, stderr: e.stderr, stdout: e.stdout };
  }
}

afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('lint-comment-refs', () => {
  const doc = '# Design\n\n## 7. The session\n\n### 7.2 The gate\n';

  it('passes comments whose paths and sections exist', async () => {
    const root = tree({
      'docs/design.md': doc,
      'src/core/a.ts': '/** See ./b.ts, src/core/b.js and docs/design.md §7, §7.2 (JMS 1.1 §3.8.1 is not ours). */\nexport const a = 1;\n',
      'src/core/b.ts': '// docs/design.md#72-the-gate\nexport const b = 2;\n',
    });
    expect(await lint(root)).toMatchObject({ code: 0, stderr: '' });
  });

  it('fails on a missing file, a missing section, a missing anchor and a § that cites nothing, naming each place', async () => {
    const root = tree({
      'docs/design.md': doc,
      'src/core/a.ts': [
        '/**',
        ' * The worker lives in ./worker.ts (DESIGN §3).',
        ' * See docs/design.md §8 and docs/design.md#no-such-heading.',
        ' */',
        'export const a = "./not-a-comment.ts";',
        '',
      ].join('\n'),
      'src/cache/x.lua': '-- see ../../docs/missing.md\nreturn 1\n',
    });
    const { code, stderr } = await lint(root);
    expect(code).toBe(1);
    expect(stderr).toContain('src/core/a.ts:2: names ./worker.ts, which does not exist');
    expect(stderr).toContain('src/core/a.ts:2: a § that names no file of this repository');
    expect(stderr).toContain('src/core/a.ts:3: cites docs/design.md §8, a section docs/design.md does not have');
    expect(stderr).toContain('src/core/a.ts:3: names docs/design.md#no-such-heading: no heading with that anchor');
    expect(stderr).toContain('src/cache/x.lua:1: names ../../docs/missing.md, which does not exist');
    expect(stderr).not.toContain('not-a-comment');
  });

  it('reads the comments after a template literal with a substitution, and counts what it read', async () => {
    // A raw scan reads everything after the first `${` as template text: the bad references below went unseen.
    const root = tree({
      'docs/design.md': doc,
      'src/core/a.ts': [
        'const who = "x";',
        'export const a = `hello ${who} and ${`nested ${who}`}`;',
        '// See ./gone.ts (and docs/design.md §7.2, which exists).',
        'export const b = () => `${a}`; /* DESIGN §10 */',
        '',
      ].join('\n'),
      'scripts/b.mjs': 'export const c = `${1}`;\n// docs/nowhere.md\n',
    });
    const { code, stderr, stdout } = await lint(root);
    expect(code).toBe(1);
    expect(stderr).toContain('src/core/a.ts:3: names ./gone.ts, which does not exist');
    expect(stderr).toContain('src/core/a.ts:4: a § that names no file of this repository');
    expect(stderr).toContain('scripts/b.mjs:2: names docs/nowhere.md, which does not exist');
    expect(stderr).not.toContain('§7.2');
    expect(stdout).toContain('comments checked: src/ 2, scripts/ 1');
  });

  it('fails on the retired word "worker" in a comment of src/, and leaves test/ alone', async () => {
    const root = tree({
      'docs/design.md': doc,
      'src/core/a.ts': 'const t = `${1}`;\n/** Acked once the worker settled it. */\nexport const a = t;\n',
      'test/unit/b.test.ts': '// vitest starts a fork worker per file\nexport const b = 1;\n',
    });
    const { code, stderr } = await lint(root);
    expect(code).toBe(1);
    expect(stderr).toContain("src/core/a.ts:2: the retired word 'worker' (write the session (docs/design.md §7))");
    expect(stderr).not.toContain('test/unit/b.test.ts');
  });
});
