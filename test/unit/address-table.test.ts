/** The bound on a templated bridge's addresses (src/core/address-table.ts): at most max at once, idle ones forgotten. */
import { describe, expect, it } from 'vitest';
import { AddressTable } from '../../src/core/address-table.js';

describe('AddressTable', () => {
  it('admits up to max addresses, refuses one more, and frees the place of one unused for the idle time', () => {
    let now = 0;
    const t = new AddressTable(2, 100, () => now);
    expect([t.use('a'), t.use('b'), t.use('a'), t.use('c')]).toEqual([true, true, true, false]);
    now = 60;
    expect(t.use('a')).toBe(true);
    now = 150;
    // b (last used at 0) is idle; a (60) is not.
    expect(t.use('c')).toBe(true);
    expect(t.use('b')).toBe(false);
    expect(t.size).toBe(2);
  });

  it('forgetting looks only at the idle end: 100,000 addresses cost what they forget', () => {
    let now = 0;
    const t = new AddressTable(200_000, 10, () => now);
    for (let i = 0; i < 100_000; i++) t.use(`a${i}`);
    now = 5;
    t.use('a99999');
    expect(t.forgetIdle(5)).toBe(0);
    now = 11;
    expect(t.forgetIdle()).toBe(99_999);
    expect(t.size).toBe(1);
  });
});
