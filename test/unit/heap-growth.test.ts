/** The CLI's heap growth setting (src/shared/heap-growth.ts): set by default, left alone when the user chose. */
import { describe, expect, it } from 'vitest';
import { HEAP_GROWING_PERCENT, tuneHeapGrowth } from '../../src/shared/heap-growth.js';

function run(execArgv: string[], nodeOptions?: string): { result: string | undefined; set: string[] } {
  const set: string[] = [];
  const result = tuneHeapGrowth(execArgv, nodeOptions, (f) => set.push(f));
  return { result, set };
}

describe('tuneHeapGrowth', () => {
  it('sets --heap-growing-percent when the user gave no heap flag', () => {
    const flag = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
    expect(run([])).toEqual({ result: flag, set: [flag] });
    expect(run(['--enable-source-maps'], '--trace-warnings --stack-size=2000')).toEqual({ result: flag, set: [flag] });
  });

  it.each([
    [['--max-old-space-size=256'], undefined],
    [['--max_old_space_size=512'], undefined],
    [[], '--max-old-space-size=256'],
    [[], '--enable-source-maps --max-heap-size=300'],
    [['--heap-growing-percent=20'], undefined],
    [[], '--optimize-for-size'],
  ])('leaves the heap alone with %j and NODE_OPTIONS %j', (execArgv, nodeOptions) => {
    expect(run(execArgv, nodeOptions)).toEqual({ result: undefined, set: [] });
  });
});
