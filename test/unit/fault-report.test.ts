/**
 * The fault suite's verdict (test/faults/report.ts): what arrived, under which IDs and flags, decides PASS or FAIL;
 * and so do the faults: fewer injected than planned, or a kill or close with less than a prefetch in flight, fail it.
 */
import { describe, expect, it } from 'vitest';
import { analyse, violations, type SentRecord } from '../faults/report.js';
import { DUPLICATE_ID_HEADER, POSSIBLE_DUPLICATE_HEADER, normalBody } from '../faults/stream.js';
import type { Received } from '../faults/harness-clients.js';
import { BROKEN_INJECTION, runFaultSchedule, type FaultOutcome, type StreamPublisher } from '../faults/stream-run.js';

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

  it('on a stream target, excuses a stamped message under a second flagged ID only after a cache loss', () => {
    const strictVerdict = (rec: SentRecord, target: Received[], cacheLossFaults: number) => {
      const r = analyse({ path: 'amqp-jetstream', seed: 1, faults: {}, cacheLossFaults, record: rec, target, deadLetter: [], durationMs: 0 });
      r.strict = { stored: target.length, distinctIds: target.length, idsTwice: 0 };
      return violations(r);
    };
    const stamped = [copy(1, 'stamp-a'), copy(1, 'stamp-b', true)];
    // Without a cache loss the stamp records hold: a second ID is the bridge's fault, flagged or not.
    expect(strictVerdict(record([[1, undefined]]), stamped, 0)).toEqual([
      '1 extra cop(ies) in the stream (flagged or not): the target\'s own deduplication should leave none',
      '1 message(s) stored under two IDs: the stream cannot tell those copies apart',
    ]);
    expect(strictVerdict(record([[1, undefined]]), stamped, 1)).toEqual([]);
    // A publisher ID travels with every copy: a second one is never excused.
    expect(strictVerdict(record([[1, 'pub-1']]), [copy(1, 'pub-1'), copy(1, 'stamp-b', true)], 1).length).toBeGreaterThan(0);
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

describe('fault-suite verdict: the faults planned', () => {
  const clean = record([[1, 'pub-1']]);
  const target = [copy(1, 'pub-1')];
  const report = (outcome: FaultOutcome, faults: Record<string, number>) =>
    violations(analyse({ path: 'p', seed: 1, faults, outcome, record: clean, target, deadLetter: [], durationMs: 0 }));

  it('passes a run that injected every planned fault with a prefetch in flight at each kill and close', () => {
    const outcome: FaultOutcome = {
      planned: { sigkill: 2, 'connection-close': 1, reload: 3 },
      injectionFailures: [],
      inFlightAtFault: [
        { kind: 'sigkill', inFlight: 512, threshold: 300, waitedMs: 40 },
        { kind: 'sigkill', inFlight: 300, threshold: 300, waitedMs: 40 },
        { kind: 'connection-close', inFlight: 700, threshold: 300, waitedMs: 90 },
      ],
    };
    expect(report(outcome, { sigkill: 2, 'connection-close': 1, reload: 3 })).toEqual([]);
  });

  it('fails a run whose injected faults fall short of the plan, naming each kind and why', () => {
    const outcome: FaultOutcome = {
      planned: { sigkill: 3, sigstop: 1, reload: 2 },
      injectionFailures: ['sigkill: injection broken on purpose (--break-injection)', 'sigkill: injection broken on purpose (--break-injection)', 'reload: 1 of 2 not applied (see the run\'s log)'],
      inFlightAtFault: [],
    };
    const v = report(outcome, { sigkill: 1, sigstop: 1, reload: 1 });
    expect(v).toEqual([
      'fault sigkill: 1 of 3 planned injected (injection broken on purpose (--break-injection))',
      "fault reload: 1 of 2 planned injected (1 of 2 not applied (see the run's log))",
    ]);
  });

  it('fails a run in which no fault took at all, though nothing was lost', () => {
    const v = report({ planned: { 'connection-close': 5 }, injectionFailures: [], inFlightAtFault: [] }, {});
    expect(v).toEqual(['fault connection-close: 0 of 5 planned injected']);
  });

  it("fails a kill or a close that fired with less than a prefetch's worth in flight", () => {
    const outcome: FaultOutcome = {
      planned: { sigkill: 2 },
      injectionFailures: [],
      inFlightAtFault: [
        { kind: 'sigkill', inFlight: 480, threshold: 300, waitedMs: 30 },
        { kind: 'sigkill', inFlight: 0, threshold: 300, waitedMs: 20_000 },
      ],
    };
    expect(report(outcome, { sigkill: 2 })).toEqual(["1 of 2 kill(s) and close(s) fired with less than a prefetch's worth in flight (sigkill 0 < 300)"]);
  });
});

describe('the fault schedule (test/faults/stream-run.ts runFaultSchedule)', () => {
  it('counts what took, plans every event, and with --break-injection records each failure of that kind', async () => {
    const stream = { published: 100, publishing: false, burst: () => undefined } as unknown as StreamPublisher;
    const injected: Record<string, number> = {};
    const outcome: FaultOutcome = { planned: {}, injectionFailures: [], inFlightAtFault: [] };
    const events = [
      { kind: 'sigkill', at: 0.1 },
      { kind: 'redis-restart', at: 0.2 },
      { kind: 'sigkill', at: 0.3 },
    ] as const;
    const fired: string[] = [];
    await runFaultSchedule(events, stream, 100, (kind) => (fired.push(kind), Promise.resolve(true)), {
      ensureRunning: () => Promise.resolve(),
      injected,
      outcome,
      breakInjection: 'sigkill',
      pauseMs: 0,
      log: () => undefined,
    });
    expect(fired).toEqual(['redis-restart']);
    expect(injected).toEqual({ 'redis-restart': 1 });
    expect(outcome.planned).toEqual({ sigkill: 2, 'redis-restart': 1 });
    expect(outcome.injectionFailures).toEqual([`sigkill: ${BROKEN_INJECTION}`, `sigkill: ${BROKEN_INJECTION}`]);
    const r = analyse({ path: 'p', seed: 1, faults: injected, outcome, record: record([]), target: [], deadLetter: [], durationMs: 0 });
    expect(violations(r)).toEqual([`fault sigkill: 0 of 2 planned injected (${BROKEN_INJECTION})`]);
  });
});
