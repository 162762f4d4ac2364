/**
 * The process-wide turns jobs are prepared in (src/core/prepare-turns.ts): the bound holds, every share keeps its
 * floor whatever its neighbours hold, free turns go round robin, a share's jobs start in the order offered; and
 * sessions that share a small bound still forward every message, in source order, each once.
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { ReserveResult } from '../../src/core/id-cache.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { PrepareTurns } from '../../src/core/prepare-turns.js';
import { BridgeSession } from '../../src/core/session.js';
import { silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { until } from '../support/wait.js';

describe('PrepareTurns', () => {
  it('bounds the turns taken, serves waiting shares round robin and starts each share in order', () => {
    const turns = new PrepareTurns(3, 1);
    const started: string[] = [];
    const a = turns.join<string>((x) => started.push(x));
    const b = turns.join<string>((x) => started.push(x));
    for (let i = 0; i < 5; i++) a.offer(`a${i}`);
    for (let i = 0; i < 5; i++) b.offer(`b${i}`);
    // a takes the three turns; b its floor of one, beyond the limit.
    expect(started).toEqual(['a0', 'a1', 'a2', 'b0']);
    expect(turns.inUse).toBe(4);
    a.done();
    // Back to the limit: nothing more starts.
    expect(started.length).toBe(4);
    a.done();
    // A turn is free: the ring's first (a, which waited first) takes it, and goes to the back of the ring.
    expect(started.slice(4)).toEqual(['a3']);
    b.done();
    // b fell below its floor: its next starts at once, without waiting for the ring.
    expect(started.slice(5)).toEqual(['b1']);
    a.done();
    // The ring's turn: b now.
    expect(started.slice(6)).toEqual(['b2']);
    b.done();
    b.done();
    expect(started).toEqual(['a0', 'a1', 'a2', 'b0', 'a3', 'b1', 'b2', 'a4', 'b3']);
    a.done();
    a.done();
    expect(started).toEqual(['a0', 'a1', 'a2', 'b0', 'a3', 'b1', 'b2', 'a4', 'b3', 'b4']);
    expect(a.queued + b.queued).toBe(0);
  });

  it('a share whose jobs never finish holds at most the limit: a neighbour still gets its floor, again and again', () => {
    const turns = new PrepareTurns(4, 1);
    const stuck = turns.join<number>(() => undefined);
    for (let i = 0; i < 100; i++) stuck.offer(i);
    const started: number[] = [];
    const other = turns.join<number>((x) => started.push(x));
    for (let i = 0; i < 10; i++) other.offer(i);
    for (let i = 0; i < 9; i++) other.done();
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(stuck.queued).toBe(96);
  });

  it('a closed share starts nothing more, and its place in the ring passes to the next', () => {
    const turns = new PrepareTurns(1, 1);
    const started: string[] = [];
    const a = turns.join<string>((x) => started.push(x));
    const b = turns.join<string>((x) => started.push(x));
    const c = turns.join<string>((x) => started.push(x));
    a.offer('a0');
    a.offer('a1');
    b.offer('b0');
    b.offer('b1');
    c.offer('c0');
    c.offer('c1');
    expect(started).toEqual(['a0', 'b0', 'c0']);
    a.close();
    a.done();
    b.done();
    c.done();
    expect(started).toEqual(['a0', 'b0', 'c0', 'b1', 'c1']);
    a.offer('a2');
    expect(started.length).toBe(5);
  });
});

function msg(id: string): BridgeMessage {
  return { body: Buffer.from(id), properties: { persistent: true }, headers: { _AMQ_DUPL_ID: id } };
}

describe('sessions sharing a small bound', () => {
  it('forward every message once, in source order, and never prepare more than the bound and their floors at once', async () => {
    let preparing = 0;
    let most = 0;
    // Reservations answer a little later, as Redis does: so that preparations overlap.
    class SlowCache extends MemoryIdCache {
      override async reserve(address: string, id: string, token: string): Promise<ReserveResult> {
        preparing += 1;
        most = Math.max(most, preparing);
        await new Promise((r) => setTimeout(r, 1));
        preparing -= 1;
        return super.reserve(address, id, token);
      }
    }
    const turns = new PrepareTurns(4, 1);
    const cache = new SlowCache({ size: 1000, lease: 5000 });
    const bridges = [0, 1, 2].map((n) => {
      const source = new FakeSource();
      const target = new FakeTarget();
      const session = new BridgeSession({ bridge: testBridgeConfig({ name: `b${n}`, prefetch: 100 }), source, target, cache, log: silentLogger, metrics: new Metrics(), tokenPrefix: `unit${n}`, turns });
      return { source, target, session };
    });
    for (const b of bridges) await b.session.open();
    for (let i = 0; i < 40; i++) for (const [n, b] of bridges.entries()) b.source.deliver(msg(`m${n}-${i}`));
    // A re-sent ID goes through its turn too, and is dropped once.
    bridges[0]!.source.deliver(msg('m0-0'));
    await until('all acked', () => bridges.every((b, n) => b.source.acked.length === (n === 0 ? 41 : 40)), { timeoutMs: 5000, everyMs: 5 });
    for (const [n, b] of bridges.entries()) {
      expect(b.target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(Array.from({ length: 40 }, (_, i) => `m${n}-${i}`));
    }
    expect(most).toBeLessThanOrEqual(4 + 3);
    expect(turns.inUse).toBe(0);
    for (const b of bridges) await b.session.drain(1000);
  });
});
