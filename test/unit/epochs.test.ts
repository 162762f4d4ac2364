/**
 * What a changed epoch means (src/cache/epochs.ts), with a marker store in memory standing in for epoch-1.lua (pure
 * logic; the Redis side is shown in test/integration/redis-durability.test.ts and redis-topologies.test.ts).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Epochs, type EpochReport, type EpochState } from '../../src/cache/epochs.js';

const HOUR = 3_600_000;

/** A marker per name, as epoch-1.lua keeps it: "<generation>:<flag-until>", with the server's run_id beside it. */
function store() {
  const markers = new Map<string, string>();
  let server = 'server-a';
  let calls = 0;
  const mark = (name: string, generation: string, window: number, extend: boolean): Promise<EpochState> => {
    calls += 1;
    const now = Date.now();
    let value = markers.get(name);
    const created = value === undefined;
    if (value === undefined) value = `${generation}:${now + window}`;
    else if (extend) value = `${value.slice(0, value.lastIndexOf(':'))}:${Math.max(Number(value.slice(value.lastIndexOf(':') + 1)), now + window)}`;
    markers.set(name, value);
    return Promise.resolve({ value, server, now, created });
  };
  return {
    mark,
    markers,
    current: (name: string) => `${markers.get(name) ?? ''}|${server}`,
    setServer: (s: string) => (server = s),
    calls: () => calls,
  };
}

function epochs(s: ReturnType<typeof store>, window = 24 * HOUR, noHistory = 5 * 60_000) {
  const reports: EpochReport[] = [];
  return { e: new Epochs(window, noHistory, s.mark, (r) => reports.push(r)), reports };
}

describe('epochs', () => {
  it('first contact without a marker: no-history, flagged for the short window only', async () => {
    const s = store();
    const { e, reports } = epochs(s);
    await e.settle('orders', '', s.current('orders'));
    expect(reports.map((r) => r.event)).toEqual(['no-history']);
    expect(e.vouchesFor('orders')).toBe(false);
    expect(reports[0]!.flagUntil - Date.now()).toBeLessThanOrEqual(5 * 60_000);
    expect(e.untrusted().map((u) => u.reason)).toEqual(['no-history']);
  });

  it('first contact with an old marker: nothing to report, vouched for', async () => {
    const s = store();
    s.markers.set('orders', `g1:${Date.now() - 1000}`);
    const { e, reports } = epochs(s);
    await e.settle('orders', '', s.current('orders'));
    expect(reports).toEqual([]);
    expect(e.vouchesFor('orders')).toBe(true);
    expect(e.seen('orders')).toBe(`${s.markers.get('orders')}|server-a`);
  });

  it('a marker gone: data-lost, once for concurrent calls, full window, kept in the new marker', async () => {
    const s = store();
    s.markers.set('orders', `g1:${Date.now() - 1000}`);
    const { e, reports } = epochs(s);
    await e.settle('orders', '', s.current('orders'));
    const seen = e.seen('orders');
    s.markers.delete('orders');
    const before = s.calls();
    await Promise.all([1, 2, 3].map(() => e.settle('orders', seen, s.current('orders'))));
    expect(s.calls() - before).toBe(1);
    expect(reports.map((r) => r.event)).toEqual(['data-lost']);
    expect(e.vouchesFor('orders')).toBe(false);
    expect(Number(s.markers.get('orders')!.split(':')[1]) - Date.now()).toBeGreaterThan(23 * HOUR);
    // A process that starts later inherits the window, reported as after-loss, without a report of its own.
    const later = epochs(s);
    await later.e.settle('orders', '', s.current('orders'));
    expect(later.reports).toEqual([]);
    expect(later.e.untrusted().map((u) => u.reason)).toEqual(['after-loss']);
  });

  it('another server (restart, failover, migration): server-changed, the marker window extended', async () => {
    const s = store();
    s.markers.set('orders', `g1:${Date.now() - 1000}`);
    const { e, reports } = epochs(s);
    await e.settle('orders', '', s.current('orders'));
    const seen = e.seen('orders');
    s.setServer('server-b');
    await e.settle('orders', seen, s.current('orders'));
    expect(reports.map((r) => r.event)).toEqual(['server-changed']);
    expect(s.markers.get('orders')!.startsWith('g1:')).toBe(true);
    expect(e.vouchesFor('orders')).toBe(false);
  });

  it('another generation (another process found the loss first): a loss for this one too', async () => {
    const s = store();
    s.markers.set('orders', `g1:${Date.now() - 1000}`);
    const { e, reports } = epochs(s);
    await e.settle('orders', '', s.current('orders'));
    const seen = e.seen('orders');
    s.markers.set('orders', `g2:${Date.now() + HOUR}`);
    await e.settle('orders', seen, s.current('orders'));
    expect(reports.map((r) => r.event)).toEqual(['data-lost']);
  });

  it('a call whose news another call already settled just goes again', async () => {
    const s = store();
    const { e } = epochs(s);
    await e.settle('orders', '', s.current('orders'));
    const calls = s.calls();
    await e.settle('orders', 'something older', s.current('orders'));
    expect(s.calls()).toBe(calls);
  });
});

describe('epochs: names unused for the idle time are forgotten (DESIGN §10: per-address state is bounded)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('keeps the names in use, forgets the idle ones when a new name comes, and learns a forgotten one again as the marker says', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(10 * HOUR);
    const s = store();
    const reports: EpochReport[] = [];
    const e = new Epochs(24 * HOUR, 5 * 60_000, s.mark, (r) => reports.push(r), 60_000);
    for (let i = 0; i < 1000; i++) await e.settle(`a${i}`, '', s.current(`a${i}`));
    expect(e.size).toBe(1000);
    vi.setSystemTime(10 * HOUR + 30_000);
    e.seen('a7');
    vi.setSystemTime(10 * HOUR + 61_000);
    await e.settle('new', '', s.current('new'));
    // a7 was asked about 31 s ago: kept; the 999 others were not for 61 s: forgotten.
    expect(e.size).toBe(2);
    expect(e.seen('a7')).not.toBe('');
    expect(e.seen('a8')).toBe('');
    // Learnt again: the marker it left is adopted, no report (not a loss), flagged as long as the marker says.
    const before = reports.length;
    await e.settle('a8', '', s.current('a8'));
    expect(reports.length).toBe(before);
    expect(e.seen('a8')).toBe(`${s.markers.get('a8')}|server-a`);
  });
});
