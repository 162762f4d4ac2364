import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Logger } from '../../src/shared/log.js';
import { describe, expect, it } from 'vitest';
import { MemoryIdCache, type MemoryIdCacheOptions } from '../../src/cache/memory-id-cache.js';
import { createIdCache } from '../../src/cache/create-id-cache.js';
import type { IdCacheConfig } from '../../src/config/types.js';
import { idCacheContract, type CacheOptions } from '../support/id-cache-contract.js';

/** A clock that moves only when told to. */
function fakeClock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_700_000_000_000;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

idCacheContract('memory', () => {
  const clock = fakeClock();
  let cache: MemoryIdCache | undefined;
  return {
    cache(options: CacheOptions = {}) {
      // One process holds one in-memory cache: every caller of a test shares it.
      cache ??= new MemoryIdCache({ size: 2000, lease: 200, ...options, now: clock.now });
      return cache;
    },
    async advance(ms) {
      clock.advance(ms);
    },
    async cleanup() {
      await cache?.close();
    },
  };
});

describe('MemoryIdCache', () => {
  function make(options: Partial<MemoryIdCacheOptions> = {}) {
    const clock = fakeClock();
    const cache = new MemoryIdCache({ size: 2000, lease: 200, now: clock.now, ...options });
    return { cache, clock };
  }

  it('keeps at most id-cache-size IDs per address', async () => {
    const { cache } = make({ size: 10 });
    for (let i = 0; i < 1000; i++) await cache.commit('orders', `id-${i}`, 't');
    expect(cache.sizes('orders').ids).toBe(10);
  });

  it('drops expired IDs lazily, with bounded work per call', async () => {
    const { cache, clock } = make({ size: 1000, ttl: 100, cleanupBatch: 50 });
    for (let i = 0; i < 500; i++) await cache.commit('orders', `id-${i}`, 't');
    // A commit keeps the address's keys for another ttl (commit-4.lua): at 120 they live, their first 500 IDs expired.
    clock.advance(60);
    await cache.commit('orders', 'fresh', 't');
    clock.advance(60);
    await cache.reserve('orders', 'probe', 'p');
    expect(cache.sizes('orders').ids).toBe(451);
    for (let i = 0; i < 9; i++) await cache.reserve('orders', `probe-${i}`, 'p');
    expect(cache.sizes('orders').ids).toBe(1);
    // Quiet for ttl after the last commit: the keys are gone, as in Redis.
    clock.advance(41);
    expect(cache.sizes('orders').ids).toBe(0);
  });

  it('does not grow with reservations that are never committed or released', async () => {
    const { cache, clock } = make({ lease: 200, markerRetention: 200 });
    for (let i = 0; i < 10_000; i++) await cache.reserve('orders', `id-${i}`, `t-${i}`);
    expect(cache.sizes('orders').reservations).toBe(10_000);
    clock.advance(300);
    // Each call cleans at most 100 expired reservations: they become markers (their owner may have sent them)...
    for (let i = 0; i < 100; i++) await cache.reserve('orders', `new-${i}`, `n-${i}`);
    expect(cache.sizes('orders')).toEqual({ ids: 0, reservations: 100, markers: 10_000 });
    // ...which are forgotten once their retention has passed.
    clock.advance(300);
    for (let i = 0; i < 101; i++) await cache.reserve('orders', `later-${i}`, `l-${i}`);
    const sizes = cache.sizes('orders');
    expect(sizes.reservations).toBe(101);
    expect(sizes.markers).toBe(100); // the 100 'new-*' reservations, now abandoned too
  });

  it('an abandoned reservation, once cleaned up, still makes the next reserve a possible duplicate', async () => {
    const { cache, clock } = make({ lease: 200 });
    await cache.reserve('orders', 'x', 't1');
    clock.advance(300);
    await cache.reserve('orders', 'y', 't2'); // cleans up x's reservation
    expect(cache.sizes('orders').reservations).toBe(1);
    expect(await cache.reserve('orders', 'x', 't3')).toEqual({ status: 'reserved', possibleDuplicate: true });
  });

  it('caps the number of uncertain markers per address', async () => {
    const { cache } = make({ maxMarkers: 5 });
    for (let i = 0; i < 20; i++) {
      await cache.reserve('orders', `id-${i}`, 't');
      await cache.release('orders', `id-${i}`, 't', true);
    }
    expect(cache.sizes('orders').markers).toBe(5);
    expect(await cache.reserve('orders', 'id-19', 'u')).toEqual({ status: 'reserved', possibleDuplicate: true });
    expect(await cache.reserve('orders', 'id-0', 'u')).toEqual({ status: 'reserved', possibleDuplicate: false });
  });

  it('forgets stamp records that see no write for the stamp ttl', async () => {
    const { cache, clock } = make({ stampTtl: 1000 });
    for (let i = 0; i < 50; i++) await cache.recordStamp('src', `fp-${i}`, `id-${i}`, 't');
    clock.advance(1500);
    await cache.recordStamp('src', 'fresh', 'id', 't');
    expect(cache.stampRecordCount()).toBe(1);
  });

  it('rejects calls after close', async () => {
    const { cache } = make();
    await cache.close();
    await expect(cache.reserve('orders', 'x', 't')).rejects.toThrow(/closed/);
  });
});

describe('createIdCache', () => {
  const config: IdCacheConfig = {
    persistIdCache: false,
    idCacheSize: 10,
    redis: { kind: 'standalone', url: 'redis://user:secret@127.0.0.1:6379' },
    minReplicasAcked: 0,
    minReplicasTimeout: 1000,
    lossWindow: 86_400_000,
    idCacheIdleExpiry: 172_800_000,
    keyPrefix: 'broker-bridge',
    reservationLease: 30_000,
    replicas: 1,
  };

  function capture(): { log: Logger; lines: Array<{ level: number; msg: string }> } {
    const lines: Array<{ level: number; msg: string }> = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(JSON.parse(chunk.toString('utf8')) as { level: number; msg: string });
        done();
      },
    });
    return { log: pino({ level: 'info' }, stream), lines };
  }

  it('builds the in-memory cache when persist-id-cache is false, and says so once at info (the start-up warning is config/warnings.ts\'s)', async () => {
    const { log, lines } = capture();
    const cache = createIdCache(config, log);
    expect(cache.kind).toBe('memory');
    await cache.commit('orders', 'x', 't');
    expect(await cache.reserve('orders', 'x', 'u')).toEqual({ status: 'duplicate' });
    await cache.close();
    await new Promise((r) => setImmediate(r));
    expect(lines.filter((l) => l.level === 40)).toEqual([]);
    const info = lines.find((l) => l.level === 30);
    expect(info?.msg).toMatch(/^duplicate-ID cache is in memory: it is lost on restart/);
    expect(JSON.stringify(lines)).not.toContain('secret');
  });
});
