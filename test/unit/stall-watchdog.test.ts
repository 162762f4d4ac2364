/**
 * The stall watchdog (src/core/supervisor/stall-watchdog.ts): work waiting in the source counts only from a depth
 * read asked after the last progress, since the depth is read every 5 s and a stall-timeout may be shorter
 * (test/integration/target-blocked.test.ts fired on a reading taken mid-flow, after the flow had ended).
 */
import { describe, expect, it } from 'vitest';
import { StallWatchdog } from '../../src/core/supervisor/stall-watchdog.js';

const idle = { conditions: { paused: false, blocked: false, cacheDown: false, targetFullSince: undefined }, inFlight: 0 };

describe('stall watchdog', () => {
  it('does not take a depth read before the last forward as work waiting', () => {
    const w = new StallWatchdog('b', 2000, 0);
    // Read at 1,000 ms: 1,138 waiting; the flow then forwards them all, the last at 1,500 ms.
    const depth = { value: 1138, readAt: 1000 };
    w.progressed(1500);
    for (let t = 1600; t <= 6000; t += 100) expect(w.check(idle, depth, false, t)).toBeUndefined();
  });

  it('stalls on a depth read asked after the last progress that stays above 0 for stall-timeout', () => {
    const w = new StallWatchdog('b', 2000, 0);
    w.progressed(1500);
    const depth = { value: 40, readAt: 1600 };
    expect(w.check(idle, depth, false, 1600)).toBeUndefined();
    expect(w.check(idle, depth, false, 3400)).toBeUndefined();
    // Quiet since the last progress (1,500 ms), not since the read.
    const stall = w.check(idle, depth, false, 3500);
    expect(stall).toMatchObject({ inFlight: 0, waiting: 40 });
  });

  it('stalls with messages in flight whatever the depth says', () => {
    const w = new StallWatchdog('b', 2000, 0);
    expect(w.check({ ...idle, inFlight: 3 }, { value: undefined, readAt: undefined }, false, 2100)).toMatchObject({ inFlight: 3, waiting: 0 });
  });
});
