import { describe, expect, it } from 'vitest';
import { SharedRead } from '../../src/core/shared-read.js';

describe('SharedRead', () => {
  it('serves an answer asked within the window to every caller of the same owner and key, and asks again after it', async () => {
    const shared = new SharedRead<number>(1000);
    const owner = {};
    let calls = 0;
    const read = () => Promise.resolve(++calls);
    const answers = await Promise.all([shared.get(owner, 'a', 10_000, read), shared.get(owner, 'a', 10_500, read), shared.get(owner, 'a', 10_999, read)]);
    expect(answers).toEqual([1, 1, 1]);
    expect(await shared.get(owner, 'a', 11_000, read)).toBe(2);
    // Another key, another owner: their own reads.
    expect(await shared.get(owner, 'b', 11_000, read)).toBe(3);
    expect(await shared.get({}, 'a', 11_000, read)).toBe(4);
    // A clock that went back (a test's made-up times, a step of the system clock) asks again.
    expect(await shared.get(owner, 'a', 5_000, read)).toBe(5);
  });

  it('shares a failure too: a cache that does not answer costs one read, not one per caller', async () => {
    const shared = new SharedRead<void>(1000);
    const owner = {};
    let calls = 0;
    const read = () => {
      calls += 1;
      return Promise.reject(new Error('no answer'));
    };
    const results = await Promise.allSettled([shared.get(owner, '', 0, read), shared.get(owner, '', 1, read)]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(calls).toBe(1);
  });
});
