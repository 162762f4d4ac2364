/**
 * The send loop's queue (SessionContext next/take) when a parked job comes back while the loop awaits another one's
 * preparation: CI once saw a re-sent ID dropped twice (501 drop lines for 500 re-sends, stomp-bridge.test.ts); taking
 * the wrong head acts on one job twice and leaves another unsent.
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { ReserveResult } from '../../src/core/id-cache.js';
import type { BridgeMessage, SourceDelivery } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { IllegalTake, SessionContext } from '../../src/core/session/context.js';
import { Job } from '../../src/core/session/job.js';
import { createLogger, silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { until } from '../support/wait.js';

function msg(id: string): BridgeMessage {
  return { body: Buffer.from(id), properties: { persistent: true }, headers: { _AMQ_DUPL_ID: id } };
}

function job(seq: number): Job {
  const delivery: SourceDelivery = { message: msg(`id-${seq}`), redelivered: false, seq };
  return new Job(delivery, 0, `unit.${seq}`);
}

describe('the send loop takes jobs in source order, each once', () => {
  it('take() of a job that is no longer next throws and leaves both queues as they were', () => {
    const ctx = new SessionContext(
      { bridge: testBridgeConfig({ name: 'take' }), source: new FakeSource(), target: new FakeTarget(), cache: new MemoryIdCache({ size: 10, lease: 1000 }), log: silentLogger, metrics: new Metrics(), tokenPrefix: 'unit' },
      () => undefined,
    );
    const [a, b, d] = [job(3), job(4), job(5)];
    ctx.admit(d);
    ctx.requeue([b]);
    expect(ctx.next()).toBe(b);
    // An older parked job comes back before the loop took b: it is next now.
    ctx.requeue([a]);
    expect(() => ctx.take(b)).toThrow(IllegalTake);
    const taken: Job[] = [];
    for (let j = ctx.next(); j !== undefined; j = ctx.next()) {
      ctx.take(j);
      taken.push(j);
    }
    expect(taken).toEqual([a, b, d]);
  });

  /**
   * Two re-sent IDs wait (parked) for their first copies; their reservations resolve as duplicates, the later one
   * first and the earlier one a few microtasks after it. For every gap, each re-send is dropped once.
   */
  it('two parked re-sends that come back close together are each dropped once, whatever the gap between them', async () => {
    for (let hops = 0; hops <= 12; hops++) {
      const lines: { msg: string; duplicateId?: string }[] = [];
      const log = createLogger('info', 'json', { write: (s: string) => void lines.push(JSON.parse(s) as { msg: string }) });
      let laterAnswered: () => void = () => undefined;
      const later = new Promise<void>((r) => (laterAnswered = r));
      class RaceCache extends MemoryIdCache {
        override async reserve(address: string, id: string, token: string): Promise<ReserveResult> {
          const result = await super.reserve(address, id, token);
          if (result.status !== 'duplicate') return result;
          if (token === 'unit.3') {
            await later;
            for (let i = 0; i < hops; i++) await Promise.resolve();
          } else if (token === 'unit.4') {
            laterAnswered();
          }
          return result;
        }
      }
      const source = new FakeSource();
      const target = new FakeTarget();
      target.outcome = () => 'hold';
      const session = new BridgeSession({ bridge: testBridgeConfig({ name: 'race' }), source, target, cache: new RaceCache({ size: 100, lease: 1000 }), log, metrics: new Metrics(), tokenPrefix: 'unit' });
      await session.open();
      // Tokens follow deliveries: unit.3 re-sends id-a, unit.4 re-sends id-b; both park while the first copies are held.
      for (const id of ['id-a', 'id-b', 'id-a', 'id-b']) source.deliver(msg(id));
      await until('2 sent', () => target.sent.length === 2, { timeoutMs: 2000, everyMs: 5 });
      target.outcome = () => 'confirm';
      target.held.splice(0).forEach((r) => r());
      source.deliver(msg('id-c'));
      await until(`all 5 acked (gap ${hops})`, () => source.acked.length === 5, { timeoutMs: 3000, everyMs: 5 });
      await session.drain(1000);
      const drops = lines.filter((l) => l.msg.startsWith('duplicate dropped')).map((l) => l.duplicateId);
      expect({ hops, drops: drops.sort(), sent: target.sent.map((m) => m.headers._AMQ_DUPL_ID) }).toEqual({ hops, drops: ['id-a', 'id-b'], sent: ['id-a', 'id-b', 'id-c'] });
    }
  });
});
