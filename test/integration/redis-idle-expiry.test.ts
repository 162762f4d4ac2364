/**
 * Redis stays bounded under publisher-chosen addresses (id-cache-idle-expiry, docs/redis.md#memory), on the real Redis:
 * every key of an address — its IDs, their times, the sequence and the epoch marker — carries a TTL no longer than the
 * idle expiry; an address nobody uses vanishes from Redis entirely after it, without a cache loss being reported, while
 * an address in use keeps its IDs; with the expiry turned off (0) the keys carry none, as before.
 */
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { addressKeys, epochKey, tagSafe } from '../../src/cache/keys.js';
import { RedisIdCache } from '../../src/cache/redis-id-cache.js';
import type { EpochReport } from '../../src/cache/epochs.js';
import { services, uniqueName } from '../support/services.js';
import { sleep } from '../support/wait.js';

const admin = new Redis(services.redisUrl, { lazyConnect: false });
const prefixes: string[] = [];

afterAll(async () => {
  for (const p of prefixes) {
    const keys = await keysOf(p);
    if (keys.length > 0) await admin.del(...keys);
  }
  admin.disconnect();
});

async function keysOf(prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await admin.scan(cursor, 'MATCH', `${tagSafe(prefix)}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  // The process's liveness key is not an address's (the cache here has no owner: there is none).
  return found;
}

function cacheWith(idleExpiry: number): { cache: RedisIdCache; prefix: string; losses: EpochReport[] } {
  const prefix = uniqueName('idle');
  prefixes.push(prefix);
  const losses: EpochReport[] = [];
  const cache = new RedisIdCache({
    url: services.redisUrl,
    keyPrefix: prefix,
    size: 100,
    lease: 10_000,
    idleExpiry,
    addressIdleTimeout: idleExpiry > 0 ? idleExpiry / 4 : 600_000,
    lossWindow: 0,
    onLoss: (r) => losses.push(r),
  });
  return { cache, prefix, losses };
}

describe('id-cache-idle-expiry on the real Redis', () => {
  it('200 templated addresses used once: every key has a TTL within the idle expiry, and all of them are gone after it; an address in use keeps its IDs', async () => {
    const IDLE = 5000;
    const { cache, prefix, losses } = cacheWith(IDLE);
    try {
      const addresses = Array.from({ length: 200 }, (_, i) => `amqp://h:5672/%2F/exchange/x/dev.d${i}`);
      const reserved = await Promise.all(addresses.map((a) => cache.reserve(a, `id-${a}`, 't')));
      expect(reserved.every((r) => r.status === 'reserved')).toBe(true);
      await Promise.all(addresses.map((a) => cache.commit(a, `id-${a}`, 't')));
      await cache.commit('active', 'kept', 't');
      const keys = await keysOf(prefix);
      // ids, at, seq and the epoch marker of each address (the reservation keys went with the commit).
      expect(keys.length).toBeGreaterThanOrEqual(4 * addresses.length);
      const ttls = ((await admin.multi(keys.map((k) => ['pttl', k])).exec()) ?? []).map(([, v]) => Number(v));
      keys.forEach((k, i) => {
        expect(ttls[i], k).toBeGreaterThan(0);
        expect(ttls[i], k).toBeLessThanOrEqual(IDLE);
      });
      const one = addressKeys(prefix, addresses[0]!);
      expect(await admin.exists(one.ids, one.st, one.seq, epochKey(prefix, addresses[0]!))).toBe(4);

      // 'active' is used every half expiry; the 200 are not touched again.
      for (let i = 0; i < 3; i++) {
        await sleep(IDLE / 2 + 100);
        expect(await cache.reserve('active', 'kept', `r-${i}`)).toEqual({ status: 'duplicate' });
      }
      const left = await keysOf(prefix);
      const active: string[] = [...(Object.values(addressKeys(prefix, 'active')) as string[]), epochKey(prefix, 'active')];
      expect(left.filter((k) => !active.includes(k))).toEqual([]);
      expect(await cache.recorded('active', ['kept'])).toEqual([true]);

      // An address that comes back is a first contact: no loss reported, its old ID forgotten, a new one kept.
      expect(await cache.reserve(addresses[0]!, `id-${addresses[0]!}`, 't2')).toEqual({ status: 'reserved', possibleDuplicate: false });
      expect(losses.filter((l) => l.event === 'data-lost')).toEqual([]);
    } finally {
      await cache.close();
    }
  });

  it('turned off (0): the keys carry no TTL, as before the expiry existed', async () => {
    const { cache, prefix } = cacheWith(0);
    try {
      await cache.commit('orders', 'a', 't');
      const k = addressKeys(prefix, 'orders');
      for (const key of [k.ids, k.st, k.seq, epochKey(prefix, 'orders')]) expect(await admin.pttl(key), key).toBe(-1);
    } finally {
      await cache.close();
    }
  });
});
