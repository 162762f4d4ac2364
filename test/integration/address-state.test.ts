/**
 * What the Redis cache keeps in the process per address is bounded (issue 33, item 4; src/cache/epochs.ts): an
 * address no call used for addressIdleTimeout is forgotten when a new one comes, and what GET /readyz shows of the
 * flagged addresses is bounded however many there are (RedisIdCache.trust(max)). Forgetting loses nothing the cache
 * knows: a forgotten address's IDs are still duplicates, its marker is adopted again.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { RedisIdCache } from '../../src/cache/redis-id-cache.js';
import { tagSafe } from '../../src/cache/keys.js';
import { services, uniqueName } from '../support/services.js';

const prefix = uniqueName('addrstate');
const admin = new Redis(services.redisUrl);
const caches: RedisIdCache[] = [];

afterAll(async () => {
  await Promise.all(caches.map((c) => c.close()));
  const keys = await admin.keys(`${tagSafe(prefix)}:*`);
  if (keys.length > 0) await admin.del(...keys);
  admin.disconnect();
});

afterEach(() => {
  vi.useRealTimers();
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
