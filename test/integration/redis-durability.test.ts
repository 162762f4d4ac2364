/**
 * The Redis behind the cache, as operators run it (issue 9, start-up checks): real redis-server instances of the
 * test's own, started with the settings under test. A Redis that keeps nothing across a restart and one that may evict
 * the cache's keys are warned about; one whose CONFIG is disabled says the check was skipped; a write refused for
 * memory (OOM under noeviction) is a transient outage — the cache fails closed and works again once memory is freed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { RedisIdCache } from '../../src/cache/redis-id-cache.js';
import { TransientError } from '../../src/shared/errors.js';
import { OwnRedis } from '../faults/own-redis.js';
import { uniqueName } from '../support/services.js';

// Ports of this file's own instances (the fault suite uses 6390/6391, the machine's Redis 6379).
const BASE_PORT = Number(process.env.REDIS_DURABILITY_TEST_PORT ?? 6395);
const started: OwnRedis[] = [];
const caches: RedisIdCache[] = [];

async function redisWith(offset: number, args: string[]): Promise<OwnRedis> {
  const r = new OwnRedis(BASE_PORT + offset, args);
  started.push(r);
  await r.start();
  return r;
}

function cacheOn(r: OwnRedis): RedisIdCache {
  const c = new RedisIdCache({ url: r.url, keyPrefix: uniqueName('durability'), size: 100, lease: 1000, commandTimeout: 1000 });
  caches.push(c);
  return c;
}

afterAll(async () => {
  await Promise.allSettled(caches.map((c) => c.close()));
  await Promise.allSettled(started.map((r) => r.dispose()));
});

describe('what the bridge says about the Redis behind its cache', () => {
  it('with AOF on (the fault suite\'s setting): nothing to warn about', async () => {
    const r = await redisWith(0, []);
    expect(await cacheOn(r).durabilityFindings()).toEqual({ warnings: [] });
  });

  it('without persistence (appendonly no, no save points): a restart loses the cache', async () => {
    const r = await redisWith(1, ['--appendonly', 'no', '--save', '']);
    const { warnings, skipped } = await cacheOn(r).durabilityFindings();
    expect(skipped).toBeUndefined();
    expect(warnings).toEqual([
      `Redis at 127.0.0.1:${r.port} keeps no data across a restart (appendonly no, no save points): a Redis restart empties the duplicate-ID cache, and re-sent IDs then pass; turn on appendonly (or RDB snapshots)`,
    ]);
  });

  it('RDB snapshots alone count as persistence', async () => {
    const r = await redisWith(2, ['--appendonly', 'no', '--save', '60 1']);
    expect(await cacheOn(r).durabilityFindings()).toEqual({ warnings: [] });
  });

  it('maxmemory-policy allkeys-lru: it may evict the cache\'s keys', async () => {
    const r = await redisWith(3, ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru']);
    const { warnings } = await cacheOn(r).durabilityFindings();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/^Redis at 127\.0\.0\.1:\d+ has maxmemory-policy allkeys-lru: under memory pressure it evicts/);
  });

  it('CONFIG disabled (as on managed Redis): the check is skipped, and says so', async () => {
    const r = await redisWith(4, ['--rename-command', 'CONFIG', '']);
    const { warnings, skipped } = await cacheOn(r).durabilityFindings();
    expect(warnings).toEqual([]);
    expect(skipped).toMatch(new RegExp(`^Redis at 127\\.0\\.0\\.1:${r.port} does not allow CONFIG GET \\(.*\\): its persistence and eviction policy were not checked$`));
  });

  it('a write refused for memory (OOM under noeviction) is transient; the cache works again once memory is freed', async () => {
    const r = await redisWith(5, ['--maxmemory', '4mb', '--maxmemory-policy', 'noeviction']);
    const cache = cacheOn(r);
    await cache.commit('orders', 'before', 't0');
    const filler = new Redis(r.url);
    try {
      // Fill it up to its limit with a key of the test's own.
      const chunk = 'x'.repeat(64 * 1024);
      for (let i = 0; i < 200; i++) {
        const ok = await filler.append('filler', chunk).then(
          () => true,
          () => false,
        );
        if (!ok) break;
      }
      const refused = await cache.commit('orders', 'during', 't1').catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(TransientError);
      expect((refused as Error).message).toMatch(/OOM/);
      // Reads still answer: what was recorded before is still a duplicate.
      expect(await cache.reserve('orders', 'before', 't2')).toEqual({ status: 'duplicate' });

      await filler.del('filler');
      await cache.commit('orders', 'during', 't1');
      expect(await cache.reserve('orders', 'during', 't3')).toEqual({ status: 'duplicate' });
    } finally {
      filler.disconnect();
    }
  });
});
