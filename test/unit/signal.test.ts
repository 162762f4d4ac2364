/** The one wake mechanism of the session's loops (src/shared/signal.ts). */
import { describe, expect, it } from 'vitest';
import { Signal } from '../../src/shared/signal.js';

const flush = () => new Promise((r) => setImmediate(r));

describe('Signal', () => {
  it('wakes every waiter at once', async () => {
    const signal = new Signal();
    const woken: number[] = [];
    void signal.wait().then(() => woken.push(1));
    void signal.wait(60_000).then(() => woken.push(2));
    await flush();
    expect(woken).toEqual([]);
    signal.wake();
    await flush();
    expect(woken).toEqual([1, 2]);
  });

  it('does not remember a wake with nobody waiting', async () => {
    const signal = new Signal();
    signal.wake();
    let woken = false;
    void signal.wait().then(() => (woken = true));
    await flush();
    expect(woken).toBe(false);
    signal.wake();
    await flush();
    expect(woken).toBe(true);
  });

  it('lets a waiter go after its timeout, and the others keep waiting', async () => {
    const signal = new Signal();
    let short = false;
    let long = false;
    void signal.wait(5).then(() => (short = true));
    void signal.wait().then(() => (long = true));
    await new Promise((r) => setTimeout(r, 30));
    expect([short, long]).toEqual([true, false]);
    signal.wake();
    await flush();
    expect(long).toBe(true);
  });
});
