/**
 * A process-wide bound on the jobs being prepared (./session/prepare.ts: duplicate ID, stamp, reservation) at once,
 * shared fairly by the sessions of the process (issue 47, item 4).
 *
 * Why: a delivery costs little while it only waits in its session's queue (its Job and the message), but ~1.5 KiB more
 * once its preparation runs — the suspended prepare(), the cache call's promises and closures, its item in the cache's
 * address batcher — and the batcher sends at most two calls of 200 IDs per address at a time. 1,000 bridges that all
 * forward to one address took their 20,000 deliveries in two seconds and started every preparation at once: 20,000
 * reservations waited in the batcher, each with its whole chain, for the ~16 s the address needed to answer them
 * (docs/measurements.md "Memory by default"). Started a few at a time, they go through as fast (the batcher is kept
 * full), and the rest wait as plain jobs.
 *
 * Fairness (docs/design.md §10.2: a bridge is never starved by its neighbours): a session may always have FLOOR jobs
 * preparing, whatever the others hold — so one whose cache calls hang (a Redis Cluster master down for its address)
 * can hold many turns but never stop a bridge beside it; past its floor, a session takes a turn only while fewer
 * than LIMIT are taken in all, and the turns that come free go to the sessions waiting, round robin, one each.
 *
 * A session's jobs start in the order they were offered (source order: the send loop waits for them in that order).
 * Preparing a parked job again (./session/park.ts) takes no turn: it is bounded by the session's prefetch already.
 */
import { Deque } from '../shared/deque.js';

/**
 * Turns in the process: above the prefetch of one bridge (500 by default, 1,000 in the steady-rate bench), so that a
 * bridge alone never waits for one, and over twice the address batcher's 2 × 200 IDs, so that one address's batches
 * leave full.
 */
export const PREPARE_TURNS = 1024;
/** Turns a session may always take, beyond the process's limit: its progress never depends on its neighbours'. */
export const PREPARE_FLOOR = 1;

/**
 * The turns of one process. The session owns its share (join(), one per session); the share's owner starts its jobs
 * through it. Not thread-safe and needs not be: one event loop.
 */
export class PrepareTurns {
  private taken = 0;
  /** Shares with work waiting, each at most once, in the order they get their next turn. */
  private readonly ring = new Deque<PrepareShare<unknown>>();

  constructor(
    readonly limit: number = PREPARE_TURNS,
    readonly floor: number = PREPARE_FLOOR,
  ) {}

  /** Turns taken now (for tests and the bench). */
  get inUse(): number {
    return this.taken;
  }

  /** A share for one session: `start` runs a job's preparation; the share's done() must follow when it settles. */
  join<T>(start: (item: T) => void): PrepareShare<T> {
    return new PrepareShare(this, start);
  }

  /** @internal A share may take a turn now: within its floor, or while the process has turns left. */
  mayTake(holding: number): boolean {
    return holding < this.floor || this.taken < this.limit;
  }

  /** @internal */
  took(): void {
    this.taken += 1;
  }

  /** @internal A turn came back: the next shares waiting get the free turns, one each, round robin. */
  gaveBack(): void {
    this.taken -= 1;
    this.serve();
  }

  /** @internal `share` has work it could not start: it waits for a turn. */
  wait(share: PrepareShare<unknown>): void {
    this.ring.push(share);
  }

  private serve(): void {
    while (this.taken < this.limit) {
      const share = this.ring.shift();
      if (share === undefined) return;
      // A share that ended or emptied since it joined the ring leaves it here.
      if (share.startNext()) this.ring.push(share);
    }
  }
}

/** One session's turns: its jobs waiting to start, in order, and how many of its jobs are preparing. */
export class PrepareShare<T> {
  private readonly waiting = new Deque<T>();
  private holding = 0;
  private inRing = false;
  private closed = false;

  constructor(
    private readonly turns: PrepareTurns,
    private readonly start: (item: T) => void,
  ) {}

  /** Jobs of this share waiting for a turn. */
  get queued(): number {
    return this.waiting.length;
  }

  /** A job to prepare: started now when a turn is free for it (and nothing of this share waits before it), else queued. */
  offer(item: T): void {
    if (this.closed) return;
    if (this.waiting.length === 0 && this.turns.mayTake(this.holding)) {
      this.run(item);
      return;
    }
    this.waiting.push(item);
    this.enterRing();
  }

  /** One of its preparations settled (resolved or rejected): its turn comes back. */
  done(): void {
    this.holding -= 1;
    // Its own floor first: a share below it never waits for the ring.
    if (this.holding < this.turns.floor && this.waiting.length > 0 && !this.closed) this.run(this.waiting.shift() as T);
    this.turns.gaveBack();
  }

  /** The session ended: nothing more starts; the jobs still waiting stay unacked (the broker redelivers them). */
  close(): void {
    this.closed = true;
    while (this.waiting.length > 0) this.waiting.shift();
  }

  /** @internal Starts its next job on a turn the ring gave it; true while it has more waiting. */
  startNext(): boolean {
    this.inRing = false;
    if (this.closed || this.waiting.length === 0) return false;
    this.run(this.waiting.shift() as T);
    if (this.waiting.length === 0) return false;
    this.inRing = true;
    return true;
  }

  private enterRing(): void {
    if (this.inRing) return;
    this.inRing = true;
    this.turns.wait(this as PrepareShare<unknown>);
  }

  private run(item: T): void {
    this.holding += 1;
    this.turns.took();
    this.start(item);
  }
}

/** The process's turns: every session that is not given others shares them (SessionDeps.turns). */
export const processTurns = new PrepareTurns();
