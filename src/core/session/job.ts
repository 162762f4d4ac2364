/**
 * One source delivery on its way through a session, and the stage it is at (docs/design.md §7.3):
 *
 *   received ──prepare()──▶ forwarding ──confirmed by the target──▶ confirmed ──ID committed──▶ settled (acked)
 *                 │              └──refused max-delivery-attempts times──▶ dead-lettered ──▶ settled
 *                 ├──▶ looped (its x-bridge-path says it would loop, ./loop-guard.ts; nothing asked of the cache) ──▶ settled
 *                 ├──▶ filtered (the bridge's filter does not select it; nothing asked of the cache) ──▶ settled
 *                 ├──▶ unresolved (its target address cannot be resolved) ──▶ dead-lettered ──▶ settled
 *                 ├──▶ unread (the source could not read it whole) ──▶ dead-lettered, or handed back ──▶ settled
 *                 ├──▶ duplicate ──▶ settled
 *                 └──▶ busy / claim-busy ──parked, prepared again──▶ (busy, claim-busy, duplicate or forwarding)
 *
 * Job.moveTo() is the one way a stage changes, checked against MOVES below. A job that never reaches `settled` (the
 * session ended first) stays unacked, and teardown gives back what its stage says it holds (./teardown.ts).
 */
import type { BridgeMessage, SourceDelivery, Unreadable } from '../message.js';
import type { ResolvedRoute } from '../../config/protocol.js';

/** Just received: prepare() is resolving its duplicate ID and reserving it. */
export interface Received {
  readonly stage: 'received';
}

/**
 * A redelivery whose stamp may still be held by an earlier holder (usually a crashed process, until its lease runs
 * out), so its ID is not known yet (see ../stamp-claim.ts). `claimSince`: the cache's clock at its first busy answer.
 */
export interface ClaimBusy {
  readonly stage: 'claim-busy';
  readonly claimSince: number;
}

/** Another owner holds a reservation of its ID (a copy in flight here or in a replica). */
export interface Busy {
  readonly stage: 'busy';
  readonly id: string;
  /** Its stamp says a handled copy of it may exist (../stamp-claim.ts): its copy will carry the flag. */
  readonly flagged: boolean;
}

/**
 * The bridge's filter does not select it: skipped (acked) or moved to the dead-letter destination, by filter-miss
 * (./filter.ts). Decided before anything touched the cache, so it holds nothing there.
 */
export interface Filtered {
  readonly stage: 'filtered';
}

/**
 * Its loop path says forwarding it would make a loop (a broker already on its path, or past max-hops): acked without
 * being forwarded, and counted as dropped (./loop-guard.ts). Decided before anything touched the cache.
 */
export interface Looped {
  readonly stage: 'looped';
  readonly why: string;
}

/**
 * Why a message has no target address it may go to (./route.ts): the dead-letter reason, its detail, and the refused
 * value, encoded (the x-bridge-unsafe-value header), if any.
 */
export interface Unrouted {
  reason: 'unresolved-address' | 'unsafe-address' | 'too-many-addresses';
  detail: string;
  value?: string;
}

/** The target's address template gives it no address it may go to (./route.ts): it is dead-lettered, never sent. */
export interface Unresolved {
  readonly stage: 'unresolved';
  readonly why: Unrouted;
}

/**
 * The source could not read it whole (SourceDelivery.unreadable): settled alone by ./unreadable.ts — dead-lettered
 * with what was read, or handed to the broker's own dead-letter path — before the filter and the cache see it.
 */
export interface Unread {
  readonly stage: 'unread';
  readonly why: Unreadable;
}

/** Its ID is already recorded for the target address: acked without being forwarded. */
export interface Duplicate {
  readonly stage: 'duplicate';
  readonly id: string;
}

/**
 * Its ID is reserved at the target address (when deduplicating), and its copy is sent or about to be. The send stages
 * (./target-gate.ts, ./dead-letter.ts) pass this around; it knows its job. Its mutable fields are the target gate's.
 */
export interface Forwarding {
  readonly stage: 'forwarding';
  readonly job: Job;
  /** The reserved ID; undefined without duplicate detection (nothing is reserved then). */
  readonly id: string | undefined;
  /** What is sent to the target: the message with its duplicate ID (and flag). */
  outgoing: BridgeMessage;
  /** Refusals counted against max-delivery-attempts. */
  attempts: number;
  /** It was written to the target at least once: a lost confirmation means the outcome is unknown. */
  sent: boolean;
  /**
   * This process's liveness lapses counted when its ID was reserved (OwnerLiveness.lapses): after another lapse the
   * reservation may have been taken over, so the copy goes out flagged (the target gate checks before each send).
   */
  readonly lapses: number;
}

/** The target confirmed it; its ID is being committed before the ack. */
export interface Confirmed {
  readonly stage: 'confirmed';
  /** The reserved ID; undefined without duplicate detection. */
  readonly id: string | undefined;
}

/** Moved to the dead-letter destination; its reservation given back (the ID never reached the target). */
export interface DeadLettered {
  readonly stage: 'dead-lettered';
  readonly id: string | undefined;
}

/** Acked at the source: done. */
export interface Settled {
  readonly stage: 'settled';
}

/** What prepare() leaves a job in: the send loop forwards it, drops it as a duplicate, filters it out, dead-letters it
 * when its address cannot be resolved, or parks it. */
export type Prepared = Looped | Filtered | ClaimBusy | Busy | Duplicate | Forwarding | Unresolved | Unread;

export type JobState = Received | Prepared | Confirmed | DeadLettered | Settled;

/** The stages that carry no data are shared: a job's way through the session allocates only what it must. */
export const RECEIVED: Received = Object.freeze({ stage: 'received' });
export const SETTLED: Settled = Object.freeze({ stage: 'settled' });
export const FILTERED: Filtered = Object.freeze({ stage: 'filtered' });

/**
 * The stamp record a job's ID came from (no header, no stable identity): its lease is renewed while the job lives, and
 * the record is forgotten once the job's ack provably reached the broker (see ./stamps.ts).
 */
export interface StampHold {
  readonly fingerprint: string;
  readonly id: string;
  /** When its lease was last set (recorded, claimed or renewed), local clock: renewals skip young leases. */
  readonly leasedAt: number;
}

/** The stamp record of an acked message, until an ack barrier proves the ack reached the broker (./stamps.ts). */
export interface AckedStamp {
  readonly fingerprint: string;
  readonly id: string;
  /** The token of the job that held it: the record is still held by it. */
  readonly token: string;
}

type Stage = JobState['stage'];

/**
 * The moves a job may make (the diagram above), the one table Job.moveTo() checks. Preparing again (a parked job)
 * starts from busy or claim-busy; the send stages leave `forwarding` only for confirmed or dead-lettered (held,
 * resent and suspect messages stay `forwarding`: the target gate keeps them, ./target-gate.ts).
 */
const MOVES: Readonly<Record<Stage, readonly Stage[]>> = {
  received: ['looped', 'filtered', 'unresolved', 'unread', 'claim-busy', 'busy', 'duplicate', 'forwarding'],
  'claim-busy': ['claim-busy', 'busy', 'duplicate', 'forwarding'],
  busy: ['busy', 'duplicate', 'forwarding'],
  looped: ['settled'],
  filtered: ['settled'],
  unresolved: ['dead-lettered'],
  // Settled straight from here when handed back to the broker (SourceEndpoint.reject).
  unread: ['dead-lettered', 'settled'],
  duplicate: ['settled'],
  forwarding: ['confirmed', 'dead-lettered'],
  confirmed: ['settled'],
  'dead-lettered': ['settled'],
  settled: [],
};

/** True when a job at `from` may move to `to` (see MOVES). */
export function canMove(from: Stage, to: Stage): boolean {
  return MOVES[from].includes(to);
}

/** A move the table does not allow: a bug in the session, never retried. */
export class IllegalJobMove extends Error {
  constructor(from: Stage, to: Stage) {
    super(`a job cannot move from '${from}' to '${to}' (see MOVES in src/core/session/job.ts)`);
    this.name = 'IllegalJobMove';
  }
}

/** A stamp or route set outside its one moment (see Job.routeTo, Job.holdStamp): a bug in the session, never retried. */
export class IllegalJobChange extends Error {
  constructor(what: 'stamp' | 'route', stage: Stage) {
    super(`a job's ${what} cannot be set at '${stage}', or twice (see src/core/session/job.ts)`);
    this.name = 'IllegalJobChange';
  }
}

export class Job {
  private current: JobState = RECEIVED;
  private preparation: Promise<Prepared> | undefined = undefined;
  private stampHold: StampHold | undefined = undefined;
  private resolved: ResolvedRoute | undefined = undefined;

  constructor(
    readonly delivery: SourceDelivery,
    /** performance.now() at delivery, for the forward-latency histogram. */
    readonly receivedAt: number,
    /** The owner token of every reservation and stamp this job holds. */
    readonly token: string,
  ) {}

  get state(): JobState {
    return this.current;
  }

  /** The one way a job changes stage: throws IllegalJobMove for a move the table does not allow. */
  moveTo<S extends JobState>(next: S): S {
    if (!canMove(this.current.stage, next.stage)) throw new IllegalJobMove(this.current.stage, next.stage);
    this.current = next;
    return next;
  }

  /** The stamp record its ID came from (set by holdStamp); undefined when the ID came from a header or the source. */
  get stamp(): StampHold | undefined {
    return this.stampHold;
  }

  /** Where it goes, for a templated target (set by routeTo); undefined: the target's fixed address. */
  get route(): ResolvedRoute | undefined {
    return this.resolved;
  }

  /**
   * Its target address resolved (./route.ts): once, while it is first prepared (`received`); a parked job keeps it.
   * Throws IllegalJobChange otherwise.
   */
  routeTo(route: ResolvedRoute): void {
    if (this.current.stage !== 'received' || this.resolved !== undefined) throw new IllegalJobChange('route', this.current.stage);
    this.resolved = route;
  }

  /**
   * Its ID taken from a stamp record, claimed back or recorded new (./prepare.ts): once, while it is being prepared
   * (`received`, or `claim-busy` when it waited for an earlier holder). Throws IllegalJobChange otherwise.
   */
  holdStamp(hold: StampHold): void {
    const stage = this.current.stage;
    if ((stage !== 'received' && stage !== 'claim-busy') || this.stampHold !== undefined) throw new IllegalJobChange('stamp', stage);
    this.stampHold = hold;
  }

  /** Its stamp's lease was renewed at `at` (local clock, ./stamps.ts). */
  stampLeased(at: number): void {
    if (this.stampHold !== undefined) this.stampHold = { ...this.stampHold, leasedAt: at };
  }

  /**
   * Starts its preparation (its first, or again for a parked job): `run` is prepare() of ./prepare.ts, which resolves
   * its duplicate ID and reserves it; `settled` is called once it resolved or rejected. The send loop awaits `prepared`
   * in source order.
   */
  startPreparing(run: (job: Job) => Promise<Prepared>, settled?: () => void): void {
    const preparation = run(this);
    // The loop awaits it in order; an early rejection must not surface as unhandled in between. `settled` (its turn
    // given back, ../prepare-turns.ts) is that handler when there is one: no second promise for it.
    if (settled) preparation.then(settled, settled);
    else preparation.catch(() => undefined);
    this.preparation = preparation;
  }

  /** Its preparation has started (the first may wait for a turn of the process's, ../prepare-turns.ts). */
  get preparing(): boolean {
    return this.preparation !== undefined;
  }

  /** The latest preparation; only once `preparing` (the send loop waits for that first). */
  get prepared(): Promise<Prepared> {
    if (this.preparation === undefined) throw new Error('a job was sent on before its preparation started (a bug in the session)');
    return this.preparation;
  }
}

/** A job whose ID came from a stamp record. */
export function hasStamp(job: Job): job is Job & { stamp: StampHold } {
  return job.stamp !== undefined;
}
