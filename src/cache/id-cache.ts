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
 */

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
  /** A stamp recorded for an earlier delivery of a message with this fingerprint; reuse it. */
  | { status: 'claimed'; id: string }
  /** No stamp is recorded for this fingerprint: stamp a new ID. */
  | { status: 'none' }
  /** Stamps exist but are all held by live owners (in flight elsewhere): try again shortly. */
  | { status: 'busy' };

export interface IdCache {
  /** `redis` or `memory`, for logs. */
  readonly kind: string;
  /** Resolves when the store answers (used at start and by the supervisor before resuming). */
  ping(): Promise<void>;

  reserve(address: string, id: string, token: string): Promise<ReserveResult>;
  /** Records the ID as forwarded (the circular cache evicts the oldest beyond its size) and ends the reservation. Idempotent. */
  commit(address: string, id: string, token: string): Promise<void>;
  /**
   * Ends this owner's reservation without recording the ID. `uncertain: true` when the message may have reached the
   * target (sent, confirmation never came): the next reserve of the ID then answers `reserved` with
   * `possibleDuplicate: true`. A release by a non-owner is a no-op. Idempotent.
   */
  release(address: string, id: string, token: string, uncertain: boolean): Promise<void>;

  /** Records that `id` was stamped on a message with this fingerprint read from `source`, held by `token`. */
  recordStamp(source: string, fingerprint: string, id: string, token: string): Promise<void>;
  /** For a redelivered message without a stable identity: takes a free stamp recorded for its fingerprint. Idempotent per token. */
  claimStamp(source: string, fingerprint: string, token: string): Promise<ClaimResult>;
  /** Forgets a stamp once its source message is acknowledged (and the ack reached the broker). */
  forgetStamp(source: string, fingerprint: string, id: string): Promise<void>;
  /** Lets a stamp be claimed again at once (its holder gave the message back unacked). No-op for a non-owner. */
  releaseStamp(source: string, fingerprint: string, id: string, token: string): Promise<void>;

  close(): Promise<void>;
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
}
