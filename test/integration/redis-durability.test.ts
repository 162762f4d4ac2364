/**
 * The Redis behind the cache, as operators run it (issue 9, start-up checks): real redis-server instances of the
 * test's own, started with the settings under test. A Redis that keeps nothing across a restart and one that may evict
 * the cache's keys are warned about; one whose CONFIG is disabled says the check was skipped; a write refused for
 * memory (OOM under noeviction) is a transient outage — the cache fails closed and works again once memory is freed.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { RedisIdCache, type RedisIdCacheOptions } from '../../src/cache/redis-id-cache.js';
import type { EpochReport } from '../../src/cache/epochs.js';
import { TransientError } from '../../src/shared/errors.js';
import { OwnRedis } from '../faults/own-redis.js';
import { uniqueName } from '../support/services.js';
import { sleep } from '../support/wait.js';

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

function cacheOn(r: OwnRedis, extra: Partial<RedisIdCacheOptions> = {}): RedisIdCache {
  const c = new RedisIdCache({ url: r.url, keyPrefix: uniqueName('durability'), size: 100, lease: 1000, commandTimeout: 1000, ...extra });
  caches.push(c);
  return c;
}

/** A cache whose log lines and loss reports the test reads. */
function watchedCacheOn(r: OwnRedis, extra: Partial<RedisIdCacheOptions> = {}): { cache: RedisIdCache; lines: { level: number; msg: string }[]; losses: EpochReport[] } {
  const lines: { level: number; msg: string }[] = [];
  const losses: EpochReport[] = [];
  const log = pino({ level: 'info' }, new Writable({ write(chunk: Buffer, _enc, done) { lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string }); done(); } }));
  const cache = cacheOn(r, { log, onLoss: (l) => losses.push(l), ...extra });
  return { cache, lines, losses };
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

describe('a cache that lost its data is noticed, and what it can no longer vouch for is flagged', () => {
  const ERROR = 50;
  const WARN = 40;

  it('first contact with an empty Redis: one warning (a new deployment cannot be told from a loss), flagged for the window; a second process adopts the marker silently', async () => {
    const r = await redisWith(6, []);
    const first = watchedCacheOn(r);
    expect(await first.cache.reserve('orders', 'a', 't1')).toEqual({ status: 'reserved', possibleDuplicate: false });
    expect(first.losses.map((l) => l.event)).toEqual(['no-history']);
    expect(first.lines.filter((l) => l.level >= WARN).map((l) => l.msg)).toEqual([
      expect.stringMatching(/^the duplicate-ID cache of 'orders' in 127\.0\.0\.1:\d+ has no earlier record: a new deployment, or a Redis that lost its data while no bridge ran/),
    ]);
    expect(first.cache.vouchesFor('orders')).toBe(false);
    const second = watchedCacheOn(r, { keyPrefix: (first.cache as unknown as { o: { keyPrefix: string } }).o.keyPrefix });
    expect(await second.cache.reserve('orders', 'a', 't2')).toEqual({ status: 'busy' });
    expect(second.losses).toEqual([]);
    // It inherits the flag window the marker carries.
    expect(second.cache.vouchesFor('orders')).toBe(false);
  });

  it('with lossWindow 0 a fresh address is vouched for at once', async () => {
    const r = await redisWith(10, []);
    const { cache } = watchedCacheOn(r, { lossWindow: 0 });
    await cache.reserve('orders', 'a', 't1');
    expect(cache.vouchesFor('orders')).toBe(true);
  });

  it('FLUSHALL mid-stream: detected on the next call, logged once as an error, counted; the lost ID passes again, and the address is not vouched for', async () => {
    const r = await redisWith(7, []);
    const { cache, lines, losses } = watchedCacheOn(r, { lossWindow: 0 });
    await cache.reserve('orders', 'a', 't1');
    await cache.commit('orders', 'a', 't1');
    await cache.recordStamp('src', 'fp', 'stamp-1', 't1');
    expect(cache.vouchesFor('orders')).toBe(true);
    const admin = new Redis(r.url);
    await admin.flushall();
    admin.disconnect();
    // Three calls for the same address after the flush, concurrently: one report between them.
    const after = await Promise.all([cache.reserve('orders', 'a', 't2'), cache.reserve('orders', 'b', 't2'), cache.reserve('orders', 'c', 't3')]);
    expect(after).toEqual([0, 1, 2].map(() => ({ status: 'reserved', possibleDuplicate: false })));
    expect(losses.filter((l) => l.event !== 'no-history').map((l) => [l.name, l.event])).toEqual([['orders', 'data-lost']]);
    const errors = lines.filter((l) => l.level >= ERROR).map((l) => l.msg);
    expect(errors).toEqual([expect.stringMatching(/^the duplicate-ID cache of 'orders' in 127\.0\.0\.1:\d+ was lost/)]);
    // lossWindow 0 here: a real one (24 h by default) keeps it false; the event itself is what counts.
    expect(cache.trust().losses).toEqual({ 'data-lost': 1 });
    // The stamp records of the source were lost too: told on its next call.
    expect(await cache.claimStamp('src', 'fp', 't9', { ownPrefix: 'x', since: 0, recorded: [], notRecorded: [] })).toEqual({ status: 'none', possibleDuplicate: false });
    expect(losses.filter((l) => l.event !== 'no-history').map((l) => [l.name, l.event])).toEqual([['orders', 'data-lost'], ['src', 'data-lost']]);
  });

  it('a restart without persistence: the data and the server are new; the loss window holds the flag', async () => {
    const r = await redisWith(8, ['--appendonly', 'no', '--save', '']);
    const { cache, losses } = watchedCacheOn(r, { lossWindow: 60_000 });
    await cache.commit('orders', 'a', 't1');
    await r.restart(100);
    // Unreachable for a moment: transient failures are retried by the session; here, until it answers.
    let result: unknown;
    for (let i = 0; i < 50 && result === undefined; i++) {
      result = await cache.reserve('orders', 'a', 't2').catch(async (e: unknown) => {
        expect(e).toBeInstanceOf(TransientError);
        await sleep(100);
        return undefined;
      });
    }
    expect(result).toEqual({ status: 'reserved', possibleDuplicate: false });
    expect(losses.map((l) => l.event)).toEqual(['no-history', 'data-lost']);
    expect(cache.vouchesFor('orders')).toBe(false);
    expect(cache.trust().flagging.map((f) => f.address)).toEqual(['orders']);
  });

  it('a restart with AOF keeps the data but not the proof that nothing was lost: another server, flagged, counted', async () => {
    const r = await redisWith(9, []);
    const { cache, losses } = watchedCacheOn(r, { lossWindow: 60_000 });
    await cache.commit('orders', 'a', 't1');
    await r.restart(100);
    let result: unknown;
    for (let i = 0; i < 50 && result === undefined; i++) {
      result = await cache.reserve('orders', 'a', 't2').catch(async () => {
        await sleep(100);
        return undefined;
      });
    }
    // AOF with fsync always kept the committed ID.
    expect(result).toEqual({ status: 'duplicate' });
    expect(losses.map((l) => l.event)).toEqual(['no-history', 'server-changed']);
    expect(cache.trust().losses).toEqual({ 'server-changed': 1 });
  });
});
