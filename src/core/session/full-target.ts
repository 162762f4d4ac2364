/**
 * The target gate's full-target probing (docs/design.md §7.2, `wait-for-room` in ./refusal-policy.ts): a message the
 * target refuses as full is held, the gate closes, and once nothing else is in flight the oldest held message probes
 * the target alone after a pause (longer after each refusal, up to max-retry-interval). Taken, the other held messages
 * go back to the send loop ahead of new work (pipelined, in order) and the gate opens. Nothing here counts as a
 * delivery attempt or is flagged: "full" is "not delivered".
 *
 * After a full refusal the gate also sends through a window that starts at one message in flight and grows by one per
 * window's worth of confirmations (TCP's congestion avoidance), back to unbounded at the prefetch: a target near full
 * then refuses a few messages, not a pipeline of them that later ones overtake.
 */
import type { SessionContext } from './context.js';
import type { Forwarding } from './job.js';
import type { MessageRejectedError } from '../../shared/errors.js';
import type { GateSender } from './gate-sender.js';
import { Signal } from '../../shared/signal.js';
import { pauseBefore } from './refusal-policy.js';

/** A target that took everything for this long and refuses again starts a new episode (one warning, one count). */
const EPISODE_GAP_MS = 5000;

export class FullTarget {
  /** Refused as full, in source order: sent again after a pause, the first one alone. */
  private readonly held: Forwarding[] = [];
  /** When the target last started refusing as full (Date.now()); undefined while it takes messages. */
  private fullSince: number | undefined = undefined;
  /** When the target last took everything held (Date.now()); 0 = never full. */
  private fullEndedAt = 0;
  /** Most sends in flight: unbounded, but for a while after a full refusal (one at first, one more per window of confirmations). */
  private window = Number.POSITIVE_INFINITY;
  private probing = false;
  /** A full target's pause (only ever ended early by the session's end). */
  private readonly roomPause = new Signal();

  constructor(
    private readonly ctx: SessionContext,
    private readonly gate: GateSender,
  ) {}

  /** When the target started refusing as full (Date.now()); undefined while it takes messages. */
  get since(): number | undefined {
    return this.fullSince;
  }

  /** The most sends the gate lets be in flight now. */
  get limit(): number {
    return Math.floor(this.window);
  }

  /** Sending through the window a full refusal opened (not yet back to unbounded): one message per send, no batches. */
  get windowed(): boolean {
    return this.window !== Number.POSITIVE_INFINITY;
  }

  /**
   * A send was confirmed: the window grows by one per window's worth of confirmations, back to unbounded at the
   * prefetch. Returns whether it grew (the gate may open).
   */
  confirmed(): boolean {
    if (this.window === Number.POSITIVE_INFINITY) return false;
    const grown = this.window + 1 / this.window;
    this.window = grown >= this.ctx.cfg.prefetch ? Number.POSITIVE_INFINITY : grown;
    return true;
  }

  /** The session ended: the pause returns. */
  ended(): void {
    this.roomPause.wake();
  }

  /** Holds a message the target refused as full, and starts the wait for room (once) if it is not running. */
  hold(sending: Forwarding, err: MessageRejectedError): void {
    const ctx = this.ctx;
    this.keep(sending);
    // From now on the target is near full: one send in flight, more as it takes them.
    this.window = 1;
    if (this.fullSince === undefined) {
      const now = Date.now();
      this.fullSince = now;
      // A queue that stays full refuses again right after each probe found room: one warning (and one count) per
      // episode, not per probe — an episode ends when the target took everything for EPISODE_GAP_MS.
      if (now - this.fullEndedAt > EPISODE_GAP_MS) {
        ctx.deps.metrics.targetFullWaits.inc({ bridge: ctx.cfg.name });
        ctx.log.warn({ reason: err.message }, 'target is full: taking no new work, and sending the refused messages again after a pause (not counted as delivery attempts)');
      }
      ctx.deps.observer?.conditionChanged();
    }
    void this.waitForRoom().catch((e: unknown) => ctx.fail(e));
  }

  /**
   * Adds a message to the held ones in source order: refusals arrive in the order of their confirmations (a batch's
   * members, several batches), and the oldest held message is the one that probes, the others go back in order.
   */
  keep(sending: Forwarding): void {
    const seq = sending.job.delivery.seq;
    let i = this.held.length;
    while (i > 0 && this.held[i - 1]!.job.delivery.seq > seq) i -= 1;
    this.held.splice(i, 0, sending);
  }

  private async waitForRoom(): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    const ctx = this.ctx;
    let tries = 0;
    try {
      while (this.held.length > 0 && !ctx.ended) {
        // The sends still in flight settle first; those the target refuses as full join the held ones.
        await this.gate.untilIdle();
        if (ctx.ended) return;
        await this.roomPause.wait(pauseBefore(tries, ctx.cfg.maxRetryInterval));
        if (ctx.ended) return;
        // One message probes for room; once the target takes it, the others go out as usual, pipelined, in order:
        // those it refuses as full again come back here. Sending them one at a time instead would cap the rate at one
        // round trip (confirm and commit) per message, below what a consumer draining the queue makes room for.
        const probe = this.held[0]!;
        const outcome = await this.gate.sendAlone(probe);
        if (outcome.kind !== 'settled') {
          tries += 1;
          continue;
        }
        this.held.shift();
        tries = 0;
        // Back to the send loop, ahead of new deliveries (their `prepared` is this same Forwarding: the reservation
        // holds), then the gate opens.
        ctx.requeue(this.held.splice(0).map((s) => s.job));
        this.roomTaken();
      }
    } finally {
      this.probing = false;
      if (this.held.length === 0 && this.fullSince !== undefined && !ctx.ended) this.roomTaken();
      if (!ctx.ended) {
        // Debug: it comes after every probe that found room, many times a second while a consumer drains a full queue.
        ctx.log.debug('target takes messages again: resuming');
        ctx.deps.observer?.conditionChanged();
      }
      this.gate.wakeOpened();
    }
  }

  private roomTaken(): void {
    this.fullSince = undefined;
    this.fullEndedAt = Date.now();
  }
}
