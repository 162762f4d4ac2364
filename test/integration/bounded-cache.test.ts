/**
 * The Redis cache stays bounded whatever publishers send (issue 33, items 3 and 4):
 * - an ID's length does not set the cache's size (src/core/id-cache.ts idCacheKey): 2,000 IDs of 1 MiB each, reserved
 *   and committed at one address (id-cache-size 2000), take about what 2,000 IDs of 50 bytes take — each is kept by its
 *   SHA-256 — where before each was kept whole, twice (the ZSET and the HASH: ~4 GiB for this address). Redis's own
 *   MEMORY USAGE of the address's keys is the measure; a re-sent long ID is still a duplicate;
 * - what the cache keeps in the process per address (src/cache/epochs.ts) forgets an address no call used for
 *   addressIdleTimeout when a new one comes, and what GET /readyz shows of the flagged addresses is bounded however many
 *   there are (RedisIdCache.trust(max)). Forgetting loses nothing the cache knows: a forgotten address's IDs are still
 *   duplicates, its marker is adopted again.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { RedisIdCache } from '../../src/cache/redis-id-cache.js';
import { addressKeys, tagSafe } from '../../src/cache/keys.js';
import { MAX_CACHED_ID_BYTES } from '../../src/core/id-cache.js';
import { services, uniqueName } from '../support/services.js';

const SIZE = 2000;
const prefix = uniqueName('bounded');
const admin = new Redis(services.redisUrl);
const caches: RedisIdCache[] = [];

afterEach(() => {
  vi.useRealTimers();
});

afterAll(async () => {
  await Promise.all(caches.map((c) => c.close()));
  const keys = await admin.keys(`${tagSafe(prefix)}:*`);
  if (keys.length > 0) await admin.del(...keys);
  admin.disconnect();
});

/** Bytes Redis reports for an address's ID keys (the ZSET of IDs and the HASH of their commit times). */
async function memoryOf(address: string): Promise<number> {
  const k = addressKeys(prefix, address);
  let total = 0;
  for (const key of [k.ids, k.st]) total += Number(await admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) || 0;
  return total;
}

/** Records `count` IDs made by `idOf` at `address`, in bursts as a session would. */
async function record(cache: RedisIdCache, address: string, count: number, idOf: (i: number) => string): Promise<void> {
  for (let i = 0; i < count; i += 100) {
    const burst = Array.from({ length: Math.min(100, count - i) }, (_, j) => ({ id: idOf(i + j), token: `t.${i + j}` }));
    const reserved = await Promise.all(burst.map((b) => cache.reserve(address, b.id, b.token)));
    expect(reserved.every((r) => r.status === 'reserved')).toBe(true);
    await cache.commitMany(address, burst);
  }
}

describe('IDs of any length, a bounded cache', () => {
  it('2,000 IDs of 1 MiB take what 2,000 short IDs take (each at most 128 bytes of ID), and a re-sent one is still a duplicate', async () => {
    const cache = new RedisIdCache({ url: services.redisUrl, keyPrefix: prefix, size: SIZE, lease: 30_000 });
    caches.push(cache);
    const MiB = 1024 * 1024;
    const body = 'x'.repeat(MiB - 16);
    const long = (i: number) => `${String(i).padStart(15, '0')}:${body}`;
    const short = (i: number) => `short-${String(i).padStart(44, '0')}`;

    await record(cache, 'queue/long', SIZE, long);
    await record(cache, 'queue/short', SIZE, short);
    const longBytes = await memoryOf('queue/long');
    const shortBytes = await memoryOf('queue/short');
    console.log(
      `Redis MEMORY USAGE of one address's ID keys, ${SIZE} IDs: 1 MiB each ${longBytes} bytes (${(longBytes / SIZE).toFixed(0)} per ID), 50 bytes each ${shortBytes} bytes (${(shortBytes / SIZE).toFixed(0)} per ID)`,
    );
    // Each ID is at most 128 bytes in each of the two keys, plus Redis's per-entry overhead (~100 bytes a ZSET entry,
    // ~30 a HASH field, and the commit time): far below the 2 GiB one copy of these IDs would take.
    expect(longBytes).toBeLessThan(SIZE * (2 * MAX_CACHED_ID_BYTES + 256));
    expect(longBytes).toBeLessThan(shortBytes * 1.5);

    // What is stored is the key, never the ID; the ID still finds itself.
    const members = await admin.zrange(addressKeys(prefix, 'queue/long').ids, '0', '4');
    expect(members.every((m) => m.startsWith('sha256:') && m.length === 50)).toBe(true);
    expect(await cache.reserve('queue/long', long(7), 'again.7')).toEqual({ status: 'duplicate' });
    expect(await cache.recorded('queue/long', [long(7), long(SIZE + 1)])).toEqual([true, false]);
  });
});

describe('per-address state of the Redis cache in the process', () => {
  it('lists at most `max` flagged addresses and counts them all; forgets idle addresses when a new one comes; a forgotten one still knows its IDs', async () => {
    // The process's clock is held (Redis keeps its own), so that only the step below makes the addresses idle.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now());
    const cache = new RedisIdCache({ url: services.redisUrl, keyPrefix: prefix, size: 10, lease: 30_000, addressIdleTimeout: 500 });
    caches.push(cache);
    // A first contact with an address that has no marker flags it for a while (no-history): 150 of them.
    for (let i = 0; i < 150; i++) {
      const address = `queue/a${i}`;
      expect(await cache.reserve(address, `id-${i}`, `t.${i}`)).toMatchObject({ status: 'reserved' });
      await cache.commit(address, `id-${i}`, `t.${i}`);
    }
    const before = cache.trust(100);
    expect(before.flagging).toHaveLength(100);
    expect(before.flaggingAddresses).toBe(150);

    vi.setSystemTime(Date.now() + 700);
    await cache.reserve('queue/new', 'id-new', 't.new');
    expect(cache.trust().flaggingAddresses).toBe(1);

    // Forgotten by the process, not by the cache: the ID is a duplicate, the marker the first contact made adopted.
    expect(await cache.reserve('queue/a7', 'id-7', 'again.7')).toEqual({ status: 'duplicate' });
    expect(cache.trust().flagging.map((f) => f.address).sort()).toEqual(['queue/a7', 'queue/new']);
  });
});
