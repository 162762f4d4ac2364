/**
 * Issue 44 in the core, with fake endpoints: every received message counted once by how it was settled, or as handed
 * back when its session ended first (docs/operations.md#counters-that-add-up); the oldest held message's time, own or
 * arrival (src/core/session/held.ts) and carried across a reconnect (src/core/supervisor/holding.ts); who paused a
 * bridge and for how long (src/core/supervisor/pause-state.ts).
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { HoldingReader } from '../../src/core/supervisor/holding.js';
import { PauseState } from '../../src/core/supervisor/pause-state.js';
import { MessageRejectedError, TransientError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { counterInvariant } from '../support/counter-invariant.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { until } from '../support/wait.js';

const quick = { timeoutMs: 2000, everyMs: 5 };

function msg(i: number, timestamp?: number): BridgeMessage {
  return { body: Buffer.from(`m${i}`), properties: { persistent: true, ...(timestamp !== undefined ? { timestamp } : {}) }, headers: { _AMQ_DUPL_ID: `id-${i}` } };
}

function setup() {
  const source = new FakeSource();
  const target = new FakeTarget();
  const deadLetter = new FakeTarget('fake://dlq');
  const metrics = new Metrics('test', { defaultMetrics: false });
  const session = new BridgeSession({
    bridge: testBridgeConfig({ name: 'b', maxDeliveryAttempts: 1 }),
    source,
    target,
    deadLetter,
    cache: new MemoryIdCache({ size: 100, lease: 1000 }),
    log: silentLogger,
    metrics,
    tokenPrefix: 'unit',
  });
  return { source, target, metrics, session };
}

describe('counters that add up, in one session', () => {
  it('counts forwarded, duplicate and dead-lettered when acked; what a failed session leaves unacked as handed back, and nothing for it after', async () => {
    const { source, target, metrics, session } = setup();
    target.outcome = (m) => (m.headers._AMQ_DUPL_ID === 'id-3' ? new MessageRejectedError('unroutable', 'no route') : 'confirm');
    await session.open();
    source.deliver(msg(1));
    source.deliver(msg(2));
    source.deliver(msg(1));
    source.deliver(msg(3));
    await until('4 acked', () => source.acked.length === 4, quick);
    // Two more held at the target: in flight, the oldest from its own timestamp.
    target.outcome = () => 'hold';
    const old = Date.now() - 60_000;
    source.deliver(msg(4, old));
    source.deliver(msg(5));
    await until('2 sent', () => target.held.length === 2, quick);
    expect(session.held).toMatchObject({ messages: 2, oldestAt: old });
    // What a supervisor registers (src/core/supervisor.ts start): the in-flight gauge reads the session at the scrape.
    metrics.holdingFrom('b', session, () => ({ ...session.held, oldestAgeSeconds: 0 }));
    expect(counterInvariant(await metrics.registry.metrics())).toMatchObject([
      { bridge: 'b', received: 6, holds: true, terms: { forwarded: 2, duplicatesDropped: 1, deadLettered: 1, inFlight: 2 } },
    ]);

    source.handlers!.onLost(new TransientError('connection lost'));
    await session.finished;
    expect(session.held).toEqual({ messages: 0, bytes: 0, oldestAt: undefined });
    expect(session.oldestLeftAt).toBe(old);
    // Confirmations that come after the end ack nothing and count nothing.
    target.held.splice(0).forEach((confirm) => confirm());
    await new Promise((r) => setTimeout(r, 20));
    const [r] = counterInvariant(await metrics.registry.metrics());
    expect(r).toMatchObject({ received: 6, holds: true, terms: { forwarded: 2, duplicatesDropped: 1, deadLettered: 1, handedBack: 2, inFlight: 0 } });
    expect(source.acked).toHaveLength(4);
  });
});

describe('HoldingReader', () => {
  it('reads the session it holds; after a session ended with messages, carries the oldest until the bridge forwards', () => {
    const h = new HoldingReader();
    expect(h.read()).toEqual({ messages: 0, bytes: 0, oldestAgeSeconds: 0 });
    const now = 1_000_000;
    let held = { messages: 3, bytes: 30, oldestAt: now - 5000 as number | undefined };
    const s = { get held() { return held; }, oldestLeftAt: now - 5000 };
    h.sessionMade(s);
    expect(h.read(now)).toEqual({ messages: 3, bytes: 30, oldestAgeSeconds: 5 });
    held = { messages: 0, bytes: 0, oldestAt: undefined };
    h.sessionEnded(s);
    // Reconnecting: nothing held, the handed-back oldest still ages.
    expect(h.read(now + 10_000).oldestAgeSeconds).toBe(15);
    h.sessionMade({ held: { messages: 1, bytes: 1, oldestAt: now + 9000 }, oldestLeftAt: undefined });
    expect(h.read(now + 10_000).oldestAgeSeconds).toBe(15);
    h.forwarded();
    expect(h.read(now + 10_000).oldestAgeSeconds).toBe(1);
    // A message's own time ahead of the clock is no age.
    h.sessionMade({ held: { messages: 1, bytes: 1, oldestAt: now + 60_000 }, oldestLeftAt: undefined });
    expect(h.read(now).oldestAgeSeconds).toBe(0);
  });
});

describe('PauseState', () => {
  it('declared paused holds until a reload says running; an API pause or resume lasts until the next declaration', () => {
    const p = new PauseState('paused');
    expect([p.paused, p.info, p.declared]).toEqual([true, { by: 'config', lasts: 'declared' }, 'paused']);
    // Paused by the file, paused again through the API: still declared.
    p.command(true);
    expect(p.info).toEqual({ by: 'config', lasts: 'declared' });
    p.command(false);
    expect([p.paused, p.info, p.declared]).toEqual([false, null, 'paused']);
    p.declare('paused');
    expect(p.info).toEqual({ by: 'config', lasts: 'declared' });
    p.declare('running');
    expect([p.paused, p.info]).toEqual([false, null]);
    p.command(true);
    expect([p.paused, p.info, p.switch.paused]).toEqual([true, { by: 'api', lasts: 'until-restart' }, true]);
    // The file wins at a reload.
    p.declare('running');
    expect([p.paused, p.info]).toEqual([false, null]);
    expect(new PauseState('running').paused).toBe(false);
  });
});
