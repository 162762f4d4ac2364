/**
 * The counter invariant's checker (test/support/counter-invariant.ts) and the fault suite's use of it
 * (test/faults/counter-watch.ts): a sum that holds passes, one message short fails with a sentence naming the terms,
 * a target's own duplicate drop is not a term, and a run whose notes carry a break — or a process never scraped —
 * fails.
 */
import { describe, expect, it } from 'vitest';
import { counterInvariant, invariantBreaks } from '../support/counter-invariant.js';
import { COUNTER_NOTE, CounterWatch, SHORT_LIFE_MS, counterViolations } from '../faults/counter-watch.js';
import type { BridgeProcess } from '../support/bridge-process.js';

function scrape(received: number): string {
  return [
    '# TYPE bridge_messages_received_total counter',
    `bridge_messages_received_total{bridge="a"} ${received}`,
    '# TYPE bridge_messages_forwarded_total counter',
    'bridge_messages_forwarded_total{bridge="a"} 90',
    '# TYPE bridge_duplicates_dropped_total counter',
    'bridge_duplicates_dropped_total{bridge="a"} 3',
    'bridge_duplicates_dropped_total{bridge="a",where="target"} 7',
    '# TYPE bridge_messages_dead_lettered_total counter',
    'bridge_messages_dead_lettered_total{bridge="a",reason="unroutable"} 1',
    'bridge_messages_dead_lettered_total{bridge="a",reason="too-large"} 1',
    '# TYPE bridge_filtered_total counter',
    'bridge_filtered_total{bridge="a",outcome="skipped"} 2',
    '# TYPE bridge_messages_dropped_total counter',
    'bridge_messages_dropped_total{bridge="a",reason="qos0-overflow"} 1',
    '# TYPE bridge_messages_handed_back_total counter',
    'bridge_messages_handed_back_total{bridge="a",reason="session-end"} 1',
    '# TYPE bridge_in_flight_messages gauge',
    'bridge_in_flight_messages{bridge="a"} 1',
    '',
  ].join('\n');
}

describe('counter invariant', () => {
  it('holds when received is the sum of the terms (a target drop not among them), and names the terms when not', () => {
    expect(counterInvariant(scrape(100))).toEqual([
      { bridge: 'a', received: 100, accounted: 100, holds: true, terms: { forwarded: 90, duplicatesDropped: 3, deadLettered: 2, filtered: 2, dropped: 1, handedBack: 1, inFlight: 1 } },
    ]);
    expect(invariantBreaks(scrape(100))).toEqual([]);
    expect(invariantBreaks(scrape(101))).toEqual([expect.stringMatching(/^bridge 'a': received 101 but the terms add up to 100 \(.*"handedBack":1/)]);
  });

  it('fails a fault run whose notes carry a break or a process never scraped, and not one whose processes add up', () => {
    const watch = new CounterWatch();
    expect(watch.summary()).toBe(`${COUNTER_NOTE}0 of 0 process(es) add up at their last scrape`);
    expect(counterViolations({ notes: ['something else', watch.summary()] })).toEqual([]);
    const broken = `${COUNTER_NOTE}process 2: ${invariantBreaks(scrape(101))[0]!}`;
    expect(counterViolations({ notes: [watch.summary(), broken] })).toEqual([broken]);
    expect(counterViolations({ notes: [`${COUNTER_NOTE}process 1 was never scraped`] })).toHaveLength(1);
  });

  it('excuses a process that died before a scrape could reach it, never one that lived long enough, and not all of them', async () => {
    const fake = (logs: Record<string, unknown>[], exit: Promise<void>) => ({ logs, waitExit: () => exit }) as unknown as BridgeProcess;
    let exitLong!: () => void;
    const watch = new CounterWatch();
    // Died before its HTTP port opened (a crash right after start).
    watch.watch(fake([], Promise.resolve()));
    // Listened on a port nobody answers on for longer than SHORT_LIFE_MS: it could have been scraped and was not.
    watch.watch(fake([{ component: 'http', port: 9 }], new Promise<void>((r) => (exitLong = r))));
    await new Promise((r) => setTimeout(r, SHORT_LIFE_MS + 1500));
    exitLong();
    await new Promise((r) => setTimeout(r, 1200));
    expect(watch.violations()).toEqual([`${COUNTER_NOTE}process 2 was never scraped`, `${COUNTER_NOTE}no process of the run was ever scraped`]);
    expect(watch.summary()).toContain('process 1 exited before its HTTP port opened');
  });
});
