/**
 * The fault suite's verdict (test/faults/report.ts): what arrived, under which IDs and flags, decides PASS or FAIL.
 */
import { describe, expect, it } from 'vitest';
import { analyse, violations, type SentRecord } from '../faults/report.js';
import { DUPLICATE_ID_HEADER, POSSIBLE_DUPLICATE_HEADER, normalBody } from '../faults/stream.js';
import type { Received } from '../faults/harness-clients.js';

const RUN = 'unit';

function record(sent: [number, string | undefined][], resends: number[] = [], uncertain: number[] = []): SentRecord {
  return {
    sent: new Map(sent),
    resends: new Map(resends.map((s) => [s, 1])),
    poison: new Map(),
    uncertain: new Set(uncertain),
    identical: { sent: 0, uncertain: 0 },
  };
}

function copy(seq: number, id: string, flagged = false): Received {
  return { body: normalBody(seq, RUN), headers: { [DUPLICATE_ID_HEADER]: id, ...(flagged ? { [POSSIBLE_DUPLICATE_HEADER]: 'true' } : {}) } };
}

function verdict(rec: SentRecord, target: Received[], cacheLossFaults = 0) {
  const r = analyse({ path: 'p', seed: 1, faults: {}, cacheLossFaults, record: rec, target, deadLetter: [], durationMs: 0 });
  return { r, v: violations(r) };
}

describe('fault-suite verdict', () => {
  it('fails a message that arrived under two IDs with both copies unflagged', () => {
    const { r, v } = verdict(record([[1, undefined]]), [copy(1, 'stamp-a'), copy(1, 'stamp-b')]);
    expect(r.underTwoIds).toBe(1);
    expect(r.underTwoIdsUnflagged).toBe(1);
    expect(v.some((s) => s.includes('under two different IDs'))).toBe(true);
  });

  it('passes a message under two IDs when every copy but one is flagged', () => {
    const { r, v } = verdict(record([[1, undefined]]), [copy(1, 'stamp-a'), copy(1, 'stamp-b', true)]);
    expect(r.underTwoIdsFlagged).toBe(1);
    expect(v).toEqual([]);
  });

  it('allows two unflagged IDs only for a message without publisher ID that the harness published twice', () => {
    expect(verdict(record([[1, undefined]], [], [1]), [copy(1, 'stamp-a'), copy(1, 'stamp-b')]).v).toEqual([]);
    // A publisher ID is the same on both source copies: a second ID is the bridge's doing, re-published or not.
    const withId = verdict(record([[1, 'pub-1']], [], [1]), [copy(1, 'pub-1'), copy(1, 'stamp-b')]);
    expect(withId.r.underTwoIdsUnflagged).toBe(1);
    expect(withId.v.length).toBeGreaterThan(0);
  });

  it('counts re-sent IDs that passed; unflagged ones fail unless the cache was lost during the run', () => {
    const target = [copy(1, 'pub-1'), copy(1, 'pub-1'), copy(2, 'pub-2'), copy(2, 'pub-2', true)];
    const rec = record(
      [
        [1, 'pub-1'],
        [2, 'pub-2'],
      ],
      [1, 2],
    );
    const without = verdict(rec, target);
    expect(without.r.resentPassed).toBe(2);
    expect(without.r.resentPassedUnflagged).toBe(1);
    expect(without.v).toEqual([expect.stringContaining('without the x-bridge-possible-duplicate flag') as string]);
    expect(verdict(rec, target, 1).v).toEqual([]);
  });
});
