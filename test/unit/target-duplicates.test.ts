/**
 * A target that deduplicates by ID itself (NATS JetStream) reports a confirmed send whose message it already held
 * (TargetHandlers.onDuplicate): counted as bridge_duplicates_dropped_total{where="target"} beside the unchanged series
 * of the bridge's own drops, and not as settled without forwarding in the bridge's counters (it was forwarded).
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { until } from '../support/wait.js';

const msg = (id: string): BridgeMessage => ({ body: Buffer.from(id), properties: { persistent: true }, headers: { _AMQ_DUPL_ID: id } });

describe('duplicates dropped at the target', () => {
  it('counts them where="target", keeps the cache drops in their own series, and counts them as forwarded', async () => {
    const source = new FakeSource();
    const target = new FakeTarget();
    const metrics = new Metrics('test', { defaultMetrics: false });
    // The target already holds 'held' (as JetStream within its duplicate window): confirmed, reported as a duplicate.
    const send = target.send.bind(target);
    target.send = (m) => send(m).then(() => (m.headers._AMQ_DUPL_ID === 'held' ? target.handlers?.onDuplicate?.('held') : undefined));
    const session = new BridgeSession({ bridge: testBridgeConfig({ name: 'b' }), source, target, cache: new MemoryIdCache({ size: 100, lease: 1000 }), log: silentLogger, metrics, tokenPrefix: 'unit' });
    await session.open();
    source.deliver(msg('new'));
    source.deliver(msg('held'));
    await until('2 acked', () => source.acked.length === 2, { timeoutMs: 2000, everyMs: 5 });
    source.deliver(msg('new')); // the cache has it: dropped by the bridge, never sent
    await until('3 acked', () => source.acked.length === 3, { timeoutMs: 2000, everyMs: 5 });

    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['new', 'held']);
    const series = (await metrics.duplicates.get()).values.map((v) => [v.labels, v.value]);
    expect(series).toEqual(
      expect.arrayContaining([
        [{ bridge: 'b' }, 1],
        [{ bridge: 'b', where: 'target' }, 1],
      ]),
    );
    expect(series).toHaveLength(2);
    const counters = await metrics.countersOf('b');
    expect([counters.forwarded, counters.duplicatesDropped]).toEqual([2, 1]);
  });
});
