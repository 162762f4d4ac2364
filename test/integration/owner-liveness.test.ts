/**
 * Owner liveness against the real Redis (src/cache/owner-liveness.ts; docs/design.md §10.3): a reservation or a stamp
 * whose owner process is dead (its liveness key gone) is taken over at once, flagged, instead of after its lease; a
 * live owner's, however long held, is not; and a replayed takeover answers the same.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { RedisIdCache } from '../../src/cache/redis-id-cache.js';
import { livenessKey, tagSafe } from '../../src/cache/keys.js';
import { services, uniqueName } from '../support/services.js';
import { sleep, until } from '../support/wait.js';

/** Far longer than the test: only liveness can end these reservations in time. */
const LEASE = 120_000;
const admin = new Redis(services.redisUrl);
const caches: RedisIdCache[] = [];
let prefix = uniqueName('live');

function cacheOf(owner: string): RedisIdCache {
  const cache = new RedisIdCache({ url: services.redisUrl, keyPrefix: prefix, size: 100, lease: LEASE, owner });
  caches.push(cache);
  return cache;
}

afterEach(async () => {
  await Promise.all(caches.splice(0).map((c) => c.close()));
  const keys = await admin.keys(`${tagSafe(prefix)}:*`);
  if (keys.length) await admin.del(...keys);
  prefix = uniqueName('live');
});
afterAll(() => admin.quit());

describe('owner liveness', () => {
  it('keeps a live owner\'s reservation however long it holds it, and takes over a dead owner\'s within seconds, flagged', async () => {
    const a = cacheOf('procA');
    const b = cacheOf('procB');
    await Promise.all([a.ping(), b.ping()]);
    await until('A live', () => a.liveness!.live);
    expect(await a.reserve('orders', 'm1', 'procA.1.1.1')).toEqual({ status: 'reserved', possibleDuplicate: false });
    // A lives (its key is kept set): B waits for it, well beyond A's key's time to live.
    for (let i = 0; i < 3; i++) {
      expect(await b.reserve('orders', 'm1', 'procB.1.1.1')).toEqual({ status: 'busy' });
      await sleep(1000);
    }
    expect(await admin.pttl(livenessKey(prefix, 'procA'))).toBeGreaterThan(0);
    // A dies: its key stops being set. B takes over once it is gone, long before the lease.
    a.liveness!.stop();
    const diedAt = Date.now();
    await until('taken over', async () => (await b.reserve('orders', 'm1', 'procB.1.1.1')).status === 'reserved', { timeoutMs: 5000, everyMs: 50 });
    const tookMs = Date.now() - diedAt;
    expect(tookMs).toBeLessThan(3000);
    // Flagged (A may have sent it), and a replay answers the same.
    expect(await b.reserve('orders', 'm1', 'procB.1.1.1')).toEqual({ status: 'reserved', possibleDuplicate: true });
    // The late owner cannot end the new owner's reservation; its commit records the ID (its copy was delivered)
    // without ending B's reservation, which B then commits.
    await a.release('orders', 'm1', 'procA.1.1.1', false);
    expect(await cacheOf('procC').reserve('orders', 'm1', 'procC.1.1.1')).toEqual({ status: 'busy' });
    await b.commit('orders', 'm1', 'procB.1.1.1');
    expect(await cacheOf('procD').reserve('orders', 'm1', 'procD.1.1.1')).toEqual({ status: 'duplicate' });
  });

  it('frees a dead owner\'s stamps for a redelivery at once, and waits for a live one\'s', async () => {
    const a = cacheOf('procA');
    const b = cacheOf('procB');
    await Promise.all([a.ping(), b.ping()]);
    await until('A live', () => a.liveness!.live);
    await a.recordStamp('rabbit/q', 'fp', 'stamp-1', 'procA.1.1.1');
    const ask = () => b.claimStamp('rabbit/q', 'fp', 'procB.1.1.1', { ownPrefix: 'procB.1.1.', since: 0, recorded: [], notRecorded: ['stamp-1'] });
    expect((await ask()).status).toBe('busy');
    a.liveness!.stop();
    await until('claimed', async () => (await ask()).status === 'claimed', { timeoutMs: 5000, everyMs: 50 });
    expect(await ask()).toEqual({ status: 'claimed', id: 'stamp-1', possibleDuplicate: false, done: false });
  });

  it('counts a lapse of its own liveness (the process frozen or cut off longer than its key lives) once, and is live again after', async () => {
    const a = cacheOf('procA');
    await a.ping();
    await until('live', () => a.liveness!.live);
    expect(a.liveness!.lapses).toBe(0);
    a.liveness!.stop();
    await until('lapsed', () => !a.liveness!.live, { timeoutMs: 4000 });
    expect(a.liveness!.lapses).toBe(1);
    expect(a.liveness!.lapses).toBe(1);
    a.liveness!.start();
    await a.liveness!.untilLive();
    expect(a.liveness!.live).toBe(true);
    expect(a.liveness!.lapses).toBe(1);
  });
});
