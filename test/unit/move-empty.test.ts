/**
 * sourceEmpty (src/service/move-empty.ts): how `move --until-empty` decides, without a pause between two looks, that a
 * source whose broker tells its depth is empty — 0, a barrier, 0 again, and nothing delivered or in flight meanwhile.
 */
import { describe, expect, it } from 'vitest';
import { sourceEmpty, type MoveWatch } from '../../src/service/move-empty.js';

/** A source whose depth answers come from `depths`, one per call; `onBarrier` runs while the barrier is answered. */
function source(depths: number[], onBarrier: () => void = () => undefined, failBarrier = false) {
  const calls: string[] = [];
  return {
    calls,
    depth: () => {
      calls.push('depth');
      const d = depths.shift();
      return d === undefined ? Promise.reject(new Error('connection lost')) : Promise.resolve(d);
    },
    ackBarrier: () => {
      calls.push('barrier');
      onBarrier();
      return failBarrier ? Promise.reject(new Error('connection lost')) : Promise.resolve();
    },
  };
}

function watch(): MoveWatch & { deliveries: number; flight: number } {
  const w = { deliveries: 0, flight: 0, delivered: () => w.deliveries, inFlight: () => w.flight };
  return w;
}

describe('move --until-empty: sourceEmpty', () => {
  it('0, the barrier, 0 again with nothing delivered: empty, in one look (depth, barrier, depth)', async () => {
    const s = source([0, 0]);
    expect(await sourceEmpty(s, watch())).toEqual({ empty: true, depth: 0 });
    expect(s.calls).toEqual(['depth', 'barrier', 'depth']);
  });

  it('messages ready: not empty, and no barrier asked; the depth is given for the progress total', async () => {
    const s = source([42]);
    expect(await sourceEmpty(s, watch())).toEqual({ empty: false, depth: 42 });
    expect(s.calls).toEqual(['depth']);
  });

  it('a delivery that was on the wire when the broker said 0 (it arrives before the barrier answers): not empty', async () => {
    const w = watch();
    const s = source([0, 0], () => {
      w.deliveries += 1;
      w.flight += 1;
    });
    expect((await sourceEmpty(s, w)).empty).toBe(false);
  });

  it('a delivery settled before the barrier answered (counted, though nothing is in flight): not empty', async () => {
    const w = watch();
    const s = source([0, 0], () => {
      w.deliveries += 1;
    });
    expect((await sourceEmpty(s, w)).empty).toBe(false);
  });

  it('a message published after the first answer (ready at the second): not empty', async () => {
    expect((await sourceEmpty(source([0, 1]), watch())).empty).toBe(false);
  });

  it('a broker that cannot be asked, or a barrier that fails: not known empty, never a rejection', async () => {
    expect(await sourceEmpty(source([]), watch())).toEqual({ empty: false });
    expect((await sourceEmpty(source([0, 0], () => undefined, true), watch())).empty).toBe(false);
  });
});
