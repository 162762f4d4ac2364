/**
 * The helpers of test/support/redis-topology.ts, once each against the real local Redis Cluster and Sentinel
 * (scripts/redis-cluster.sh, scripts/redis-sentinel.sh; the global setup starts them): what they report must be what
 * the servers do, since the topology tests and the fault suite build their assertions on them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addressKeys } from '../../src/cache/keys.js';
import {
  clusterNodes,
  currentMaster,
  failoverSentinel,
  keySlot,
  killMaster,
  masterForKey,
  migrateSlot,
  replicasOf,
  restartNode,
  withNode,
} from '../support/redis-topology.js';
import { services, uniqueName } from '../support/services.js';

describe('Redis Cluster helpers (scripts/redis-cluster.sh)', () => {
  beforeAll(() => {
    // Fails with a sentence naming the script and REDIS_CLUSTER_URLS when the global setup could not start it.
    expect(services.redisClusterUrls.length).toBeGreaterThan(0);
  });

  it('finds the master of a cache key by its hash tag, and migrates its slot to another master with the key', async () => {
    const keys = addressKeys(uniqueName('topology'), `amqp://127.0.0.1:5672/%2F/exchange/${uniqueName('x')}/y`);
    const key = keys.ids;
    const slot = await keySlot(key);
    // Every key of one address shares the slot: the hash tag is the address.
    expect(await keySlot(keys.seq)).toBe(slot);
    const from = await masterForKey(key);
    await withNode(from, (r) => r.zadd(key, 1, 'id-1'));
    const masters = (await clusterNodes()).filter((n) => n.role === 'master' && !n.failing);
    expect(masters).toHaveLength(3);
    const to = masters.find((m) => m.port !== from)!.port;

    let askedDuringMigration: unknown;
    const moved = await migrateSlot(slot, to, {
      whileMigrating: async () => {
        // The key has moved, the slot not yet: the old owner answers ASK for it.
        askedDuringMigration = await withNode(from, (r) => r.zscore(key, 'id-1')).catch((err: Error) => err.message);
      },
    });
    expect(moved).toEqual({ from, keysMoved: expect.any(Number) as number });
    expect(moved.keysMoved).toBeGreaterThanOrEqual(1);
    expect(String(askedDuringMigration)).toMatch(/^ASK /);
    expect(await masterForKey(key)).toBe(to);
    expect(await withNode(to, (r) => r.zscore(key, 'id-1'))).toBe('1');
    // The old owner redirects for good now.
    await expect(withNode(from, (r) => r.zscore(key, 'id-1'))).rejects.toThrow(/^MOVED /);

    // Back where it was, so that the layout stays the script's.
    await migrateSlot(slot, from);
    expect(await masterForKey(key)).toBe(from);
    expect(await withNode(from, (r) => r.zscore(key, 'id-1'))).toBe('1');
    await withNode(from, (r) => r.del(key));
  });

  it('kills the master of a key: its replica is promoted within 10 s with the key; the killed node rejoins as a replica', async () => {
    const key = `${uniqueName('topology')}:{failover}:k`;
    const master = await masterForKey(key);
    const [replica] = await replicasOf(master);
    expect(replica).toBeDefined();
    await withNode(master, async (r) => {
      await r.set(key, 'v');
      // Acknowledged by the replica before the kill: the promotion must keep it.
      expect(await r.wait(1, 5000)).toBe(1);
    });

    const p = await killMaster(master);
    expect(p.promoted).toBe(replica);
    expect(p.promotionMs).toBeLessThan(10_000);
    console.log(`cluster: master ${master} SIGKILLed, replica ${p.promoted} promoted after ${p.promotionMs} ms`);
    expect(await masterForKey(key)).toBe(p.promoted);
    expect(await withNode(p.promoted, (r) => r.get(key))).toBe('v');

    await restartNode(master);
    const back = (await clusterNodes()).find((n) => n.port === master)!;
    expect(back.role).toBe('replica');
    expect(await replicasOf(p.promoted)).toContain(master);
    await withNode(p.promoted, (r) => r.del(key));
  });
});

describe('Redis Sentinel helpers (scripts/redis-sentinel.sh)', () => {
  beforeAll(() => {
    expect(services.redisSentinel.urls.length).toBeGreaterThan(0);
  });
  const key = uniqueName('topology-sentinel');
  afterAll(async () => {
    const m = await currentMaster().catch(() => undefined);
    if (m) await withNode(m.port, (r) => r.del(key), m.host).catch(() => undefined);
  });

  it('names the master; a SIGKILLed master is replaced within 25 s, keeps acknowledged writes, and comes back as a replica', async () => {
    const before = await currentMaster();
    expect([6380, 6381]).toContain(before.port);
    await withNode(
      before.port,
      async (r) => {
        await r.set(key, 'v');
        expect(await r.wait(1, 5000)).toBe(1);
      },
      before.host,
    );

    const f = await failoverSentinel({ awaitRejoin: true });
    console.log(`sentinel: master ${f.oldMaster.port} SIGKILLed, ${f.newMaster.port} promoted after ${f.promotionMs} ms`);
    expect(f.oldMaster.port).toBe(before.port);
    expect(f.newMaster.port).not.toBe(before.port);
    // Usually 2-4 s (down-after-milliseconds 1000). When two sentinels start the election at once and split the vote,
    // the next try waits 2 × failover-timeout (10 s): one such retry stays inside the bound.
    expect(f.promotionMs).toBeLessThan(25_000);
    expect(await currentMaster()).toEqual(f.newMaster);
    expect(await withNode(f.newMaster.port, (r) => r.get(key), f.newMaster.host)).toBe('v');
    const role = await withNode(before.port, (r) => r.call('ROLE'), before.host);
    expect((role as unknown[])[0]).toBe('slave');
  });
});
