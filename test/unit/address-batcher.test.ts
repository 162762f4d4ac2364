/**
 * The address batcher's own logic (src/cache/address-batcher.ts) with a fake send: chunks, the in-flight limit, and how
 * a group added with addAll() settles. The scripts it feeds are tested against Redis in test/integration.
 */
import { describe, expect, it } from 'vitest';
import { AddressBatcher, type BatchItem } from '../../src/cache/address-batcher.js';
import { sleep } from '../support/wait.js';

/** A batcher whose calls wait until the test answers them, one by one, in the order they were sent. */
function held() {
  const calls: { address: string; items: BatchItem<string>[]; answer: (err?: Error) => void }[] = [];
  const batcher = new AddressBatcher<string>(
    (address, items) =>
      new Promise<void>((resolve, reject) => {
        calls.push({
          address,
          items,
          answer: (err) => {
            if (err) return reject(err);
            for (const item of items) item.resolve(`ok ${item.id}`);
            resolve();
          },
        });
      }),
  );
  return { batcher, calls };
}

const pairs = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ id: `id-${from + i}`, token: `t-${from + i}` }));

describe('AddressBatcher', () => {
  it('sends a group in chunks of at most 200, two at a time, and resolves it once every chunk answered', async () => {
    const { batcher, calls } = held();
    let settled: string | undefined;
    void batcher.addAll('a', pairs(450)).then(
      () => (settled = 'resolved'),
      () => (settled = 'rejected'),
    );
    await sleep(5);
    expect(calls.map((c) => c.items.length)).toEqual([200, 200]);
    calls[0]!.answer();
    await sleep(5);
    expect(calls.map((c) => c.items.length)).toEqual([200, 200, 50]);
    expect(calls[2]!.items[0]!.id).toBe('id-400');
    calls[2]!.answer();
    await sleep(5);
    expect(settled).toBeUndefined();
    calls[1]!.answer();
    await sleep(5);
    expect(settled).toBe('resolved');
  });

  it('rejects a group with the first chunk that fails, and a chunk answered later does not resolve it', async () => {
    const { batcher, calls } = held();
    const outcome = batcher.addAll('a', pairs(300)).then(
      () => 'resolved',
      (err: Error) => err.message,
    );
    await sleep(5);
    calls[1]!.answer(new Error('script error'));
    calls[0]!.answer();
    expect(await outcome).toBe('script error');
  });

  it('gathers single calls and a group made in one tick into one call, each single call with its own answer', async () => {
    const { batcher, calls } = held();
    const one = batcher.add('a', { id: 'x', token: 't' });
    const group = batcher.addAll('a', pairs(3));
    const other = batcher.add('b', { id: 'y', token: 't' });
    await sleep(5);
    expect(calls.map((c) => [c.address, c.items.map((i) => i.id)])).toEqual([
      ['a', ['x', 'id-0', 'id-1', 'id-2']],
      ['b', ['y']],
    ]);
    for (const c of calls) c.answer();
    expect(await one).toBe('ok x');
    expect(await other).toBe('ok y');
    await expect(group).resolves.toBeUndefined();
    await expect(batcher.addAll('a', [])).resolves.toBeUndefined();
  });
});
