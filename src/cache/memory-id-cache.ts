/**
 * The in-process duplicate-ID cache (persist-id-cache: false): the same semantics as the Redis scripts
 * (./scripts/*.lua) — circular per address, optional ttl, leased reservations with takeover, uncertain markers,
 * stamp records — kept in Maps. Lost on restart, and not shared between replicas.
 *
 * Maps iterate in insertion order. Every write re-inserts its entry with `now + <constant>` as expiry, so the first
 * entries are always the oldest: expiry and eviction look only at the front (bounded work per call).
 *
 * Where the scripts' answers depend on Redis key expiry (PEXPIRE), this cache keeps the same deadlines: an address's
 * abandoned reservation counts as absent once its lease plus the marker retention ran out (reserve-4.lua), and all its
 * reservations go once no reserve came for that long (a bound of this cache's own: each of them is past that rule by
 * then, so the answers are the same), its recorded IDs once no
 * reserve or commit came for the idle expiry (without ttl), and a fingerprint's stamp record lives stampTtl after the
 * last script that wrote it. An address with nothing left is dropped, so the Map forgets idle addresses as Redis does. test/integration/id-cache-differential.test.ts checks
 * that both answer alike.
 */
import { isDone, stampMapKey, type StampEntry, type StampRecord } from './memory-stamps.js';
import { idCacheKey, type CacheHorizon, type ClaimRequest, type ClaimResult, type IdCache, type IdCacheSemantics, type ReserveResult } from '../core/id-cache.js';

export interface MemoryIdCacheOptions extends IdCacheSemantics {
  /** The clock, in ms (tests pass a fake one). Default Date.now. */
  now?: () => number;
}

interface Reservation {
  token: string;
  expiry: number;
  possibleDuplicate: boolean;
}

interface AddressState {
  /** id → commit time, in commit order. */
  ids: Map<string, number>;
  /** id → reservation, in expiry order. */
  res: Map<string, Reservation>;
  /**
   * When `res` goes as a whole: the last reserve + lease + marker retention, so that a quiet address forgets its
   * abandoned reservations (each is past reserve-4.lua's per-reservation rule by then: the same answers).
   */
  resUntil: number;
  /** id → marker expiry, in expiry order. */
  markers: Map<string, number>;
  /** When `ids` go as a whole without ttl: the last reserve or commit + idle expiry (commit-4.lua ARGV[7]). */
  idsUntil: number;
}

const DAY = 24 * 60 * 60 * 1000;

/** Sizes of the structures of one address, for tests and diagnostics. */
export interface MemoryCacheSizes {
  ids: number;
  reservations: number;
  markers: number;
}

export class MemoryIdCache implements IdCache {
  readonly kind = 'memory';
  readonly lease: number;
  private readonly addresses = new Map<string, AddressState>();
  private readonly stamps = new Map<string, StampRecord>();
  private readonly size: number;
  private readonly ttl: number;
  private readonly idleExpiry: number;
  private readonly markerRetention: number;
  private readonly maxMarkers: number;
  private readonly stampTtl: number;
  private readonly batch: number;
  private readonly now: () => number;
  private closed = false;

  constructor(options: MemoryIdCacheOptions) {
    this.size = options.size;
    this.ttl = options.ttl ?? 0;
    this.idleExpiry = options.idleExpiry ?? 0;
    this.lease = options.lease;
    this.markerRetention = options.markerRetention ?? DAY;
    this.maxMarkers = options.maxMarkers ?? 100_000;
    this.stampTtl = options.stampTtl ?? DAY;
    this.batch = options.cleanupBatch ?? 100;
    this.now = options.now ?? Date.now;
    if (!(this.size >= 1 && this.lease > 0 && this.ttl >= 0 && this.idleExpiry >= 0)) {
      throw new TypeError('MemoryIdCache needs size >= 1, lease > 0, ttl >= 0 and idleExpiry >= 0');
    }
  }

  async ping(): Promise<void> {
    this.assertOpen();
  }

  async reserve(address: string, id: string, token: string): Promise<ReserveResult> {
    this.assertOpen();
    id = idCacheKey(id);
    assertToken(token);
    const now = this.now();
    const a = this.state(address, now);
    const result = this.reserveIn(a, now, id, token);
    // Every reserve call, whatever it answers, extends the life of the address's reservations (reserve-4.lua).
    a.resUntil = now + this.lease + this.markerRetention;
    if (this.ttl === 0) a.idsUntil = now + this.idleExpiry;
    return result;
  }

  private reserveIn(a: AddressState, now: number, id: string, token: string): ReserveResult {
    this.housekeep(a, now, id);

    const at = a.ids.get(id);
    if (at !== undefined) {
      if (this.ttl === 0 || now - at < this.ttl) return { status: 'duplicate' };
      a.ids.delete(id);
    }

    let possibleDuplicate = false;
    const cur = a.res.get(id);
    if (cur) {
      if (cur.token === token) return { status: 'reserved', possibleDuplicate: cur.possibleDuplicate };
      if (cur.expiry > now) return { status: 'busy' };
      // An abandoned reservation is remembered for the marker retention after its lease ran out (reserve-4.lua).
      possibleDuplicate = cur.expiry + this.markerRetention > now;
    }
    if (!possibleDuplicate) {
      const marker = a.markers.get(id);
      possibleDuplicate = marker !== undefined && marker > now;
    }
    a.markers.delete(id);
    a.res.delete(id);
    a.res.set(id, { token, expiry: now + this.lease, possibleDuplicate });
    return { status: 'reserved', possibleDuplicate };
  }

  async commitMany(address: string, pairs: readonly { id: string; token: string }[]): Promise<void> {
    for (const p of pairs) await this.commit(address, p.id, p.token);
  }

  async commit(address: string, id: string, token: string): Promise<void> {
    this.assertOpen();
    id = idCacheKey(id);
    assertToken(token);
    const now = this.now();
    const a = this.state(address, now);
    const cur = a.res.get(id);
    // Record even if the reservation was taken over (the message was delivered), but leave a live owner's alone.
    if (cur && (cur.token === token || cur.expiry <= now)) a.res.delete(id);
    a.markers.delete(id);

    const at = a.ids.get(id);
    if (at !== undefined) {
      if (this.ttl === 0 || now - at < this.ttl) return;
      a.ids.delete(id);
    }
    a.ids.set(id, now);
    a.idsUntil = now + (this.ttl > 0 ? this.ttl : this.idleExpiry);
    for (const oldest of a.ids.keys()) {
      if (a.ids.size <= this.size) break;
      a.ids.delete(oldest);
    }
    this.trimIds(a, now);
  }

  async release(address: string, id: string, token: string, uncertain: boolean): Promise<void> {
    this.assertOpen();
    id = idCacheKey(id);
    assertToken(token);
    const now = this.now();
    const a = this.state(address, now);
    const cur = a.res.get(id);
    if (!cur || cur.token !== token) return;
    a.res.delete(id);
    // A certain failure now does not undo an earlier send of unknown outcome.
    if (uncertain || cur.possibleDuplicate) this.mark(a, id, now);
  }

  async recordStamp(source: string, fingerprint: string, id: string, token: string, flagged = false): Promise<void> {
    this.assertOpen();
    assertToken(token);
    const now = this.now();
    this.trimStamps(now);
    const record = this.stampRecord(source, fingerprint, now, true);
    if (!record) return;
    // A new stamp for the ID: whatever mark an earlier one had goes with it (stamp-record-n.lua).
    record.entries.set(id, { token, expiry: now + this.lease, mark: flagged ? 'flagged' : '' });
    this.touch(source, fingerprint, record, now);
  }

  async recorded(address: string, ids: readonly string[]): Promise<boolean[]> {
    this.assertOpen();
    const a = this.addresses.get(address);
    const now = this.now();
    if (a) this.expireIds(a, now);
    return ids.map((id) => {
      const at = a?.ids.get(idCacheKey(id));
      return at !== undefined && (this.ttl === 0 || now - at < this.ttl);
    });
  }

  /** The same decisions as stamp-claim-1.lua, in the same order (the comments there say why). */
  async claimStamp(source: string, fingerprint: string, token: string, request: ClaimRequest): Promise<ClaimResult> {
    this.assertOpen();
    assertToken(token);
    if (request.ownPrefix === '') throw new TypeError('an own prefix must not be empty');
    const now = this.now();
    this.trimStamps(now);
    const record = this.stampRecord(source, fingerprint, now, false);
    if (!record || record.entries.size === 0) return { status: 'none', possibleDuplicate: false };
    for (const [id, e] of record.entries) {
      if (e.token === token) return { status: 'claimed', id, possibleDuplicate: e.mark === 'flagged', done: isDone(e.mark) };
    }

    const since = request.since > 0 ? request.since : now;
    const recorded = new Set(request.recorded);
    const notRecorded = new Set(request.notRecorded);
    let marked = false;
    const entries = [...record.entries].map(([id, e]) => {
      if (!isDone(e.mark) && recorded.has(id)) {
        // Sticky, and it replaces the flag (stamp-claim-1.lua writes mark `d`).
        e.mark = 'done';
        marked = true;
      }
      // See stamp-claim-1.lua: the caller's own session is alive, its entries are never free.
      const own = e.token !== '' && e.token.startsWith(request.ownPrefix);
      const free = !own && (e.token === '' || e.expiry <= now);
      return { id, e, done: isDone(e.mark), free, own, late: !free && !own && e.expiry - this.lease > since };
    });
    // Marking a stamp done is a write: it extends the record's life as the script's PEXPIRE does, whatever the answer.
    if (marked) this.touch(source, fingerprint, record, now);
    // The caller takes a stamp (its mark stays); `done` when it is the only, handled one (rule 3).
    const take = (x: (typeof entries)[number], done: boolean): ClaimResult => {
      record.entries.set(x.id, { ...x.e, token, expiry: now + this.lease });
      this.touch(source, fingerprint, record, now);
      return { status: 'claimed', id: x.id, possibleDuplicate: x.e.mark === 'flagged', done };
    };
    const fresh = entries.find((x) => x.free && !x.done && notRecorded.has(x.id));
    if (fresh) return take(fresh, false);
    const unknown = entries.filter((x) => !x.done && !x.own && !x.late && !notRecorded.has(x.id)).map((x) => x.id);
    if (unknown.length > 0) return { status: 'check', ids: unknown };
    if (entries.some((x) => !x.done && !x.own && !x.late && !x.free)) return { status: 'busy', since: now };
    const only = entries.length === 1 ? entries[0] : undefined;
    if (only && only.done && only.e.mark !== 'ackUnknown' && !only.own && !only.late) {
      return only.free ? take(only, true) : { status: 'busy', since: now };
    }
    return { status: 'none', possibleDuplicate: entries.some((x) => x.done && !x.own) };
  }

  async renewStamps(source: string, fingerprint: string, held: readonly { id: string; token: string }[]): Promise<string[]> {
    this.assertOpen();
    // Nothing to renew: no write at all (RedisIdCache makes no script call, so the record's life is not extended).
    if (held.length === 0) return [];
    const now = this.now();
    const record = this.stampRecord(source, fingerprint, now, false);
    const lost: string[] = [];
    for (const { id, token } of held) {
      const e = record?.entries.get(id);
      if (!record || !e || token === '' || e.token !== token) lost.push(id);
      else e.expiry = now + this.lease;
    }
    if (record) this.touch(source, fingerprint, record, now);
    return lost;
  }

  async markStampDone(source: string, fingerprint: string, id: string, token: string): Promise<void> {
    // Mark `d` replaces mark `f` (stamp-done-1.lua).
    this.changeOwnStamp(source, fingerprint, id, token, (e) => ({ ...e, mark: 'done' }));
  }

  async forgetStamp(source: string, fingerprint: string, id: string): Promise<void> {
    this.assertOpen();
    const record = this.stampRecord(source, fingerprint, this.now(), false);
    if (!record) return;
    record.entries.delete(id);
    if (record.entries.size === 0) this.stamps.delete(stampMapKey(source, fingerprint));
  }

  async releaseStamp(source: string, fingerprint: string, id: string, token: string): Promise<void> {
    this.changeOwnStamp(source, fingerprint, id, token, (e) => ({ ...e, token: '', expiry: 0 }));
  }

  async releaseAckedStamp(source: string, fingerprint: string, id: string, token: string): Promise<void> {
    this.changeOwnStamp(source, fingerprint, id, token, (e) => ({ ...e, token: '', expiry: 0, mark: 'ackUnknown' }));
  }

  /** Replaces a stamp entry that `token` holds; a no-op for anyone else (as the scripts answer NOT_OWNER). */
  private changeOwnStamp(source: string, fingerprint: string, id: string, token: string, change: (e: StampEntry) => StampEntry): void {
    this.assertOpen();
    assertToken(token);
    const now = this.now();
    const record = this.stampRecord(source, fingerprint, now, false);
    const e = record?.entries.get(id);
    if (!record || !e || e.token !== token) return;
    record.entries.set(id, change(e));
    this.touch(source, fingerprint, record, now);
  }

  /** An in-process cache loses nothing while the process lives (and its loss at a restart is warned about at start). */
  vouchesFor(): boolean {
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.addresses.clear();
    this.stamps.clear();
  }

  /** How much one address holds (tests use it to check that nothing grows without bound). */
  sizes(address: string): MemoryCacheSizes {
    const a = this.addresses.get(address);
    if (a) this.expireReservations(a, this.now());
    if (a) this.expireIds(a, this.now());
    return { ids: a?.ids.size ?? 0, reservations: a?.res.size ?? 0, markers: a?.markers.size ?? 0 };
  }

  async horizon(address: string): Promise<CacheHorizon> {
    this.assertOpen();
    const a = this.addresses.get(address);
    const now = this.now();
    if (a) this.expireIds(a, now);
    if (a === undefined || a.ids.size === 0) return { ids: 0, oldestAgeMs: null };
    // Insertion order is commit order: the first entry is the oldest remembered.
    const oldest = a.ids.values().next().value as number;
    return Promise.resolve({ ids: a.ids.size, oldestAgeMs: Math.max(0, now - oldest) });
  }

  /** Number of fingerprint records held (all sources). */
  stampRecordCount(): number {
    return this.stamps.size;
  }

  private assertOpen(): void {
    if (this.closed) throw new Error('the duplicate-ID cache is closed');
  }

  private state(address: string, now: number): AddressState {
    let a = this.addresses.get(address);
    if (a) {
      // In order of use, so that the idle addresses are the first ones.
      this.addresses.delete(address);
    } else {
      this.forgetIdle(now);
      a = { ids: new Map(), res: new Map(), resUntil: 0, markers: new Map(), idsUntil: 0 };
    }
    this.addresses.set(address, a);
    this.expireReservations(a, now);
    this.expireIds(a, now);
    return a;
  }

  /** The expiry of the `ids` keys: ttl after the last commit, else the idle expiry after the last reserve or commit. */
  private expireIds(a: AddressState, now: number): void {
    if ((this.ttl > 0 || this.idleExpiry > 0) && now > a.idsUntil && a.ids.size > 0) a.ids.clear();
  }

  /** Drops the least recently used addresses that hold nothing any more (bounded: stops at the first that does). */
  private forgetIdle(now: number): void {
    for (const [address, a] of this.addresses) {
      this.expireReservations(a, now);
      this.expireIds(a, now);
      let markersUntil = 0;
      for (const expiry of a.markers.values()) markersUntil = expiry;
      if (a.ids.size > 0 || a.res.size > 0 || markersUntil >= now) return;
      this.addresses.delete(address);
    }
  }

  /** The reservations' end as a whole (see resUntil). */
  private expireReservations(a: AddressState, now: number): void {
    if (now > a.resUntil && a.res.size > 0) a.res.clear();
  }

  /** Bounded cleanup, as reserve-4.lua does: abandoned reservations become markers; old markers and IDs go. */
  private housekeep(a: AddressState, now: number, keep: string): void {
    let n = 0;
    for (const [id, r] of a.res) {
      if (n++ >= this.batch || r.expiry > now) break;
      if (id === keep) continue;
      a.res.delete(id);
      if (r.expiry + this.markerRetention > now) this.mark(a, id, now);
    }
    n = 0;
    for (const [id, expiry] of a.markers) {
      if (n++ >= this.batch || expiry > now) break;
      a.markers.delete(id);
    }
    this.trimIds(a, now);
  }

  private mark(a: AddressState, id: string, now: number): void {
    a.markers.delete(id);
    a.markers.set(id, now + this.markerRetention);
    for (const oldest of a.markers.keys()) {
      if (a.markers.size <= this.maxMarkers) break;
      a.markers.delete(oldest);
    }
  }

  private trimIds(a: AddressState, now: number): void {
    if (this.ttl === 0) return;
    let n = 0;
    for (const [id, at] of a.ids) {
      if (n++ >= this.batch || now - at < this.ttl) break;
      a.ids.delete(id);
    }
  }

  private stampRecord(source: string, fingerprint: string, now: number, create: boolean): StampRecord | undefined {
    const key = stampMapKey(source, fingerprint);
    let record = this.stamps.get(key);
    // Redis drops a key once its clock is past the key's deadline (not at it).
    if (record && record.expiry < now) {
      this.stamps.delete(key);
      record = undefined;
    }
    if (!record && create) {
      record = { entries: new Map(), expiry: now + this.stampTtl };
      this.stamps.set(key, record);
    }
    return record;
  }

  /** Refreshes a record's expiry and moves it to the back, keeping the map in expiry order. */
  private touch(source: string, fingerprint: string, record: StampRecord, now: number): void {
    const key = stampMapKey(source, fingerprint);
    record.expiry = now + this.stampTtl;
    this.stamps.delete(key);
    this.stamps.set(key, record);
  }

  private trimStamps(now: number): void {
    let n = 0;
    for (const [key, record] of this.stamps) {
      if (n++ >= this.batch || record.expiry >= now) break;
      this.stamps.delete(key);
    }
  }
}

function assertToken(token: string): void {
  // The empty token marks a released stamp; as an owner it would match every released entry.
  if (token === '') throw new TypeError('an owner token must not be empty');
}
