/**
 * What this proves: a cache written in layout 1 (by the real build of commit 415bc64, test/support/old-build.ts) and
 * then used by this build (layout 2, moved on first touch: src/cache/scripts/migrate-5.lua) answers every call exactly
 * as the layout-1 build goes on answering on an identical copy of it. For random sequences (reserve / commit / release
 * certain and uncertain / recorded / stamp record and claim, a few addresses, a small id-cache-size so eviction runs,
 * with and without id-cache-ttl): phase 1 runs on two layout-1 caches (prefixes P and Q), phase 2 runs on this build
 * over P and on the layout-1 build over Q, then probes read back every ID. Also: a cache larger than one migrate slice
 * keeps its order, times and reservations; a layout-1 process that meets a moved tag fails before it writes, not as a
 * transient outage (docs/operations.md#upgrading-the-cache-layout).
 */
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisIdCache } from '../../src/cache/redis-id-cache.js';
import { addressKeys, epochKey, layoutOneKeys, livenessKey } from '../../src/cache/keys.js';
import type { RedisTopology } from '../../src/config/types.js';
import { ConfigError } from '../../src/shared/errors.js';
import type { IdCache } from '../../src/core/id-cache.js';
import { TransientError } from '../../src/shared/errors.js';
import { layoutOneBuild, type OldBuild } from '../support/old-build.js';
import { deleteKeysUnder } from '../support/redis-keys.js';
import { services, uniqueName } from '../support/services.js';

const MINUTE = 60_000;
const BASE = uniqueName('layout-mig');
const ADDRESSES = ['out-a', 'out-b'];
const SOURCE = 'src-s';

type CacheClass = new (options: ConstructorParameters<typeof RedisIdCache>[0]) => IdCache;
let build: OldBuild;
let OldCache: CacheClass;
let admin: Redis;

beforeAll(async () => {
  build = layoutOneBuild();
  const mod = (await import(`${build.dir}/src/cache/redis-id-cache.ts`)) as { RedisIdCache: CacheClass };
  OldCache = mod.RedisIdCache;
  admin = new Redis(services.redisUrl);
});

afterAll(async () => {
  await deleteKeysUnder(services.redisUrl, BASE);
  admin.disconnect();
  build.remove();
});

type Step =
  | { op: 'reserve'; address: string; id: string; token: string }
  | { op: 'commit'; address: string; id: string; token: string }
  | { op: 'release'; address: string; id: string; token: string; uncertain: boolean }
  | { op: 'recorded'; address: string; ids: string[] }
  | { op: 'recordStamp'; id: string; token: string }
  | { op: 'claimStamp'; token: string };

const TOKENS = ['p1.1', 'p1.2', 'p2.1', 'p3.1', 'p|1|0.1'];
const address = fc.constantFrom(...ADDRESSES);
// Few IDs, so that the steps meet: a flagged reservation needs a reserve, an uncertain release and another reserve.
const IDS = ['a', 'b', 'c', 'd'];
const id = fc.constantFrom(...IDS);
// Tokens of a few processes; 'p|1|0' holds the scripts' separator and looks like a lease and a flag.
const token = fc.constantFrom(...TOKENS);
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant('reserve' as const), address, id, token }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('commit' as const), address, id, token }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('release' as const), address, id, token, uncertain: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('recorded' as const), address, ids: fc.array(id, { minLength: 1, maxLength: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('recordStamp' as const), id, token }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('claimStamp' as const), token }) },
);

async function run(c: IdCache, s: Step): Promise<unknown> {
  try {
    switch (s.op) {
      case 'reserve':
        return await c.reserve(s.address, s.id, s.token);
      case 'commit':
        await c.commit(s.address, s.id, s.token);
        return 'ok';
      case 'release':
        await c.release(s.address, s.id, s.token, s.uncertain);
        return 'ok';
      case 'recorded':
        return await c.recorded(s.address, s.ids);
      case 'recordStamp':
        await c.recordStamp(SOURCE, 'fp', s.id, s.token);
        return 'ok';
      case 'claimStamp': {
        const r = await c.claimStamp(SOURCE, 'fp', s.token, { ownPrefix: 'p9.', since: 0, recorded: [], notRecorded: [] });
        // `since` of a busy answer is the server's clock at the call: not comparable across two calls.
        return r.status === 'busy' ? { status: 'busy' } : r;
      }
    }
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/**
 * What every ID of every address answers last: recorded, then a reserve by every token (a holder's is a replay, which
 * answers its reservation's flag), then by a fresh one.
 */
async function probe(c: IdCache): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const a of ADDRESSES) {
    out.push(await c.recorded(a, IDS));
    for (const i of IDS) {
      for (const t of [...TOKENS, 'probe.1']) out.push(await run(c, { op: 'reserve', address: a, id: i, token: t }));
    }
  }
  return out;
}

describe('layout 1 moved into layout 2 answers as layout 1 does', () => {
  it('for random sequences: the same answers after the move as the layout-1 build on a copy', async () => {
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 20 }),
        fc.array(step, { minLength: 0, maxLength: 15 }),
        fc.record({ size: fc.integer({ min: 3, max: 5 }), ttl: fc.constantFrom(undefined, 60 * MINUTE), idleExpiry: fc.constantFrom(undefined, 120 * MINUTE) }),
        async (before, after, semantics) => {
          runs += 1;
          const options = { url: services.redisUrl, lease: 10 * MINUTE, ...semantics };
          const p = `${BASE}:${runs}p`;
          const q = `${BASE}:${runs}q`;
          const oldP = new OldCache({ ...options, keyPrefix: p });
          const oldQ = new OldCache({ ...options, keyPrefix: q });
          const newP = new RedisIdCache({ ...options, keyPrefix: p });
          try {
            for (const s of before) expect(await run(oldP, s)).toEqual(await run(oldQ, s));
            await oldP.close();
            for (const s of after) expect(await run(newP, s), JSON.stringify(s)).toEqual(await run(oldQ, s));
            expect(await probe(newP)).toEqual(await probe(oldQ));
            // Nothing of layout 1 is left where this build has been.
            for (const a of ADDRESSES) {
              const old = layoutOneKeys(p, a);
              expect(await admin.exists(old.at, old.res, old.resExp)).toBe(0);
              expect(await admin.type(epochKey(p, a))).not.toBe('string');
            }
          } finally {
            await Promise.all([oldP.close(), oldQ.close(), newP.close()]);
          }
        },
      ),
      {
        numRuns: Number(process.env.LAYOUT_MIGRATION_RUNS ?? 60),
        // A flagged reservation, a recorded ID another owner still holds, and eviction, in every run of the test.
        examples: [
          [
            [
              { op: 'reserve', address: 'out-a', id: 'a', token: 'p1.1' },
              { op: 'release', address: 'out-a', id: 'a', token: 'p1.1', uncertain: true },
              { op: 'reserve', address: 'out-a', id: 'a', token: 'p2.1' },
              { op: 'reserve', address: 'out-a', id: 'b', token: 'p1.1' },
              { op: 'commit', address: 'out-a', id: 'b', token: 'p3.1' },
              { op: 'commit', address: 'out-b', id: 'a', token: 'p3.1' },
              { op: 'commit', address: 'out-b', id: 'b', token: 'p3.1' },
              { op: 'commit', address: 'out-b', id: 'c', token: 'p3.1' },
              { op: 'recordStamp', id: 'a', token: 'p1.1' },
            ],
            [{ op: 'commit', address: 'out-b', id: 'd', token: 'p3.1' }, { op: 'claimStamp', token: 'p2.1' }],
            { size: 3, ttl: undefined, idleExpiry: undefined },
          ],
        ],
      },
    );
  });

  it('moves a cache larger than one slice: order, times, reservations and flags kept', async () => {
    const prefix = `${BASE}:big`;
    const options = { url: services.redisUrl, size: 5000, lease: 10 * MINUTE, keyPrefix: prefix };
    const old = new OldCache(options);
    const ids = Array.from({ length: 2500 }, (_, i) => ({ id: `r-${i}`, token: 'p1.1' }));
    await old.commitMany('big', ids);
    await Promise.all(Array.from({ length: 1200 }, (_, i) => old.reserve('big', `h-${i}`, 'p2.1')));
    // A possible duplicate (uncertain release, then reserved again) and a recorded ID another owner still holds.
    await old.reserve('big', 'pd', 'p3.1');
    await old.release('big', 'pd', 'p3.1', true);
    await old.reserve('big', 'pd', 'p3.2');
    await old.close();
    const k = addressKeys(prefix, 'big');
    const order = await admin.zrange(k.ids, '0', '-1', 'WITHSCORES');
    const times = await admin.hgetall(layoutOneKeys(prefix, 'big').at);

    const cache = new RedisIdCache(options);
    try {
      // The first call moves everything (3,700 entries: four slices), then answers.
      expect(await cache.reserve('big', 'r-0', 'p4.1')).toEqual({ status: 'duplicate' });
      expect(await admin.zrange(k.ids, '0', '-1', 'WITHSCORES')).toEqual(order);
      const st = await admin.hgetall(k.st);
      for (const [i, at] of Object.entries(times)) expect(st[i]).toBe(`c${at}`);
      expect(await cache.reserve('big', 'h-7', 'p4.1')).toEqual({ status: 'busy' });
      expect(await cache.reserve('big', 'h-7', 'p2.1')).toEqual({ status: 'reserved', possibleDuplicate: false });
      expect(await cache.reserve('big', 'pd', 'p3.2')).toEqual({ status: 'reserved', possibleDuplicate: true });
      expect(await cache.recorded('big', ['r-2499', 'h-1'])).toEqual([true, false]);
      expect(await admin.exists(...(Object.values(layoutOneKeys(prefix, 'big')) as string[]))).toBe(0);
    } finally {
      await cache.close();
    }
  });

  it('a layout-1 process that meets a moved address fails before it writes, and not as an outage to wait out', async () => {
    const prefix = `${BASE}:fence`;
    const options = { url: services.redisUrl, size: 10, lease: 10 * MINUTE, keyPrefix: prefix };
    const cache = new RedisIdCache(options);
    await cache.commit('out', 'x', 'p1.1');
    await cache.close();
    const before = await admin.hgetall(addressKeys(prefix, 'out').st);
    const old = new OldCache(options);
    try {
      for (const call of [() => old.reserve('out', 'x', 'p2.1'), () => old.commit('out', 'y', 'p2.1'), () => old.recorded('out', ['x'])]) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e as Error,
        );
        expect(err).toBeInstanceOf(Error);
        // The old build's own error classes: its session ends the bridge on a non-transient error instead of retrying.
        expect(err!.constructor.name).not.toBe('TransientError');
        expect(err).not.toBeInstanceOf(TransientError);
        expect(err!.message).toMatch(/WRONGTYPE/);
      }
      expect(await admin.hgetall(addressKeys(prefix, 'out').st)).toEqual(before);
      expect(await admin.exists(...(Object.values(layoutOneKeys(prefix, 'out')) as string[]))).toBe(0);
    } finally {
      await old.close();
    }
  });
});

/**
 * The same move on a Redis Cluster (the keys of one address in one slot, the liveness keys spread over the masters)
 * and behind Sentinel, on the local ones (test/support/redis-topology.ts); nothing here stops or fails over a node.
 */
describe.each([
  { kind: 'cluster', topology: (): RedisTopology => ({ kind: 'cluster', urls: services.redisClusterUrls }) },
  { kind: 'sentinel', topology: (): RedisTopology => ({ kind: 'sentinel', ...services.redisSentinel }) },
])('on a Redis $kind', ({ topology }) => {
  it('moves an address on first touch and answers as layout 1; refuses to start beside a live layout-1 process on any master', async () => {
    const prefix = uniqueName('layout-topo');
    const options = { topology: topology(), size: 10, lease: 10 * MINUTE, keyPrefix: prefix };
    const old = new OldCache(options);
    const cache = new RedisIdCache({ ...options, owner: 'newproc' });
    const raw = new RedisIdCache({ ...options });
    const client = (raw as unknown as { redis: { set(k: string, v: string, px: 'PX', ms: number): Promise<unknown>; del(k: string): Promise<number> } }).redis;
    try {
      for (const a of ['t1', 't2', 't3', 't4']) {
        await old.commit(a, 'x', 'p1.1');
        await old.reserve(a, 'y', 'p1.1');
      }
      // (`raw` has no owner of its own, so it does not ask whether p1 lives: its reservation is busy, as in layout 1.)
      for (const a of ['t1', 't2', 't3', 't4']) {
        expect(await raw.reserve(a, 'x', 'p2.1')).toEqual({ status: 'duplicate' });
        expect(await raw.reserve(a, 'y', 'p2.1')).toEqual({ status: 'busy' });
        expect(await raw.reserve(a, 'y', 'p1.1')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await raw.recorded(a, ['x', 'y'])).toEqual([true, false]);
      }
      // Liveness keys of old processes, one per slot of its own: on a Cluster they land on several masters.
      await cache.refuseBesideOldBuilds();
      const olds = ['oldA', 'oldB', 'oldC', 'oldD', 'oldE', 'oldF'];
      for (const p of olds) await client.set(livenessKey(prefix, p), '1', 'PX', 60_000);
      await client.set(livenessKey(prefix, 'newer'), '2', 'PX', 60_000);
      const err = await cache.refuseBesideOldBuilds().then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err).toBeInstanceOf(ConfigError);
      expect(err!.message).toMatch(/in use by 6 processes of an older broker-bridge build \(old[A-F], old[A-F], old[A-F], old[A-F], old[A-F], …/);
      for (const p of olds) await client.del(livenessKey(prefix, p));
      await cache.refuseBesideOldBuilds();
    } finally {
      await Promise.all([old.close(), cache.close(), raw.close()]);
    }
  }, 60_000);
});
