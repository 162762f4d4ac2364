import net from 'node:net';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import type { Logger } from '../../src/shared/log.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisIdCache, defineScripts, loadScripts, type RedisIdCacheOptions } from '../../src/cache/redis-id-cache.js';
import { packPairs } from '../../src/cache/address-batcher.js';
import { addressKeys, epochKey, layoutOneKeys, stampKey, tagSafe } from '../../src/cache/keys.js';
import { TransientError } from '../../src/shared/errors.js';
import { idCacheKey } from '../../src/core/id-cache.js';
import { idCacheContract, type CacheOptions } from '../support/id-cache-contract.js';
import { services, uniqueName } from '../support/services.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { sleep } from '../support/wait.js';


let admin: Redis | undefined;
function adminClient(): Redis {
  admin ??= new Redis(services.redisUrl);
  return admin;
}
afterAll(async () => {
  await admin?.quit();
});

/** Every key a test stored under its prefix. */
async function keysOf(prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await adminClient().scan(cursor, 'MATCH', `${tagSafe(prefix)}:*`, 'COUNT', 1000);
    cursor = next;
    found.push(...batch);
  } while (cursor !== '0');
  return found;
}

async function deleteKeys(prefix: string): Promise<void> {
  const keys = await keysOf(prefix);
  for (let i = 0; i < keys.length; i += 500) await adminClient().del(...keys.slice(i, i + 500));
}

/** The contract's lease against the real Redis (see FAKE_CLOCK_LEASE in id-cache-contract.ts). */
const LEASE = 1000;

/** A cache on the test Redis with its own key prefix; `cleanup` closes the caches and deletes the keys. */
function testWorld(): {
  prefix: string;
  make: (options?: Partial<RedisIdCacheOptions>) => RedisIdCache;
  cleanup: () => Promise<void>;
} {
  const prefix = uniqueName('idc');
  const caches: RedisIdCache[] = [];
  return {
    prefix,
    make(options = {}) {
      // A process forgets what it saw of an address (its epoch) before Redis forgets the address, as the service
      // configures it (id-cache-idle-expiry above address-idle-timeout): else an expired marker would read as a loss.
      const idle = options.idleExpiry !== undefined ? { addressIdleTimeout: options.idleExpiry / 4 } : {};
      const cache = new RedisIdCache({ url: services.redisUrl, keyPrefix: prefix, size: 2000, lease: LEASE, ...idle, ...options });
      caches.push(cache);
      return cache;
    },
    async cleanup() {
      await Promise.all(caches.map((c) => c.close()));
      await deleteKeys(prefix);
    },
  };
}

idCacheContract('redis', () => {
  const world = testWorld();
  return {
    cache: (options: CacheOptions = {}) => world.make(options),
    advance: sleep,
    cleanup: world.cleanup,
  };
}, LEASE);

/** Redis Cluster's key → slot function: CRC16 (XMODEM) of the hash tag, or of the whole key without one. */
function crc16(data: Buffer): number {
  let crc = 0;
  for (const byte of data) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}
function clusterSlot(key: string): number {
  const open = key.indexOf('{');
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(key, 'utf8')) % 16384;
}

function logCapture(): { log: Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString('utf8')) as { level: number; msg: string });
      done();
    },
  });
  return { log: pino({ level: 'info' }, stream), lines };
}

async function unusedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Settles a promise into what it rejected with (or fails when it resolves). */
async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

type RawScript = (...args: (string | number | Buffer)[]) => Promise<unknown>;

describe('RedisIdCache', () => {
  describe('scripts', () => {
    let raw: Redis;
    const world = testWorld();
    beforeAll(() => {
      raw = new Redis(services.redisUrl);
      defineScripts(raw);
    });
    afterAll(async () => {
      await raw.quit();
      await world.cleanup();
    });
    /**
     * A script called as the cache calls it: the epoch guard's key and what this caller saw of the marker go first
     * (the marker is read, or made, once per tag), then the script's own keys and arguments.
     */
    const seen = new Map<string, string>();
    const script = (name: string, tag: string): RawScript => {
      const fn = (raw as unknown as Record<string, RawScript>)[name];
      const epoch = (raw as unknown as Record<string, RawScript>).epoch;
      if (!fn || !epoch) throw new Error(`script ${name} is not defined`);
      const marker = epochKey(world.prefix, tag);
      return async (...args) => {
        if (!seen.has(tag)) {
          const [, value, server] = (await epoch.call(raw, marker, 'g', 0, 0)) as [number, string, string];
          seen.set(tag, `${value}|${server}`);
        }
        const withCount = ['stampRecord', 'stampForget'].includes(name);
        const [count, ...rest] = args;
        const keysAndArgs = withCount ? [Number(count) + 1, marker, ...rest] : [marker, ...args];
        // The guard's argument goes before the script's first argument: after the keys.
        const keyCount = withCount ? Number(count) : (loadScripts()[name as keyof ReturnType<typeof loadScripts>].declaredKeys as number);
        const head = keysAndArgs.slice(0, (withCount ? 2 : 1) + keyCount);
        const tail = keysAndArgs.slice((withCount ? 2 : 1) + keyCount);
        return fn.call(raw, ...head, seen.get(tag)!, ...tail);
      };
    };

    it('answers a replayed reserve exactly as the first one (fresh reservation and takeover)', async () => {
      const k = addressKeys(world.prefix, 'orders');
      const keys = [k.ids, k.st, k.stScan, k.uncertain];
      const reserve = (id: string, token: string, lease: number) =>
        script('reserve', 'orders')(...keys, id, token, lease, 0, 60_000, 1000, 100);

      const first = await reserve('x', 't1', LEASE);
      expect(first).toBe('R');
      expect(await reserve('x', 't1', LEASE)).toEqual(first);
      // Busy, naming the holder's process (the first part of its token) so that the caller can ask whether it lives.
      expect(await reserve('x', 't2', LEASE)).toBe('B|t1');

      await sleep(LEASE + 100);
      const takeover = await reserve('x', 't2', LEASE);
      expect(takeover).toBe('P');
      expect(await reserve('x', 't2', LEASE)).toEqual(takeover);

      const commit = script('commit', 'orders');
      const commitArgs = [k.ids, k.seq, k.st, k.uncertain, 'x', 't2', 10, 0, 100];
      expect(await commit(...commitArgs)).toEqual([0]);
      expect(await commit(...commitArgs)).toEqual([0]);
      expect(await adminClient().zcard(k.ids)).toBe(1);
      expect(await adminClient().hgetall(k.st)).toEqual({ x: expect.stringMatching(/^c\d+$/) as unknown });
    });

    it('answers a replayed stamp claim with the same ID', async () => {
      const key = stampKey(world.prefix, 'rabbit/orders', 'fp');
      // stamp-record takes any number of keys: their count first, then lease, ttl, and id/token/flag per key.
      expect(await script('stampRecord', 'rabbit/orders')(1, key, 100, 60_000, 'id-1', 't1', 0)).toEqual([0]);
      expect(await script('stampRecord', 'rabbit/orders')(1, key, 100, 60_000, 'id-x', '', 0)).toEqual([9, 'empty token']);
      expect(await script('stampRecord', 'rabbit/orders')(2, key, key, 100, 60_000, 'id-x', 't1', 0)).toEqual([9, 'expected id, token and flag for every key']);
      await sleep(200);
      // Lease expired and (the caller says) not recorded at the target: taken.
      // After the owner token, lease, record ttl, own prefix and since: the owners known dead ('' none), then n.
      const first = await script('stampClaim', 'rabbit/orders')(key, 't2', 10_000, 60_000, 'p.', 0, '', 0, 'id-1');
      expect(first).toEqual([5, 'id-1', 0, 0]);
      expect(await script('stampClaim', 'rabbit/orders')(key, 't2', 10_000, 60_000, 'p.', 0, '', 0)).toEqual(first);
      // Another claimer is asked to look id-1 up first, and then waits for its holder, named by its process.
      expect(await script('stampClaim', 'rabbit/orders')(key, 't3', 10_000, 60_000, 'p.', 0, '', 0)).toEqual([7, 'id-1']);
      const busy = (await script('stampClaim', 'rabbit/orders')(key, 't3', 10_000, 60_000, 'p.', 0, '', 0, 'id-1')) as unknown[];
      expect(busy[0]).toBe(3);
      expect(Number(busy[1])).toBeGreaterThan(0);
      expect(busy.slice(2)).toEqual(['t2']);
      // Named dead, its holder's stamp is free at once, though its lease runs: taken (a replay answers the same).
      const taken = await script('stampClaim', 'rabbit/orders')(key, 't3', 10_000, 60_000, 'p.', 0, 't2', 0, 'id-1');
      expect(taken).toEqual([5, 'id-1', 0, 0]);
      // A count of recorded IDs beyond the arguments is refused.
      expect(await script('stampClaim', 'rabbit/orders')(key, 't3', 10_000, 60_000, 'p.', 0, '', 2, 'id-1')).toEqual([9, 'bad numbers']);
    });

    it('records and forgets the stamps of one tick in one call per source (chunks of 200), each as if alone', async () => {
      const cache = world.make();
      // 150 identical messages (one fingerprint) and 150 distinct ones, recorded in one go: 300 records, two chunks.
      await Promise.all(Array.from({ length: 300 }, (_, i) => cache.recordStamp('src-a', i < 150 ? 'same' : `fp-${i}`, `id-${i}`, `t-${i}`, i === 7)));
      const same = await adminClient().hgetall(stampKey(world.prefix, 'src-a', 'same'));
      expect(Object.keys(same)).toHaveLength(150);
      expect(same['id-7']).toMatch(/^t-7\|\d+\|f$/);
      expect(same['id-8']).toMatch(/^t-8\|\d+$/);
      expect(await adminClient().hget(stampKey(world.prefix, 'src-a', 'fp-299'), 'id-299')).toMatch(/^t-299\|/);
      await Promise.all(Array.from({ length: 300 }, (_, i) => cache.forgetStamp('src-a', i < 150 ? 'same' : `fp-${i}`, `id-${i}`)));
      expect(await adminClient().exists(stampKey(world.prefix, 'src-a', 'same'), stampKey(world.prefix, 'src-a', 'fp-299'))).toBe(0);
    });

    it('reserves and commits many IDs in one call, whatever bytes the IDs and tokens hold', async () => {
      // Issued in one tick, these go as one script call each, the pairs after the first packed by byte length.
      // 'x' × 300 is kept by its SHA-256 (idCacheKey); the long token keeps a string past 255 bytes in the packing.
      const ids = ['plain', 'ünïcødé-✓', '3:abc', 'a:b:c', 'line\nbreak', '😀😀', ' ', 'x'.repeat(300), 'plain'];
      const token = (i: number) => (i === 6 ? `tök:${i}:${'t'.repeat(300)}` : `tök:${i}`);
      const cache = world.make();
      const reserved = await Promise.all(ids.map((id, i) => cache.reserve('packed', id, token(i))));
      // The second 'plain' meets the first one's fresh reservation, exactly as a later call would.
      expect(reserved).toEqual([...ids.slice(0, -1).map(() => ({ status: 'reserved', possibleDuplicate: false })), { status: 'busy' }]);
      await Promise.all(ids.slice(0, -1).map((id, i) => cache.commit('packed', id, token(i))));
      const again = await Promise.all(ids.map((id) => cache.reserve('packed', id, 'other')));
      expect(again).toEqual(ids.map(() => ({ status: 'duplicate' })));
      const k = addressKeys(world.prefix, 'packed');
      expect((await adminClient().zrange(k.ids, '0', '-1')).sort()).toEqual([...new Set(ids)].map(idCacheKey).sort());
    });

    it('reserves a full chunk (200 IDs: a MessagePack count and arrays past their short forms) and answers each ID', async () => {
      const cache = world.make();
      const ids = Array.from({ length: 250 }, (_, i) => `chunk-${i}`);
      await cache.commit('chunks', 'chunk-17', 'earlier');
      // One tick: a call of 200 (count 199 packed after the first pair) and one of 50.
      const reserved = await Promise.all(ids.map((id, i) => cache.reserve('chunks', id, `t-${i}`)));
      expect(reserved.map((r) => r.status)).toEqual(ids.map((id) => (id === 'chunk-17' ? 'duplicate' : 'reserved')));
      const entries = Object.values(await adminClient().hgetall(addressKeys(world.prefix, 'chunks').st));
      expect(entries.filter((v) => v.startsWith('r'))).toHaveLength(249);
    });

    it('rejects malformed packed pairs as a bad argument', async () => {
      const k = addressKeys(world.prefix, 'orders');
      const reserve = script('reserve', 'orders');
      const keys = [k.ids, k.st, k.stScan, k.uncertain];
      const [good] = packPairs([{ id: 'b', token: 't' }, { id: 'c', token: 'u' }]);
      // MessagePack by hand: 0x9N an array of N, 0xaN a string of N bytes, 0xc0 nil, small integers as themselves.
      const bytes = (...b: number[]) => Buffer.from(b);
      const malformed: (string | Buffer)[] = [
        '3:abc1:t', // the text packing of earlier versions
        good!.subarray(0, good!.length - 1), // cut short
        bytes(0x02, 0x91, 0xa1, 0x62, 0x91, 0xa1, 0x74), // a count of 2, arrays of 1
        bytes(0x00, 0x90, 0x90), // no pairs
        bytes(0x01, 0x91, 0x07, 0x91, 0xa1, 0x74), // an ID that is a number
        bytes(0x02, 0x92, 0xa1, 0x62, 0xc0, 0x92, 0xa1, 0x74, 0xa1, 0x75), // a nil among the IDs
        bytes(0x01, 0xa1, 0x62, 0x91, 0xa1, 0x74), // IDs not an array
      ];
      for (const packed of malformed) {
        expect(await reserve(...keys, 'a', 't', 1000, 0, 60_000, 1000, 100, packed), packed.toString('hex')).toEqual([9, 'malformed packed id/token pairs']);
      }
      expect(await reserve(...keys, 'a', 't', 1000, 0, 60_000, 1000, 100, packPairs([{ id: 'b', token: '' }])[0]!)).toEqual([9, 'empty token']);
      const many = packPairs(Array.from({ length: 1000 }, (_, i) => ({ id: `m-${i}`, token: 't' })))[0]!;
      expect(await reserve(...keys, 'a', 't', 1000, 0, 60_000, 1000, 100, many)).toEqual([9, 'more than 1000 IDs in one call']);
      expect(await adminClient().hget(k.st, 'a')).toBeNull();
      // The well-formed one, for contrast: three IDs reserved.
      expect(await reserve(...keys, 'a', 't', 1000, 0, 60_000, 1000, 100, good!)).toBe('RRR');
    });

    it('rejects a malformed call as a bug, not as a transient failure', async () => {
      const cache = world.make();
      const err = await rejection(cache.reserve('orders', 'x', ''));
      expect(err).not.toBeInstanceOf(TransientError);
      expect(err.message).toMatch(/empty token/);
    });
  });

  describe('keys', () => {
    it('computes cluster slots like Redis does', () => {
      expect(clusterSlot('foo')).toBe(12182);
      expect(clusterSlot('{user1000}.following')).toBe(clusterSlot('{user1000}.followers'));
    });

    it('puts every key of one address in one cluster slot, whatever the address contains', () => {
      for (const address of ['orders', '', '{', '}', '{}', 'a{b}c', 'x}y{z', '%7B', 'amqp 10.0.0.1:5672/{v}/q']) {
        const k = addressKeys('pre{fix}', address);
        const old = layoutOneKeys('pre{fix}', address);
        const keys = [k.ids, k.seq, k.st, k.stScan, k.uncertain, old.at, old.res, old.resExp];
        const slots = new Set(keys.map(clusterSlot));
        expect(slots.size, `address ${JSON.stringify(address)}`).toBe(1);
        expect(clusterSlot(stampKey('pre{fix}', address, 'f{p}'))).toBe(clusterSlot(keys[0]!));
      }
      // Distinct addresses get distinct tags (the encoding is one-to-one).
      expect(addressKeys('p', '{').ids).not.toBe(addressKeys('p', '%7B').ids);
      expect(addressKeys('p', '').ids).not.toBe(addressKeys('p', '%').ids);
    });

    it('stores what one address needs only under keys of that address hash tag', async () => {
      const world = testWorld();
      try {
        const cache = world.make({ lease: 100, markerRetention: 60_000 });
        const address = 'stomp 127.0.0.1:61613 /queue/{orders}';
        await cache.reserve(address, 'a', 't1');
        await cache.reserve(address, 'b', 't1');
        await cache.release(address, 'b', 't1', true);
        await cache.commit(address, 'a', 't1');
        await cache.reserve(address, 'c', 't2');
        await cache.recordStamp('amqp 127.0.0.1:5672/ {src}', 'fp', 'a', 't1');
        const keys = await keysOf(world.prefix);
        const addressKeyNames = keys.filter((k) => !k.includes(':stamp:') && !k.includes('{amqp'));
        expect(addressKeyNames.length).toBeGreaterThanOrEqual(5);
        expect(new Set(addressKeyNames.map(clusterSlot)).size).toBe(1);
        for (const k of addressKeyNames) expect(k.startsWith(`${world.prefix}:{stomp 127.0.0.1:61613 /queue/%7Borders%7D}:`)).toBe(true);
        expect(keys.filter((k) => k.includes('{amqp')).sort()).toEqual([
          `${world.prefix}:{amqp 127.0.0.1:5672/ %7Bsrc%7D}:epoch`,
          `${world.prefix}:{amqp 127.0.0.1:5672/ %7Bsrc%7D}:stamp:fp`,
        ]);
      } finally {
        await world.cleanup();
      }
    });
  });

  describe('ownership', () => {
    it("a commit by a taken-over owner records the ID but leaves the live owner's reservation", async () => {
      const world = testWorld();
      try {
        // t2's takeover must still hold when t1's commit comes: a lease a slow machine cannot outwait between two calls.
        const cache = world.make({ lease: LEASE });
        await cache.reserve('orders', 'x', 't1');
        await sleep(LEASE + 100);
        await cache.reserve('orders', 'x', 't2');
        await cache.commit('orders', 'x', 't1');
        const k = addressKeys(world.prefix, 'orders');
        // Recorded, and t2's reservation kept in the same entry (st-entry.inc.lua).
        expect(await adminClient().hget(k.st, 'x')).toMatch(/^c\d+\|t2\|\d+\|1$/);
        expect(await adminClient().zscore(k.ids, 'x')).not.toBeNull();
        expect(await cache.reserve('orders', 'x', 't3')).toEqual({ status: 'duplicate' });
        await cache.commit('orders', 'x', 't2');
        expect(await adminClient().hget(k.st, 'x')).toMatch(/^c\d+$/);
      } finally {
        await world.cleanup();
      }
    });

    it('gives each stamp record key a ttl', async () => {
      const world = testWorld();
      try {
        const cache = world.make({ stampTtl: 60_000 });
        await cache.recordStamp('src', 'fp', 'id', 't');
        const ttl = await adminClient().pttl(stampKey(world.prefix, 'src', 'fp'));
        expect(ttl).toBeGreaterThan(50_000);
        expect(ttl).toBeLessThanOrEqual(60_000);
      } finally {
        await world.cleanup();
      }
    });
  });

  describe('bounded storage', () => {
    it('reservations never committed or released do not accumulate', async () => {
      const world = testWorld();
      try {
        const cache = world.make({ lease: 200, markerRetention: 60_000 });
        const k = addressKeys(world.prefix, 'orders');
        await Promise.all(Array.from({ length: 10_000 }, (_, i) => cache.reserve('orders', `id-${i}`, `t-${i}`)));
        expect(await adminClient().hlen(k.st)).toBeGreaterThan(9_000);

        await sleep(300);
        // Each reserve sweeps about one entry of `st` per ID asked for, from where the last one stopped (reserve-4.lua):
        // the abandoned reservations become markers while the address is in use, within a cycle of the cursor over
        // the hash's buckets (16,384 here): about that many IDs reserved.
        const abandoned = async () => (await adminClient().hscan(k.st, '0', 'MATCH', 'id-*', 'COUNT', 100_000))[1].length / 2;
        let rounds = 0;
        while (rounds < 250 && (await abandoned()) > 0) {
          await Promise.all(Array.from({ length: 150 }, (_, i) => cache.reserve('orders', `new-${rounds}-${i}`, `n-${i}`)));
          rounds++;
        }
        expect(await abandoned()).toBe(0);
        expect(rounds).toBeGreaterThan(10);
        expect(await adminClient().zcard(k.uncertain)).toBeGreaterThanOrEqual(10_000);
      } finally {
        await world.cleanup();
      }
    });

    it('keeps at most id-cache-size IDs per address', async () => {
      const world = testWorld();
      try {
        const cache = world.make({ size: 50 });
        await Promise.all(Array.from({ length: 500 }, (_, i) => cache.commit('orders', `id-${i}`, 't')));
        const k = addressKeys(world.prefix, 'orders');
        expect(await adminClient().zcard(k.ids)).toBe(50);
        expect(await adminClient().hlen(k.st)).toBe(50);
        expect(await adminClient().zrange(k.ids, '0', '0')).toEqual(['id-450']);
      } finally {
        await world.cleanup();
      }
    });

    it('forgets IDs older than id-cache-ttl from storage, oldest first, on later commits and reserves', async () => {
      const world = testWorld();
      try {
        // Each commit also lets the address's keys expire a ttl later: activity every 2 s keeps them alive, so what
        // goes here goes by the sweep, not by key expiry. Each check has 1 s of slack on either side of the ttl.
        const cache = world.make({ size: 1000, ttl: 3000 });
        const k = addressKeys(world.prefix, 'orders');
        const ids = async () => (await adminClient().zrange(k.ids, '0', '-1')).sort();
        await Promise.all(Array.from({ length: 30 }, (_, i) => cache.commit('orders', `old-${i}`, 't')));
        await sleep(2000);
        await cache.commit('orders', 'middle', 't');
        await sleep(2000);
        await Promise.all(Array.from({ length: 3 }, (_, i) => cache.commit('orders', `young-${i}`, 't')));
        expect(await adminClient().pttl(k.ids)).toBeGreaterThan(0);
        expect(await ids()).toEqual(['middle', 'young-0', 'young-1', 'young-2']);
        expect(await adminClient().hlen(k.st)).toBe(4);

        await sleep(2000);
        // A reserve sweeps the same way: 'middle' is past the ttl now, the young ones are not.
        expect(await cache.reserve('orders', 'fresh', 't')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await adminClient().pttl(k.ids)).toBeGreaterThan(0);
        expect(await ids()).toEqual(['young-0', 'young-1', 'young-2']);
        expect(await adminClient().hlen(k.st) - 1).toBe(3); // and 'fresh', reserved
      } finally {
        await world.cleanup();
      }
    });
  });

  describe('fail closed', () => {
    it('rejects every call with a TransientError within seconds when Redis is unreachable', async () => {
      const port = await unusedPort();
      const { log, lines } = logCapture();
      const cache = new RedisIdCache({
        url: `redis://bridge:s3cret@127.0.0.1:${port}`,
        keyPrefix: uniqueName('idc'),
        size: 10,
        lease: 1000,
        log,
      });
      try {
        const started = Date.now();
        const errors = await Promise.all([
          rejection(cache.ping()),
          rejection(cache.reserve('orders', 'x', 't')),
          rejection(cache.commit('orders', 'x', 't')),
          rejection(cache.release('orders', 'x', 't', true)),
          rejection(cache.recordStamp('src', 'fp', 'x', 't')),
          rejection(cache.claimStamp('src', 'fp', 't', { ownPrefix: 'p.', since: 0, recorded: [], notRecorded: [] })),
          rejection(cache.recorded('orders', ['x'])),
          rejection(cache.markStampDone('src', 'fp', 'x', 't')),
          rejection(cache.forgetStamp('src', 'fp', 'x')),
          rejection(cache.releaseStamp('src', 'fp', 'x', 't')),
        ]);
        expect(Date.now() - started).toBeLessThan(5000);
        for (const err of errors) {
          expect(err).toBeInstanceOf(TransientError);
          expect(err.message).toBe(`Redis at 127.0.0.1:${port} is unreachable: connection refused`);
        }
        // Still down a while later: calls keep failing fast, the process keeps running.
        await sleep(1000);
        const again = await rejection(cache.reserve('orders', 'x', 't'));
        expect(again).toBeInstanceOf(TransientError);
        expect(lines.filter((l) => l.level === 40)).toHaveLength(1); // one line per state change
        expect(JSON.stringify(lines)).not.toContain('s3cret');
      } finally {
        await cache.close();
      }
    });

    it('recovers on the same client when Redis comes back (cut, then black hole)', async () => {
      const proxy = await TcpProxy.forUrl(services.redisUrl).start();
      const world = testWorld();
      const { log, lines } = logCapture();
      const cache = new RedisIdCache({
        url: proxy.rewrite(services.redisUrl),
        keyPrefix: world.prefix,
        size: 10,
        lease: 60_000,
        commandTimeout: 1000,
        log,
      });
      const untilWorks = async () => {
        const deadline = Date.now() + 15_000;
        for (;;) {
          try {
            return await cache.reserve('orders', 'x', 't1');
          } catch (err) {
            expect(err).toBeInstanceOf(TransientError);
            if (Date.now() > deadline) throw err;
            await sleep(200);
          }
        }
      };
      try {
        expect(await cache.reserve('orders', 'x', 't1')).toEqual({ status: 'reserved', possibleDuplicate: false });

        proxy.cut();
        let started = Date.now();
        const cutErr = await rejection(cache.reserve('orders', 'y', 't1'));
        expect(cutErr).toBeInstanceOf(TransientError);
        expect(cutErr.message).toMatch(/^Redis at 127\.0\.0\.1:\d+ is unreachable: /);
        expect(Date.now() - started).toBeLessThan(5000);
        await sleep(500);
        proxy.resume();
        // The replayed reserve (same token) is still ours; another token is still busy.
        expect(await untilWorks()).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await cache.reserve('orders', 'x', 't2')).toEqual({ status: 'busy' });

        proxy.stall();
        started = Date.now();
        const stallErr = await rejection(cache.reserve('orders', 'z', 't1'));
        expect(stallErr).toBeInstanceOf(TransientError);
        expect(Date.now() - started).toBeLessThan(3000);
        // A black hole ends with the connection dropped (by the socket timeout here, or by TCP): then Redis is back.
        await sleep(2500);
        proxy.cut();
        proxy.resume();
        expect(await untilWorks()).toEqual({ status: 'reserved', possibleDuplicate: false });
        await cache.commit('orders', 'x', 't1');
        expect(await cache.reserve('orders', 'x', 't3')).toEqual({ status: 'duplicate' });

        // One line per state change: two outages, two recoveries (not one line per reconnect attempt).
        expect(lines.filter((l) => l.level === 40 && /is unreachable/.test(l.msg))).toHaveLength(2);
        expect(lines.filter((l) => l.level === 30 && /reachable again/.test(l.msg))).toHaveLength(2);
      } finally {
        await cache.close();
        await proxy.stop();
        await world.cleanup();
      }
    });
  });
});
