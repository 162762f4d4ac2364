/**
 * The behaviour every IdCache implementation must show, as one suite run against each of them
 * (test/unit/memory-id-cache.test.ts with a fake clock, test/integration/redis-id-cache.test.ts with real waits).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { IdCache } from '../../src/core/id-cache.js';
import { StampClaims, type StampClaim } from '../../src/core/stamp-claim.js';

export interface CacheOptions {
  size?: number;
  ttl?: number;
  lease?: number;
  idleExpiry?: number;
}

/** One test's world: caches made by it share one store (as bridge replicas share one Redis). */
export interface ContractHarness {
  cache(options?: CacheOptions): IdCache;
  /** Lets `ms` milliseconds pass (a fake clock moves; against Redis, a real wait). */
  advance(ms: number): Promise<void>;
  /** Closes the caches and deletes whatever the test stored. */
  cleanup(): Promise<void>;
}

/**
 * The lease (and the ttl) the suite gives its caches. Against a fake clock any value does; against Redis the run
 * really waits for it, and a lease must also outlast the pause a loaded machine may take between two calls of a test
 * (a "busy" read after such a pause would find the lease run out): 200 ms was too close for that.
 */
const FAKE_CLOCK_LEASE = 200;

export function idCacheContract(name: string, createHarness: () => ContractHarness, LEASE = FAKE_CLOCK_LEASE): void {
  const PAST_LEASE = LEASE + Math.max(100, LEASE / 10);
  describe(`IdCache contract: ${name}`, () => {
    let h: ContractHarness;
    beforeEach(() => {
      h = createHarness();
    });
    afterEach(async () => {
      await h.cleanup();
    });

    describe('circular cache', () => {
      it('evicts exactly the oldest ID when the (n+1)th is committed', async () => {
        const c = h.cache({ size: 10 });
        for (let i = 1; i <= 11; i++) await c.commit('orders', `id-${i}`, `t-${i}`);
        expect(await c.reserve('orders', 'id-1', 'r-1')).toEqual({ status: 'reserved', possibleDuplicate: false });
        for (let i = 2; i <= 11; i++) {
          expect(await c.reserve('orders', `id-${i}`, `r-${i}`), `id-${i}`).toEqual({ status: 'duplicate' });
        }
      });

      it('tells its horizon: how many IDs it holds and how old the oldest is (none for an empty address)', async () => {
        const c = h.cache({ size: 3 });
        expect(await c.horizon('orders')).toEqual({ ids: 0, oldestAgeMs: null });
        for (const id of ['a', 'b', 'c', 'd']) await c.commit('orders', id, `t-${id}`);
        const full = await c.horizon('orders');
        expect(full.ids).toBe(3);
        expect(full.oldestAgeMs).not.toBeNull();
        expect(full.oldestAgeMs!).toBeGreaterThanOrEqual(0);
        expect(full.oldestAgeMs!).toBeLessThan(60_000);
        expect(await c.horizon('other')).toEqual({ ids: 0, oldestAgeMs: null });
      });

      it('keeps commit order for commits issued all at once', async () => {
        const c = h.cache({ size: 10 });
        // Issued in one go (one pipeline against Redis, the same millisecond): order is the call order.
        await Promise.all(Array.from({ length: 15 }, (_, i) => c.commit('orders', `id-${i + 1}`, `t-${i + 1}`)));
        const results = await Promise.all(
          Array.from({ length: 15 }, (_, i) => c.reserve('orders', `id-${i + 1}`, `r-${i + 1}`)),
        );
        expect(results.map((r) => r.status)).toEqual([
          ...Array<string>(5).fill('reserved'),
          ...Array<string>(10).fill('duplicate'),
        ]);
      });

      it('commits many pairs in one call as commit() would each, in their order, across chunks, replay-safe', async () => {
        const c = h.cache({ size: 250, lease: LEASE });
        const pairs = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => ({ id: `id-${from + i}`, token: `t-${from + i}` }));
        expect(await c.reserve('orders', 'id-1', 't-1')).toEqual({ status: 'reserved', possibleDuplicate: false });
        // More than one script call's worth (200 pairs) against Redis.
        await c.commitMany('orders', pairs(1, 250));
        await c.commitMany('orders', pairs(1, 3)); // replayed: no second entry, nothing moves
        await c.commitMany('orders', []);
        expect((await c.horizon('orders')).ids).toBe(250);
        const after = await Promise.all(pairs(1, 250).map((p) => c.reserve('orders', p.id, `r-${p.id}`)));
        expect(after.every((r) => r.status === 'duplicate')).toBe(true);
        // The oldest is the first pair: one more commit evicts exactly it.
        await c.commitMany('orders', [{ id: 'id-251', token: 't-251' }]);
        expect(await c.reserve('orders', 'id-1', 'r-again')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await c.reserve('orders', 'id-2', 'r-again')).toEqual({ status: 'duplicate' });
        await expect(c.commitMany('orders', [{ id: 'x', token: '' }])).rejects.toThrow(/token/);
      });

      it('treats a re-commit as a no-op: it neither moves the ID nor adds a second entry', async () => {
        const c = h.cache({ size: 3 });
        await c.commit('orders', 'a', 't-a');
        await c.commit('orders', 'b', 't-b');
        await c.commit('orders', 'c', 't-c');
        await c.commit('orders', 'a', 't-a'); // replayed commit
        await c.commit('orders', 'a', 't-other'); // a second copy's commit
        await c.commit('orders', 'd', 't-d'); // evicts the oldest: still 'a'
        expect(await c.reserve('orders', 'a', 'r')).toEqual({ status: 'reserved', possibleDuplicate: false });
        for (const id of ['b', 'c', 'd']) expect(await c.reserve('orders', id, 'r'), id).toEqual({ status: 'duplicate' });
      });

      it('counts entries older than id-cache-ttl as absent, and records them afresh', async () => {
        const c = h.cache({ size: 10, ttl: LEASE });
        await c.commit('orders', 'old', 't1');
        expect(await c.reserve('orders', 'old', 'r1')).toEqual({ status: 'duplicate' });
        await h.advance(PAST_LEASE);
        await c.commit('orders', 'young', 't2');
        expect(await c.reserve('orders', 'old', 'r2')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await c.reserve('orders', 'young', 'r3')).toEqual({ status: 'duplicate' });
        await c.commit('orders', 'old', 'r2');
        expect(await c.reserve('orders', 'old', 'r4')).toEqual({ status: 'duplicate' });
      });

      it('forgets the IDs of an address that sees no reserve or commit for the idle expiry; one in use keeps its IDs', async () => {
        const idle = 2 * LEASE;
        const c = h.cache({ size: 10, idleExpiry: idle });
        await c.commit('quiet', 'q', 't1');
        await c.commit('busy', 'b', 't2');
        // 'busy' is used (a reserve answered duplicate) every half idle expiry; 'quiet' is not touched at all.
        for (let i = 0; i < 3; i++) {
          await h.advance(idle / 2);
          expect(await c.reserve('busy', 'b', `r-${i}`), `round ${i}`).toEqual({ status: 'duplicate' });
        }
        expect(await c.horizon('quiet')).toEqual({ ids: 0, oldestAgeMs: null });
        expect(await c.recorded('quiet', ['q'])).toEqual([false]);
        expect(await c.reserve('quiet', 'q', 'r-q')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect((await c.horizon('busy')).ids).toBe(1);
        // Recorded afresh, the quiet address remembers again.
        await c.commit('quiet', 'q', 'r-q');
        expect(await c.reserve('quiet', 'q', 'r-q2')).toEqual({ status: 'duplicate' });
      });

      it('keeps two addresses independent', async () => {
        const c = h.cache({ size: 1 });
        await c.commit('orders', 'x', 't1');
        expect(await c.reserve('invoices', 'x', 't2')).toEqual({ status: 'reserved', possibleDuplicate: false });
        await c.commit('invoices', 'y', 't3'); // would evict 'x' if the caches were shared
        expect(await c.reserve('orders', 'x', 't4')).toEqual({ status: 'duplicate' });
        expect(await c.reserve('orders', 'z', 'a')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await c.reserve('invoices', 'z', 'b')).toEqual({ status: 'reserved', possibleDuplicate: false });
      });

      it('is shared by every cache on the same store (replicas)', async () => {
        const one = h.cache();
        const two = h.cache();
        if (one === two) return; // an in-process cache is one per process by design
        expect(await one.reserve('orders', 'x', 't1')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await two.reserve('orders', 'x', 't2')).toEqual({ status: 'busy' });
        await one.commit('orders', 'x', 't1');
        expect(await two.reserve('orders', 'x', 't2')).toEqual({ status: 'duplicate' });
      });
    });

    describe('reservations', () => {
      it('answers reserved, then the same for a replay by the same token, busy for another token', async () => {
        const c = h.cache({ lease: LEASE });
        expect(await c.reserve('orders', 'x', 't1')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await c.reserve('orders', 'x', 't1')).toEqual({ status: 'reserved', possibleDuplicate: false });
        expect(await c.reserve('orders', 'x', 't2')).toEqual({ status: 'busy' });
      });

      it('lets another owner take over after the lease, flagged as a possible duplicate, replay-safe', async () => {
        const c = h.cache({ lease: LEASE });
        await c.reserve('orders', 'x', 't1');
        await h.advance(PAST_LEASE);
        expect(await c.reserve('orders', 'x', 't2')).toEqual({ status: 'reserved', possibleDuplicate: true });
        expect(await c.reserve('orders', 'x', 't2')).toEqual({ status: 'reserved', possibleDuplicate: true });
        // The old owner is now the one that must wait.
        expect(await c.reserve('orders', 'x', 't1')).toEqual({ status: 'busy' });
      });

      it('ends a reservation on release, so the next reserve is not a possible duplicate', async () => {
        const c = h.cache({ lease: LEASE });
        await c.reserve('orders', 'x', 't1');
        await c.release('orders', 'x', 't1', false);
        await c.release('orders', 'x', 't1', false); // replayed: no-op
        expect(await c.reserve('orders', 'x', 't2')).toEqual({ status: 'reserved', possibleDuplicate: false });
      });

      it('ignores a release by a non-owner', async () => {
        const c = h.cache({ lease: LEASE });
        await c.reserve('orders', 'x', 't1');
        await c.release('orders', 'x', 't2', true);
        expect(await c.reserve('orders', 'x', 't3')).toEqual({ status: 'busy' });
        expect(await c.reserve('orders', 'x', 't1')).toEqual({ status: 'reserved', possibleDuplicate: false });
      });

      it('after an uncertain release the next reserve is a possible duplicate, until the ID is committed', async () => {
        const c = h.cache({ lease: LEASE });
        await c.reserve('orders', 'x', 't1');
        await c.release('orders', 'x', 't1', true);
        expect(await c.reserve('orders', 'x', 't2')).toEqual({ status: 'reserved', possibleDuplicate: true });
        // A certain failure of the resend does not undo the earlier unknown outcome.
        await c.release('orders', 'x', 't2', false);
        expect(await c.reserve('orders', 'x', 't3')).toEqual({ status: 'reserved', possibleDuplicate: true });
        await c.commit('orders', 'x', 't3');
        expect(await c.reserve('orders', 'x', 't4')).toEqual({ status: 'duplicate' });
      });

      it('records a commit by an owner whose reservation was taken over', async () => {
        const c = h.cache({ lease: LEASE });
        await c.reserve('orders', 'x', 't1');
        await h.advance(PAST_LEASE);
        expect(await c.reserve('orders', 'x', 't2')).toEqual({ status: 'reserved', possibleDuplicate: true });
        await c.commit('orders', 'x', 't1'); // its copy was delivered after all
        expect(await c.reserve('orders', 'x', 't3')).toEqual({ status: 'duplicate' });
        await c.commit('orders', 'x', 't2');
        expect(await c.reserve('orders', 'x', 't3')).toEqual({ status: 'duplicate' });
      });

      it('answers duplicate to a reserve of a committed ID, whoever asks', async () => {
        const c = h.cache({ lease: LEASE });
        await c.reserve('orders', 'x', 't1');
        await c.commit('orders', 'x', 't1');
        expect(await c.reserve('orders', 'x', 't1')).toEqual({ status: 'duplicate' });
        expect(await c.reserve('orders', 'x', 't2')).toEqual({ status: 'duplicate' });
      });

      it('gives exactly one of many concurrent reserves of one ID', async () => {
        const c = h.cache({ lease: 10_000 });
        const results = await Promise.all(Array.from({ length: 100 }, (_, i) => c.reserve('orders', 'x', `t${i}`)));
        expect(results.filter((r) => r.status === 'reserved')).toHaveLength(1);
        expect(results.filter((r) => r.status === 'busy')).toHaveLength(99);
      });
    });

    describe('stamp records and the redelivery claim (src/core/stamp-claim.ts)', () => {
      const SRC = 'rabbit/orders';
      const TGT = 'rabbit/out';
      /** One claim as a session makes it: claim, look up what the cache asks about at the target, claim again. */
      const claim = (c: IdCache, token: string, o: { fp?: string; ownPrefix?: string; since?: number } = {}): Promise<StampClaim> =>
        new StampClaims({ cache: c, sourceAddress: SRC, targetAddress: TGT, ownPrefix: o.ownPrefix ?? 'other-session.', call: (fn) => fn() }).claim(
          o.fp ?? 'fp',
          token,
          o.since ?? 0,
        );
      const busy: unknown = expect.objectContaining({ status: 'busy' });

      it('answers none, unflagged, for an unknown fingerprint', async () => {
        const c = h.cache({ lease: LEASE });
        expect(await claim(c, 't1')).toEqual({ status: 'none', possibleDuplicate: false });
      });

      it('hands a recorded stamp back to its holder (replay), and makes others wait while the holder lives', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        expect(await claim(c, 't1')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: false, done: false });
        expect(await claim(c, 't2')).toEqual(busy);
        await c.releaseStamp(SRC, 'fp', 'id-1', 't2'); // not the holder: no-op
        expect(await claim(c, 't3')).toEqual(busy);
      });

      it('lets a released stamp whose ID is not recorded at the target be claimed at once, replay-safe', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        await c.releaseStamp(SRC, 'fp', 'id-1', 't1');
        expect(await claim(c, 't2')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: false, done: false });
        expect(await claim(c, 't2')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: false, done: false });
        expect(await claim(c, 't3')).toEqual(busy);
      });

      it('lets a stamp whose holder lease expired be claimed', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        await h.advance(PAST_LEASE);
        expect(await claim(c, 't2')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: false, done: false });
        expect(await claim(c, 't1')).toEqual(busy);
      });

      it('hands the only stamp of a fingerprint, once recorded at the target, back as done: the redelivery is dropped', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        await c.commit(TGT, 'id-1', 'r1');
        // Its owner is still there (or its lease runs): wait.
        expect(await claim(c, 't2')).toEqual(busy);
        await c.releaseStamp(SRC, 'fp', 'id-1', 't1');
        expect(await claim(c, 't2')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: false, done: true });
      });

      it('never drops a redelivery under the only stamp of a message acked without a barrier: a new stamp, flagged', async () => {
        const c = h.cache({ lease: LEASE, size: 10 });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        await c.commit(TGT, 'id-1', 'r1');
        await c.releaseAckedStamp(SRC, 'fp', 'id-1', 't2'); // not the holder: no-op, still held
        expect(await claim(c, 't2')).toEqual(busy);
        // The session ended after the ack, before a barrier: the message may be gone from the broker, and this
        // redelivery its byte-identical twin, never forwarded.
        await c.releaseAckedStamp(SRC, 'fp', 'id-1', 't1');
        expect(await claim(c, 't3')).toEqual({ status: 'none', possibleDuplicate: true });
        // Done for good: a later claim neither takes it nor waits for it, even once the target forgot the ID.
        for (let i = 0; i < 20; i++) await c.commit(TGT, `later-${i}`, `r-${i}`);
        expect(await c.recorded(TGT, ['id-1'])).toEqual([false]);
        expect(await claim(c, 't4')).toEqual({ status: 'none', possibleDuplicate: true });
      });

      it('with several stamps of a fingerprint, never hands out a recorded one: a new stamp, flagged, instead', async () => {
        const c = h.cache({ lease: LEASE, size: 10 });
        for (const n of [1, 2]) {
          await c.recordStamp(SRC, 'fp', `id-${n}`, `t${n}`);
          await c.commit(TGT, `id-${n}`, `r${n}`);
          await c.releaseStamp(SRC, 'fp', `id-${n}`, `t${n}`);
        }
        expect(await claim(c, 't3')).toEqual({ status: 'none', possibleDuplicate: true });
        // The done marks stick, even once the circular cache no longer holds the IDs.
        for (let i = 0; i < 20; i++) await c.commit(TGT, `later-${i}`, `r-${i}`);
        expect(await c.recorded(TGT, ['id-1', 'id-2'])).toEqual([false, false]);
        expect(await claim(c, 't4')).toEqual({ status: 'none', possibleDuplicate: true });
      });

      it('keeps the flag of a stamp made flagged, for whoever takes it later', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1', true);
        await c.releaseStamp(SRC, 'fp', 'id-1', 't1');
        expect(await claim(c, 't2')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: true, done: false });
        expect(await c.renewStamps(SRC, 'fp', [{ id: 'id-1', token: 't2' }])).toEqual([]);
        expect(await claim(c, 't2')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: true, done: false });
      });

      it('renews the leases of stamps their holders still work on, and names the ones they hold no more', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        await c.recordStamp(SRC, 'fp', 'id-2', 't2');
        for (let i = 0; i < 3; i++) {
          await h.advance(LEASE / 2);
          expect(await c.renewStamps(SRC, 'fp', [{ id: 'id-1', token: 't1' }])).toEqual([]);
        }
        // id-1 was renewed and is still held; id-2 was not, and its lease ran out: taken.
        expect(await claim(c, 't3')).toEqual({ status: 'claimed', id: 'id-2', possibleDuplicate: false, done: false });
        expect(await c.renewStamps(SRC, 'fp', [{ id: 'id-1', token: 't1' }, { id: 'id-2', token: 't2' }, { id: 'gone', token: 't1' }])).toEqual(['id-2', 'gone']);
      });

      it('prefers the stamp of a message that was never forwarded over one that was (the issue-12 loss)', async () => {
        const c = h.cache({ lease: LEASE });
        for (const n of [1, 2, 3]) await c.recordStamp(SRC, 'fp', `id-${n}`, `t${n}`);
        // id-1 and id-3 were forwarded and acked (their records wait for the ack barrier); id-2 was not.
        await c.commit(TGT, 'id-1', 'r1');
        await c.commit(TGT, 'id-3', 'r3');
        for (const n of [1, 2, 3]) await c.releaseStamp(SRC, 'fp', `id-${n}`, `t${n}`);
        expect(await claim(c, 'x1')).toEqual({ status: 'claimed', id: 'id-2', possibleDuplicate: false, done: false });
        // Another redelivery waits while id-2 is held (it might be its own), and never takes id-1 or id-3.
        expect(await claim(c, 'x2')).toEqual(busy);
        await c.commit(TGT, 'id-2', 'x1');
        expect(await claim(c, 'x2')).toEqual({ status: 'none', possibleDuplicate: true });
      });

      it('waits while a stamp that may be this message\'s own is held, but not for its own session\'s or later ones', async () => {
        const c = h.cache({ lease: 10_000 });
        await c.recordStamp(SRC, 'fp', 'id-1', 'dead.1'); // a crashed owner's, its lease still running
        await c.recordStamp(SRC, 'fp', 'id-2', 'mine.1'); // a live delivery of the claimer's own session
        const first = await claim(c, 'mine.2', { ownPrefix: 'mine.' });
        expect(first).toEqual(busy);
        const since = first.status === 'busy' ? first.since : 0;
        expect(since).toBeGreaterThan(0);
        await h.advance(20);
        await c.recordStamp(SRC, 'fp', 'id-3', 'live.1'); // taken after the redelivery first asked: not its own
        expect(await claim(c, 'mine.2', { ownPrefix: 'mine.', since })).toEqual(busy);
        await c.releaseStamp(SRC, 'fp', 'id-1', 'dead.1'); // as when its lease runs out
        expect(await claim(c, 'mine.2', { ownPrefix: 'mine.', since })).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: false, done: false });
        // Left: id-1 and id-2 (this session's live deliveries) and id-3 (later): none of them can be this one's.
        expect(await claim(c, 'mine.3', { ownPrefix: 'mine.', since })).toEqual({ status: 'none', possibleDuplicate: false });
      });

      it('treats a dead-lettered message\'s stamp as handled', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        await c.markStampDone(SRC, 'fp', 'id-1', 't2'); // not the holder: no-op
        await c.releaseStamp(SRC, 'fp', 'id-1', 't1');
        expect(await claim(c, 't3')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: false, done: false });
        await c.markStampDone(SRC, 'fp', 'id-1', 't3');
        await c.releaseStamp(SRC, 'fp', 'id-1', 't3');
        // Redelivered once more (its ack was lost): dropped, not dead-lettered again.
        expect(await claim(c, 't4')).toEqual({ status: 'claimed', id: 'id-1', possibleDuplicate: false, done: true });
      });

      it('forgets a stamp', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        await c.forgetStamp(SRC, 'fp', 'id-1');
        await c.forgetStamp(SRC, 'fp', 'id-1');
        expect(await claim(c, 't2')).toEqual({ status: 'none', possibleDuplicate: false });
      });

      it('gives each redelivered copy of identical messages its own stamp', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        await c.recordStamp(SRC, 'fp', 'id-2', 't2');
        await c.releaseStamp(SRC, 'fp', 'id-1', 't1');
        await c.releaseStamp(SRC, 'fp', 'id-2', 't2');
        const got = [await claim(c, 't3'), await claim(c, 't4')].map((r) => (r.status === 'claimed' && !r.done ? r.id : r.status)).sort();
        expect(got).toEqual(['id-1', 'id-2']);
        expect(await claim(c, 't5')).toEqual(busy);
      });

      it('answers which IDs are recorded at an address', async () => {
        const c = h.cache({ lease: LEASE });
        await c.commit(TGT, 'a', 't1');
        expect(await c.recorded(TGT, ['a', 'b', 'a'])).toEqual([true, false, true]);
        expect(await c.recorded('elsewhere', ['a'])).toEqual([false]);
        expect(await c.recorded(TGT, [])).toEqual([]);
      });

      it('keeps sources and fingerprints apart', async () => {
        const c = h.cache({ lease: LEASE });
        await c.recordStamp(SRC, 'fp', 'id-1', 't1');
        const none = { status: 'none', possibleDuplicate: false };
        expect(await new StampClaims({ cache: c, sourceAddress: 'rabbit/invoices', targetAddress: TGT, ownPrefix: 'o.', call: (fn) => fn() }).claim('fp', 't2', 0)).toEqual(none);
        expect(await claim(c, 't2', { fp: 'fp2' })).toEqual(none);
      });
    });

    it('takes addresses, IDs and tokens with any characters', async () => {
      const c = h.cache({ lease: LEASE });
      const address = 'amqp 127.0.0.1:5672/{vhost}/%7B}{q|u:e';
      await c.commit(address, 'id|with|bars{}', 'tok|en');
      expect(await c.reserve(address, 'id|with|bars{}', 'x')).toEqual({ status: 'duplicate' });
      expect(await c.reserve(address, 'other', 'a|b|1')).toEqual({ status: 'reserved', possibleDuplicate: false });
      expect(await c.reserve(address, 'other', 'a|b|1')).toEqual({ status: 'reserved', possibleDuplicate: false });
      expect(await c.reserve(address, 'other', 'a|b')).toEqual({ status: 'busy' });
      expect(await c.reserve('', 'other', 'a')).toEqual({ status: 'reserved', possibleDuplicate: false });
    });
  });
}
