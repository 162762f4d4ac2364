/**
 * The duplicate-ID cache port: one circular cache of IDs per target address, shared by every bridge (and every
 * replica) forwarding there, plus the stamp records that let a redelivered source message get back the ID that
 * was stamped on its first delivery.
 *
 * Protocol, per message: reserve → (forward) → commit, or release on failure. Every call carries an owner token
 * unique to one delivery of one message in one process, so a call that ioredis re-sends after a reconnect is
 * idempotent (a replayed reserve answers `reserved` again, never `duplicate`).
 *
 * All methods reject with TransientError when the store is unreachable: callers fail closed (hold, never forward
 * unchecked, never drop).
 *
 * IDs come from publishers and may be of any length; what a cache keeps of one is idCacheKey(id) (below), so that the
 * cache's size is set by id-cache-size, not by what publishers send. Every implementation applies it to every ID of an
 * address's cache (reserve, commit, commitMany, release, recorded); stamp records keep the IDs the bridge stamped,
 * which are short.
 */
import { createHash } from 'node:crypto';

/** Longest ID (UTF-8 bytes) a cache keeps as it is; a longer one is kept by its SHA-256 (idCacheKey). */
export const MAX_CACHED_ID_BYTES = 128;

/**
 * What the cache keeps of an ID: the ID itself up to MAX_CACHED_ID_BYTES bytes, else `sha256:` and its SHA-256 in
 * base64url (50 bytes). The one place this is decided: both caches call it, and their differential test covers it. The
 * forwarded header is never changed: this is the cache's key, not the message's ID.
 */
export function idCacheKey(id: string): string {
  // At most 3 bytes of UTF-8 per UTF-16 unit: up to 42 units is never over 128 bytes, and needs no counting.
  if (id.length <= 42 || Buffer.byteLength(id, 'utf8') <= MAX_CACHED_ID_BYTES) return id;
  return `sha256:${createHash('sha256').update(id, 'utf8').digest('base64url')}`;
}

export type ReserveResult =
  /**
   * This owner may forward the message. `possibleDuplicate` is true when the reservation was taken over from an
   * owner that vanished (crash, lost lease) or that marked its send as of unknown outcome: the target may already
   * hold a copy, so the forwarded copy must carry the possible-duplicate flag.
   */
  | { status: 'reserved'; possibleDuplicate: boolean }
  /** The ID is recorded for this address: drop the message (ack it at the source). */
  | { status: 'duplicate' }
  /** Another live owner holds a reservation for this ID right now: try again shortly. */
  | { status: 'busy' };

export type ClaimResult =
  /**
   * The caller now holds a stamp recorded for an earlier delivery of a message with this fingerprint. `done: false`:
   * forward under it, flagged as a possible duplicate when `possibleDuplicate` (the stamp was made flagged, see
   * recordStamp). `done: true`: it is the fingerprint's only stamp and its message was forwarded: drop the redelivery.
   */
  | { status: 'claimed'; id: string; possibleDuplicate: boolean; done: boolean }
  /** Look up which of `ids` are recorded at the target address (`recorded`), then claim again with the answer. */
  | { status: 'check'; ids: string[] }
  /**
   * No stamp to take: stamp a new ID. `possibleDuplicate`: a stamp of a handled message exists, so this may be a copy of
   * it whose ack was lost; flag the new copy, and record the stamp flagged.
   */
  | { status: 'none'; possibleDuplicate: boolean }
  /** A stamp this message may stand for is held by another owner: try again shortly, passing `since`. */
  | { status: 'busy'; since: number };

/** What a claimer knows, passed with each claim (see src/core/stamp-claim.ts for the protocol). */
export interface ClaimRequest {
  /**
   * The prefix of the tokens of the caller's own session. Stamps its live deliveries hold are theirs: a claim neither
   * waits for them nor asks about them.
   */
  ownPrefix: string;
  /**
   * The cache's clock (ms) at the first busy answer for this delivery, or 0 (= now). Stamps taken after it belong to
   * later deliveries: a claim does not wait for them.
   */
  since: number;
  /** IDs the caller found recorded at the target address (answer to a `check`): the stamps are marked done. */
  recorded: readonly string[];
  /** IDs the caller found not recorded at the target address (answer to a `check`): a free one may be taken. */
  notRecorded: readonly string[];
}

export interface IdCache {
  /** `redis` or `memory`, for logs. */
  readonly kind: string;
  /** Lease of a reservation or stamp (reservation-lease), ms: holders that live longer renew their stamps. */
  readonly lease: number;
  /** Resolves when the store answers (used at start and by the supervisor before resuming). */
  ping(): Promise<void>;

  /**
   * This process as the other owners of a shared cache see it (docs/design.md §10.3); absent for a cache only this
   * process uses (in memory), where every owner is alive. A Redis cache keeps it up from its first ping() on.
   */
  readonly liveness?: OwnerLiveness;

  reserve(address: string, id: string, token: string): Promise<ReserveResult>;
  /** Records the ID as forwarded (the circular cache evicts the oldest beyond its size) and ends the reservation. Idempotent. */
  commit(address: string, id: string, token: string): Promise<void>;
  /**
   * commit() of each pair, in one call: resolves once all are recorded, rejects if any failed (then some may be; a
   * replay is idempotent per token). `pairs` are fresh objects for this call alone: an implementation may keep them.
   */
  commitMany(address: string, pairs: readonly { id: string; token: string }[]): Promise<void>;
  /**
   * Ends this owner's reservation without recording the ID. `uncertain: true` when the message may have reached the
   * target (sent, confirmation never came): the next reserve of the ID then answers `reserved` with
   * `possibleDuplicate: true`. A release by a non-owner is a no-op. Idempotent.
   */
  release(address: string, id: string, token: string, uncertain: boolean): Promise<void>;

  /**
   * Records that `id` was stamped on a message with this fingerprint read from `source`, held by `token`. `flagged`:
   * every copy forwarded under it, by whichever delivery takes it later, is a possible duplicate.
   */
  recordStamp(source: string, fingerprint: string, id: string, token: string, flagged?: boolean): Promise<void>;
  /**
   * Which of `ids` are recorded (forwarded and committed, not expired) for the target address. Read-only; called only
   * for redelivered messages that choose among stamps.
   */
  recorded(address: string, ids: readonly string[]): Promise<boolean[]>;

  /**
   * For a redelivered message without a stable identity: takes a stamp recorded for its fingerprint whose ID is not
   * recorded at the target, never one of a handled message (see ClaimResult). Idempotent per token.
   */
  claimStamp(source: string, fingerprint: string, token: string, request: ClaimRequest): Promise<ClaimResult>;
  /**
   * Extends the lease of stamps of one fingerprint that live deliveries hold (the session calls it every third of the
   * lease). Resolves with the IDs among them that their tokens hold no more: those deliveries must not be forwarded.
   */
  renewStamps(source: string, fingerprint: string, held: readonly { id: string; token: string }[]): Promise<string[]>;
  /**
   * Marks a stamp done: its message was handled without its ID being recorded at the target (dead-lettered), so no
   * redelivery takes it. No-op for a non-owner.
   */
  markStampDone(source: string, fingerprint: string, id: string, token: string): Promise<void>;
  /** Forgets a stamp once its source message is acknowledged (and the ack reached the broker). */
  forgetStamp(source: string, fingerprint: string, id: string): Promise<void>;
  /** Lets a stamp be claimed again at once (its holder gave the message back unacked). No-op for a non-owner. */
  releaseStamp(source: string, fingerprint: string, id: string, token: string): Promise<void>;
  /**
   * Gives back the stamp of a message that was forwarded and acked, when the ack's arrival is unknown (the session
   * ended before an ack barrier proved it): the stamp is done and free, and a redelivery never drops itself under it
   * (rule 3 of ./stamp-claim.ts): it may be a byte-identical twin whose message is not at the target. No-op for a
   * non-owner.
   */
  releaseAckedStamp(source: string, fingerprint: string, id: string, token: string): Promise<void>;

  /**
   * False while the cache cannot vouch for what it holds of this address (or source): it lost its data, or may have
   * (a restart, a failover), within the loss window. A redelivered copy that the cache lets through meanwhile may have
   * been forwarded before the loss, so it is flagged as a possible duplicate. Meaningful after a call for the name.
   */
  vouchesFor(address: string): boolean;

  /**
   * How far back the cache of an address remembers: how many IDs it holds and the age of the oldest one (ms, by the
   * store's clock; null when it holds none). A publisher's re-send of an ID older than that passes as new. Read by the
   * supervisor every few seconds, never per message.
   */
  horizon(address: string): Promise<CacheHorizon>;

  close(): Promise<void>;
}

/**
 * Whether other processes see this one as alive: a reservation or stamp whose owner is not alive is taken over at once
 * (flagged) instead of after its lease. Read by the session's target gate before every send.
 */
export interface OwnerLiveness {
  /** True while this process's liveness surely holds in the shared store. */
  readonly live: boolean;
  /**
   * How many times it lapsed since start (frozen, or cut off from the store, for longer than its liveness lasts): a
   * reservation or stamp made before a lapse may have been taken over by another process meanwhile.
   */
  readonly lapses: number;
  /** Resolves once live (at once when it is). */
  untilLive(): Promise<void>;
}

export interface CacheHorizon {
  ids: number;
  oldestAgeMs: number | null;
}

/** The cache's semantics, the same for every implementation (from IdCacheConfig, plus housekeeping bounds). */
export interface IdCacheSemantics {
  /** id-cache-size: IDs kept per address. */
  size: number;
  /** id-cache-ttl in ms; undefined = no expiry by age. */
  ttl?: number;
  /** Reservation and stamp-claim lease, ms. */
  lease: number;
  /**
   * How long an "uncertain" marker (a send of unknown outcome, or a reservation whose owner vanished) is remembered,
   * so that the next reserve of the ID answers possibleDuplicate. Default 24 h.
   */
  markerRetention?: number;
  /** Most uncertain markers kept per address; the oldest beyond it are dropped. Default 100 000. */
  maxMarkers?: number;
  /** A fingerprint's stamp record is forgotten after this long without a write. Default 24 h. */
  stampTtl?: number;
  /** Most expired entries one call cleans up (bounded work per call). Default 100. */
  cleanupBatch?: number;
  /**
   * `id-cache-idle-expiry`, ms; undefined or 0 = never. Without `ttl`, an address that sees no reserve and no commit
   * for this long forgets its recorded IDs (Redis: its keys and epoch marker expire), so that addresses publishers
   * chose through a template do not stay in the cache for ever (docs/security.md#redis-memory).
   */
  idleExpiry?: number;
}
