/**
 * The filter stage of the session with fake endpoints (pure logic): a message the filter does not select is decided
 * before the duplicate-ID cache is asked anything, then skipped (acked, counted) or dead-lettered with reason
 * filter-miss. Against real brokers: test/integration/filter.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { IdCache } from '../../src/core/id-cache.js';
import type { BridgeConfig } from '../../src/config/types.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { compileSelector } from '../../src/routing/selector.js';
import { silentLogger } from '../../src/shared/log.js';
import { MessageRejectedError } from '../../src/shared/errors.js';
import { until } from '../support/wait.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';

const quick = { timeoutMs: 2000, everyMs: 5 };
const FILTER = "region = 'eu' AND amount > 100 AND JMSPriority >= 4";

/** An IdCache that counts every method call (any address): the filter must come before all of them. */
function countingCache(): { cache: IdCache; calls: string[] } {
  const inner = new MemoryIdCache({ size: 100, lease: 1000 });
  const calls: string[] = [];
  const cache = new Proxy(inner, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.push(String(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { cache, calls };
}

function msg(id: string, headers: Record<string, unknown>, priority?: number, withId = true): BridgeMessage {
  return {
    body: Buffer.from(id),
    properties: { persistent: true, ...(priority !== undefined ? { priority } : {}) },
    headers: { ...(withId ? { _AMQ_DUPL_ID: id } : {}), 'test-id': id, ...(headers as BridgeMessage['headers']) },
  };
}

function setup(over: Partial<BridgeConfig>, deadLetter = false) {
  const source = new FakeSource();
  const target = new FakeTarget();
  const dlq = deadLetter ? new FakeTarget('fake://dlq') : undefined;
  const { cache, calls } = countingCache();
  const metrics = new Metrics('test', { defaultMetrics: false });
  const session = new BridgeSession({
    bridge: testBridgeConfig({ name: 'f', filter: compileSelector(FILTER), ...over }),
    source,
    target,
    deadLetter: dlq,
    cache,
    log: silentLogger,
    metrics,
    tokenPrefix: 'unit',
  });
  return { source, target, dlq, calls, metrics, session };
}

const misses = [
  msg('wrong-region', { region: 'us', amount: 500 }, 5),
  msg('small', { region: 'eu', amount: 100 }, 5),
  msg('low-priority', { region: 'eu', amount: 500 }, 3),
  msg('no-amount', { region: 'eu' }, 5),
  msg('no-id-header', { region: 'uk', amount: 500 }, 5, false),
];

describe('the filter stage', () => {
  it('skip: a message the filter does not select is acked and counted, never sent, and the cache is asked nothing for it', async () => {
    const { source, target, calls, metrics, session } = setup({});
    await session.open();
    for (const m of misses) source.deliver(m);
    await until('5 acked', () => source.acked.length === 5, quick);
    expect(target.sent).toEqual([]);
    expect(calls).toEqual([]);
    const counters = await metrics.countersOf('f');
    expect(counters).toMatchObject({ filtered: 5, filteredDeadLettered: 0, forwarded: 0, deadLettered: 0 });
    // A selected message (no ID header: stamped) does ask the cache: the counting above would have seen a miss's calls.
    source.deliver(msg('match', { region: 'eu', amount: 101 }, 4, false));
    await until('6 acked', () => source.acked.length === 6, quick);
    expect(target.sent.map((m) => m.headers['test-id'])).toEqual(['match']);
    expect(calls).toEqual(expect.arrayContaining(['recordStamp', 'reserve', 'commitMany']));
    await session.drain(1000);
  });

  it('keeps source order around filtered messages and forwards exactly the selected ones', async () => {
    const { source, target, session } = setup({});
    await session.open();
    const all = [misses[0]!, msg('a', { region: 'eu', amount: 200 }, 9), misses[1]!, msg('b', { region: 'eu', amount: 150.5 }), misses[2]!];
    for (const m of all) source.deliver(m);
    await until('5 acked', () => source.acked.length === 5, quick);
    // JMSPriority defaults to 4 when the message has none: 'b' is selected.
    expect(target.sent.map((m) => m.headers['test-id'])).toEqual(['a', 'b']);
    await session.drain(1000);
  });

  it('dead-letter: moved with reason filter-miss and the filter in the detail, unchanged otherwise, then acked', async () => {
    const { source, target, dlq, calls, metrics, session } = setup({ filterMiss: 'dead-letter' }, true);
    await session.open();
    source.deliver(misses[0]!);
    source.deliver(misses[4]!);
    await until('2 acked', () => source.acked.length === 2, quick);
    expect(target.sent).toEqual([]);
    expect(calls).toEqual([]);
    expect(dlq!.sent.map((m) => m.headers['test-id'])).toEqual(['wrong-region', 'no-id-header']);
    expect(dlq!.sent[0]!.headers).toMatchObject({
      'x-bridge-dead-letter-reason': 'filter-miss',
      'x-bridge-dead-letter-detail': `not selected by the filter: ${FILTER}`,
      'x-bridge-name': 'f',
      'x-bridge-original-target': 'fake target',
      _AMQ_DUPL_ID: 'wrong-region',
      region: 'us',
      amount: 500,
    });
    // No duplicate ID was stamped on the one that came without.
    expect(dlq!.sent[1]!.headers).not.toHaveProperty('_AMQ_DUPL_ID');
    expect(dlq!.sent[0]!.body.toString()).toBe('wrong-region');
    expect(await metrics.countersOf('f')).toMatchObject({ filtered: 2, filteredDeadLettered: 2, deadLettered: 0 });
    await session.drain(1000);
  });

  it('dead-letter refused: the bridge stops instead of dropping the message, and acks nothing', async () => {
    const { source, dlq, session } = setup({ filterMiss: 'dead-letter' }, true);
    dlq!.outcome = () => new MessageRejectedError('unroutable', 'no route');
    await session.open();
    source.deliver(misses[0]!);
    const end = await session.finished;
    expect(end.kind).toBe('failed');
    expect(end.kind === 'failed' && end.error.message).toMatch(/refused it .*stopping the bridge instead of dropping it/);
    expect(source.acked).toEqual([]);
  });

  it('applies without duplicate detection too', async () => {
    const { source, target, calls, session } = setup({ useDuplicateDetection: false });
    await session.open();
    source.deliver(misses[1]!);
    source.deliver(msg('ok', { region: 'eu', amount: 1000 }, 4));
    await until('2 acked', () => source.acked.length === 2, quick);
    expect(target.sent.map((m) => m.headers['test-id'])).toEqual(['ok']);
    expect(calls).toEqual([]);
    await session.drain(1000);
  });
});
