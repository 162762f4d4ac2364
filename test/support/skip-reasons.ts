/**
 * A vitest reporter beside the default one: after the summary, one line per skipped test with why it was skipped, so
 * that a skip is never only a number. The reason is the note of `ctx.skip(note)` (the way a test here skips); a test
 * skipped statically (`it.skip`, `skipIf`, `runIf`) shows its full name, which should say the condition. Tests left
 * out by a name filter (`-t`) are not listed.
 */
import { relative } from 'node:path';
import type { Reporter, TestModule, Vitest } from 'vitest/node';

export default class SkipReasons implements Reporter {
  private filtered = false;
  private root = process.cwd();

  onInit(vitest: Vitest): void {
    this.filtered = vitest.config.testNamePattern !== undefined;
    this.root = vitest.config.root;
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const lines: string[] = [];
    for (const module of testModules) {
      for (const test of module.children.allTests('skipped')) {
        const result = test.result();
        const note = result.state === 'skipped' ? result.note : undefined;
        if (note === undefined && (this.filtered || test.options.mode === 'todo')) continue;
        lines.push(`  skipped: ${relative(this.root, module.moduleId)} > ${test.fullName}: ${note ?? 'skipped statically (its name says when)'}`);
      }
    }
    if (lines.length > 0) process.stdout.write(`\n${lines.length} skipped test${lines.length === 1 ? '' : 's'}, and why:\n${lines.join('\n')}\n`);
  }
}
