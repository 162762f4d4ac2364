/**
 * The habit of small modules (docs/development.md), held: no hand-written file under src/ grows past MAX_LINES. Generated
 * code (src/**\/generated/: the selector parser Peggy writes) is left out, as it is of every size and duplication
 * figure about the code.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const MAX_LINES = 450;
const SRC = fileURLToPath(new URL('../../src/', import.meta.url));

function handWritten(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'generated' ? [] : handWritten(path);
    return /\.(ts|mts|mjs|lua)$/.test(e.name) ? [path] : [];
  });
}

describe('module size', () => {
  it(`no hand-written file under src/ is longer than ${MAX_LINES} lines`, () => {
    const files = handWritten(SRC);
    expect(files.length).toBeGreaterThan(50);
    const long = files
      .map((f) => ({ file: relative(SRC, f), lines: readFileSync(f, 'utf8').split('\n').length }))
      .filter((f) => f.lines > MAX_LINES);
    expect(long, 'split these into modules of one concept each').toEqual([]);
  });
});
