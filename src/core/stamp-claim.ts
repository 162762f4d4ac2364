/**
 * How a redelivered message without a stable identity gets back the ID stamped on its first delivery (docs/design.md §3.2).
 *
 * Records: every first delivery without an ID stamps a fresh random ID and records it under the message's fingerprint
 * (source address + SHA-256 of body, properties and headers), held by the delivery's token with a lease that the
 * session renews while it works on the message. The record is forgotten only once the message's ack provably reached
 * the broker (an ack barrier). Messages with byte-identical content share a fingerprint: they are interchangeable,
 * and a redelivery cannot tell which record was its own.
 *
 * What a redelivered message can be, when its previous holder died:
 *   (c) stamped, not forwarded (or sent with an unknown outcome): its record is there, its ID is not recorded at
 *       the target;
 *   (a) forwarded and committed, its ack not processed by the broker (not sent yet, or lost with the connection):
 *       its record is there, its ID is recorded;
 *   (b) delivered but never stamped: RabbitMQ had pushed it (prefetch) but the bridge died before it recorded a stamp
 *       — often hundreds of messages, the bytes still in the socket buffer;
 * and the records of messages that were acked (the broker has them no more) stay until the next barrier, with IDs
 * recorded at the target — indistinguishable from (a).
 *
 * The rules (this module and stamp-claim-1.lua), per redelivery, after asking the target's cache about every record
 * not yet known to be handled:
 *   1. take a free record whose ID the target's cache says is **not recorded**, and forward under it;
 *   2. else, while a record not known to be handled is held by another owner since before this message asked (a live
 *      one, or a crashed one whose lease still runs), wait: that record may be this message's own;
 *   3. else, if the fingerprint's **only** record is a handled one (ID recorded, or dead-lettered) of a crashed
 *      owner, take it and drop the redelivery as its duplicate: the same ID as ever for an (a) message;
 *   4. else stamp a **new** ID, flagged as a possible duplicate when a record of a handled message exists (and the
 *      new record keeps the flag, for whoever forwards under it later).
 * Records held by the claimer's own session (alive: it is asking, and it renews its leases) and records taken after
 * it first asked belong to other deliveries: a claim neither waits for them nor asks about them.
 *
 * Why nothing is lost and no copy gets a second ID unflagged:
 * - A (c) message's record is free and not recorded: some redelivery takes it by rule 1 (rule 1 always wins), so one
 *   copy goes out under it. If its send had an unknown outcome, the target cache's abandoned reservation or uncertain
 *   marker makes reserve flag the resend. Records are handed out in any order: a (c) message whose record another
 *   redelivery took gets a new ID by rule 4 — the two swapped, and the target holds one copy per message.
 * - A (c) message whose record is still held by its crashed owner waits for the lease (rule 2); records of live
 *   deliveries never run out (leases renewed), so rule 1 never takes a record from a delivery still at work.
 * - An (a) message, or an acked one whose ack was lost: if its record is the fingerprint's only one, rule 3 drops it
 *   under its own ID (unique content: exactly as before issue 12). With byte-identical messages in play, it cannot
 *   be told from a (b) message, so rule 4 forwards it again under a new ID, flagged because its own record is done.
 *   It may also take a free (c) record by rule 1: then the (c) message gets a new ID by rule 4, flagged for the same
 *   reason. Every extra copy is flagged.
 * - A (b) message takes a free (c) record or gets a new ID; its flag, if any, is a false alarm.
 * - Dead-lettered: its record is marked done before the ack, so no redelivery forwards under its ID.
 * (Before issue 12 a claim took any free record, often one of a message forwarded and acked whose record waited for
 * the ack barrier, and the redelivery was dropped as its duplicate: with two replicas killed, 138–297 of 1,500
 * identical messages were lost per round.)
 *
 * Limits: rule 3 drops a (b) message whose byte-identical twin was forwarded and acked within one ack-barrier interval
 * before a crash and left the fingerprint's only record; the ack barrier runs every 50 ms to keep that window
 * short. A session that ends without a crash (its connection lost) closes the window: the stamps of messages acked
 * since the last barrier go back marked `u` (ack unknown, ./session/teardown.ts), done for every rule but rule 3, so a
 * redelivery finding only such a stamp gets a new ID, flagged (rule 4). A redelivery that comes back after its recorded ID left the circular cache reads it as not recorded (the
 * first check marks it done for good, so this needs the stream to pass the whole cache before any redelivery of that
 * fingerprint asks). A delivery whose lease could not be renewed (the cache unreachable for a whole lease) may find its
 * record taken; the session then ends so that the broker redelivers it.
 */
import type { IdCache } from './id-cache.js';

export type StampClaim =
  /** Forward under `id`, flagged when `possibleDuplicate`; or, when `done`, drop as a duplicate of its message. */
  | { status: 'claimed'; id: string; possibleDuplicate: boolean; done: boolean }
  /** No record to take: stamp a new ID, recorded and forwarded flagged when `possibleDuplicate`. */
  | { status: 'none'; possibleDuplicate: boolean }
  /** A record this message may stand for is held by another owner: try again later with `since`. */
  | { status: 'busy'; since: number };

/** Check rounds per attempt: new records may appear between the check and the claim; after that many, try later. */
const MAX_CHECK_ROUNDS = 4;
/** After a busy answer for a fingerprint, further claims for it in this session wait this long before asking again. */
const BUSY_HOLD_MS = 50;

export interface StampClaimsDeps {
  cache: IdCache;
  sourceAddress: string;
  targetAddress: string;
  /** Prefix of this session's tokens (every token is `${prefix}${n}`). */
  ownPrefix: string;
  /** Runs one cache call, retrying while the cache is unreachable (the session's fail-closed policy). */
  call: <T>(fn: () => Promise<T>) => Promise<T>;
  /** The clock of the busy hold, ms. Default Date.now. */
  now?: () => number;
}

/**
 * The claims of one session. Claims of one fingerprint go one at a time (they compete for the same records, and a
 * burst of identical redeliveries would otherwise read the same hash hundreds of times at once); after a busy answer
 * the fingerprint is left alone for a moment, so that many parked redeliveries cost the cache one question, not one
 * each.
 */
export class StampClaims {
  private readonly lines = new Map<string, Promise<unknown>>();
  private readonly busyUntil = new Map<string, number>();
  private readonly now: () => number;

  constructor(private readonly deps: StampClaimsDeps) {
    this.now = deps.now ?? Date.now;
  }

  /**
   * `since`: what the first busy answer for this delivery said (0 before one came). `targetAddress`: the address the
   * message goes to (a templated target's resolved one), default the session's.
   */
  claim(fingerprint: string, token: string, since: number, targetAddress = this.deps.targetAddress): Promise<StampClaim> {
    const prev = this.lines.get(fingerprint) ?? Promise.resolve();
    const mine = prev.then(() => this.attempt(fingerprint, token, since, targetAddress));
    const tail = mine.then(
      () => undefined,
      () => undefined,
    );
    this.lines.set(fingerprint, tail);
    void tail.then(() => {
      if (this.lines.get(fingerprint) === tail) this.lines.delete(fingerprint);
    });
    return mine;
  }

  private async attempt(fingerprint: string, token: string, since: number, targetAddress: string): Promise<StampClaim> {
    const until = this.busyUntil.get(fingerprint);
    if (until !== undefined) {
      if (this.now() < until) return { status: 'busy', since };
      this.busyUntil.delete(fingerprint);
    }
    const { cache, sourceAddress, ownPrefix, call } = this.deps;
    let recorded: string[] = [];
    const notRecorded = new Set<string>();
    for (let round = 0; round < MAX_CHECK_ROUNDS; round++) {
      const request = { ownPrefix, since, recorded, notRecorded: [...notRecorded] };
      const r = await call(() => cache.claimStamp(sourceAddress, fingerprint, token, request));
      if (r.status === 'check') {
        const flags = await call(() => cache.recorded(targetAddress, r.ids));
        // Within one attempt (milliseconds) the answers still hold: a free record is written by nobody, and a held one
        // that gets recorded meanwhile is only waited for. Recorded IDs are marked done for good by the next call.
        recorded = r.ids.filter((_, i) => flags[i]);
        for (const [i, id] of r.ids.entries()) if (!flags[i]) notRecorded.add(id);
        continue;
      }
      if (r.status === 'busy') {
        this.busyUntil.set(fingerprint, this.now() + BUSY_HOLD_MS);
        return { status: 'busy', since: since > 0 ? since : r.since };
      }
      return r;
    }
    this.busyUntil.set(fingerprint, this.now() + BUSY_HOLD_MS);
    return { status: 'busy', since };
  }
}
