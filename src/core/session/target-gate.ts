/**
 * The target gate: everything between "a job is ready to send" and "its outcome is known" (docs/design.md §7.2). It
 * owns the sends in flight, what holds new sends back — flow control, messages being sent one at a time, a full
 * target, the send window after one — the messages it holds (alone, held) and their wake-ups, and the one attempt()
 * that every send goes through, so that every path marks, counts and classifies a send the same way.
 *
 * The send loop (./send-loop.ts) asks one question, `await gate.open()`, then hands a message (or a batch) to send().
 * Sends are pipelined: many are in flight, and each outcome is handled when it comes:
 * - confirmed: the job is confirmed, its ID committed and the source acked (./settle.ts);
 * - refused: ./refusal-policy.ts says what it means, and the gate does it:
 *   - `wait-for-room` (the target is full): the message is held, the gate closes, and once nothing else is in flight
 *     the first held message probes the target alone after a pause (longer after each refusal, up to
 *     max-retry-interval). Taken, the other held messages go back to the send loop ahead of new work (pipelined, in
 *     order) and the gate opens. Nothing here counts as a delivery attempt or is flagged: "full" is "not delivered".
 *   - `isolate` (refused as one of several, without saying which): the message is flagged (it may have been
 *     delivered) and sent again alone (below), so that a refusal now names its message (the culprit is dead-lettered,
 *     the innocent go through);
 *   - `resend`: the attempt is counted and the message sent again alone (below);
 *   - `dead-letter`: counted, and moved to the dead-letter destination (./dead-letter.ts);
 *   - `end-session`: the session ends; the broker redelivers what was not settled.
 * Alone: a message sent again after a refusal (a suspect, one refused for itself, a batch member whose transaction
 * was refused for another) goes out with nothing else in flight, and the gate stays closed to new sends meanwhile: only
 * the sends in flight when it was refused may overtake it, no later message (docs/delivery.md, "Order"); the send
 * loop sends in source order. After a full refusal the gate also sends through a window that starts at one message
 * in flight and grows by one per window's worth of confirmations (TCP's congestion avoidance), back to unbounded at
 * the prefetch: a target near full then refuses a few messages, not a pipeline of them that later ones overtake.
 *
 * Liveness (docs/design.md §10.3): while this process's liveness does not hold in the shared cache (frozen, or cut
 * off from Redis, longer than it lasts), other processes may take over its reservations and stamps. The gate then
 * stays closed; once liveness holds again it checks that the stamps of the messages in flight are still theirs (the
 * session ends if one is not: two messages must never share a stamped ID), and every copy reserved before the lapse
 * goes out flagged (its reservation may have been taken over, and its copy be a second).
 */
import type { SessionContext } from './context.js';
import type { Forwarding } from './job.js';
import { CONFIRMED, failedMember, type BatchMemberResult } from '../batch-result.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import { POSSIBLE_DUPLICATE_HEADER, withPossibleDuplicateFlag } from '../duplicate-id.js';
import { Signal } from '../../shared/signal.js';
import { deadLetter } from './dead-letter.js';
import { pauseBefore, refusalAction } from './refusal-policy.js';
import { commitAndAck, confirm } from './settle.js';
import { renewStamps } from './stamps.js';

/** A target that took everything for this long and refuses again starts a new episode (one warning, one count). */
const EPISODE_GAP_MS = 5000;
/** After a lapse, how soon the stamps in flight are checked again when the cache did not answer. */
const STAMP_CHECK_RETRY_MS = 100;

/** A send that failed: its result, as a batch member's would be (../batch-result.ts). */
type Failed = Exclude<BatchMemberResult, { outcome: 'confirmed' }>;

/** How a message sent alone ended: settled (confirmed and acked, or dead-lettered), refused as full, or cut short. */
type AloneOutcome = { kind: 'settled' } | { kind: 'full'; error: MessageRejectedError } | { kind: 'ended' };

export class TargetGate {
  /** Sends written and not settled yet (a batch counts once). */
  private inFlight = 0;
  /** The target's broker blocks publishing (flow control, AMQP connection.blocked). */
  private blocked = false;
  /** Refused (ambiguously, for themselves, or with their transaction): sent again one at a time, nothing else in flight. */
  private readonly alone: Forwarding[] = [];
  private sendingAlone = false;
  /** Most sends in flight: unbounded, but for a while after a full refusal (one at first, one more per window of confirmations). */
  private window = Number.POSITIVE_INFINITY;
  /** Refused as full: sent again after a pause, the first one alone. */
  private readonly held: Forwarding[] = [];
  /** When the target last started refusing as full (Date.now()); undefined while it takes messages. */
  private fullSince: number | undefined = undefined;
  /** When the target last took everything held (Date.now()); 0 = never full. */
  private fullEndedAt = 0;
  private waitingForRoom = false;
  /** The liveness lapses whose aftermath (the stamps in flight checked) is dealt with. */
  private lapsesChecked: number;

  /** The gate may have opened: the target unblocked, an isolation ended, the target took the held messages. */
  private readonly opened = new Signal();
  /** Nothing is in flight any more. */
  private readonly idle = new Signal();
  /** A full target's pause (only ever ended early by the session's end). */
  private readonly roomPause = new Signal();

  constructor(private readonly ctx: SessionContext) {
    this.lapsesChecked = ctx.deps.cache.liveness?.lapses ?? 0;
  }

  /**
   * Resolves once new sends may go out: not blocked, nothing being sent alone, not full, the window not full, and this
   * process live (what a lapse may have taken checked); or once the session ended.
   */
  async open(): Promise<void> {
    const liveness = this.ctx.deps.cache.liveness;
    for (;;) {
      if (this.ctx.ended) return;
      if (this.blocked || this.sendingAlone || this.fullSince !== undefined || this.inFlight >= Math.floor(this.window)) {
        await this.opened.wait();
      } else if (liveness !== undefined && !liveness.live) {
        await Promise.race([liveness.untilLive(), this.opened.wait()]);
      } else if (liveness !== undefined && liveness.lapses !== this.lapsesChecked) {
        const lapses = liveness.lapses;
        // Renewing every stamp in flight ends the session if another process took one over meanwhile; a renewal that
        // could not reach the cache is tried again.
        if (await renewStamps(this.ctx, true)) this.lapsesChecked = lapses;
        else await this.opened.wait(STAMP_CHECK_RETRY_MS);
      } else {
        return;
      }
    }
  }

  /** Sending through the window a full refusal opened (not yet back to unbounded): one message per send, no batches. */
  get windowed(): boolean {
    return this.window !== Number.POSITIVE_INFINITY;
  }

  /** What holds the gate, for the supervisor's state and status. */
  get conditions(): { blocked: boolean; fullSince: number | undefined } {
    return { blocked: this.blocked, fullSince: this.fullSince };
  }

  /** Flow control from the target's broker. Returns whether it changed. */
  setBlocked(blocked: boolean, reason?: string): boolean {
    if (blocked === this.blocked) return false;
    this.blocked = blocked;
    if (blocked) {
      this.ctx.log.warn({ reason }, 'target broker blocked publishing (flow control): holding messages');
    } else {
      this.ctx.log.info('target broker unblocked publishing: resuming');
      this.opened.wake();
    }
    return true;
  }

  /** The session ended: every wait of the gate returns. */
  ended(): void {
    this.opened.wake();
    this.idle.wake();
    this.roomPause.wake();
  }

  /**
   * After the end, before the target is closed: waits (at most `ms`) for the sends still in flight to be answered. A
   * session that ended on the source's side (its connection lost) has a healthy target whose confirmations are on
   * their way; closing it first would turn each into an unknown outcome, its redelivery forwarded again, flagged. A
   * confirmed one is committed instead (./teardown.ts), and its redelivery dropped as a duplicate.
   */
  async settleInFlight(ms: number): Promise<void> {
    const deadline = Date.now() + ms;
    while (this.inFlight > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return;
      await this.idle.wait(left);
    }
  }

  /** Sends one message, pipelined: its outcome is handled when the target answers. */
  send(sending: Forwarding): void {
    void this.attempt(sending).then((result) => {
      if (result.outcome === 'confirmed') void this.confirmed(sending, performance.now());
      else this.failed(sending, result);
    });
  }

  /**
   * Sends messages together when the target can (one transaction, one flush), else one by one. Each member is then
   * handled as a single send with its outcome would be; the confirmed ones first, so that their IDs are committed
   * and their deliveries acked whatever happened to the others.
   */
  sendBatch(batch: Forwarding[]): void {
    const target = this.ctx.deps.target;
    if (!target.sendBatch || batch.length === 1) {
      for (const sending of batch) this.send(sending);
      return;
    }
    for (const sending of batch) this.writing(sending);
    this.started();
    target.sendBatch(
      batch.map((s) => s.outgoing),
      batch.map((s) => s.job.route?.route),
    ).then(
      (results) => {
        this.settled();
        this.batchSettled(batch, results);
      },
      (err: unknown) => {
        // Against the port's contract (sendBatch never rejects): nothing is known of any member.
        this.settled();
        this.ctx.fail(err instanceof TransientError ? err : new TransientError(`the target's batch send failed: ${String(err)}`, { cause: err, outcomeUnknown: true }));
      },
    );
  }

  private batchSettled(batch: Forwarding[], results: readonly BatchMemberResult[]): void {
    const ctx = this.ctx;
    if (results.length !== batch.length) {
      ctx.fail(new TransientError(`the target answered a batch of ${batch.length} with ${results.length} results`, { outcomeUnknown: true }));
      return;
    }
    const now = performance.now();
    batch.forEach((sending, i) => {
      if (results[i]!.outcome === 'confirmed') void this.confirmed(sending, now);
    });
    batch.forEach((sending, i) => {
      const result = results[i]!;
      if (result.outcome === 'confirmed') return;
      if (result.outcome === 'not-sent') sending.sent = false;
      this.failed(sending, result);
    });
  }

  /**
   * Marks a message sent, about to be written. Reserved before a lapse of this process's liveness (or written while
   * it does not hold), its reservation may have been taken over by another process: the copy goes out flagged.
   */
  private writing(sending: Forwarding): void {
    sending.sent = true;
    const liveness = this.ctx.deps.cache.liveness;
    if (liveness !== undefined && sending.id !== undefined && sending.outgoing.headers[POSSIBLE_DUPLICATE_HEADER] !== true) {
      if (!liveness.live || liveness.lapses !== sending.lapses) {
        sending.outgoing = withPossibleDuplicateFlag(sending.outgoing);
        this.ctx.deps.metrics.possibleDuplicates.inc({ bridge: this.ctx.cfg.name });
      }
    }
  }

  /** The one way a message is written to the target: marked sent, counted in flight, its outcome classified. */
  private async attempt(sending: Forwarding): Promise<BatchMemberResult> {
    this.writing(sending);
    this.started();
    try {
      await this.ctx.deps.target.send(sending.outgoing, sending.job.route?.route);
      return CONFIRMED;
    } catch (err) {
      const result = failedMember(err);
      // Known not to have reached the target: its reservation can be given back as certain.
      if (result.outcome === 'not-sent') sending.sent = false;
      return result;
    } finally {
      this.settled();
    }
  }

  private started(): void {
    this.inFlight += 1;
  }

  private settled(): void {
    this.inFlight -= 1;
    if (this.inFlight === 0) this.idle.wake();
    if (this.inFlight === Math.floor(this.window) - 1) this.opened.wake();
  }

  /** The target confirmed it: its ID is committed and its delivery acked (a commit that fails ends the session). */
  private confirmed(sending: Forwarding, now: number): Promise<void> {
    if (this.window !== Number.POSITIVE_INFINITY) {
      // One more per window's worth of confirmations (TCP's congestion avoidance): a target near full sees the window
      // grow slowly, and refuses a few messages, not a pipeline of them.
      const grown = this.window + 1 / this.window;
      this.window = grown >= this.ctx.cfg.prefetch ? Number.POSITIVE_INFINITY : grown;
      this.opened.wake();
    }
    confirm(this.ctx, sending, now);
    return this.ctx.ended ? Promise.resolve() : commitAndAck(this.ctx, sending.job, sending.id);
  }

  /** A pipelined send (or batch member) failed: what the refusal policy says. */
  private failed(sending: Forwarding, result: Failed): void {
    const ctx = this.ctx;
    if (ctx.ended) return;
    // A batch member known not sent, through no fault of its own (its transaction was refused for another): again.
    if (result.outcome === 'not-sent' && result.error === undefined) {
      this.again(sending);
      return;
    }
    const err = result.error;
    switch (refusalAction(err, sending.attempts, ctx.cfg.maxDeliveryAttempts)) {
      case 'end-session':
        ctx.fail(err);
        return;
      case 'wait-for-room':
        this.hold(sending, err as MessageRejectedError);
        return;
      case 'isolate':
        // Not proven guilty: no attempt is counted. It may have reached the target, so its resend is flagged.
        sending.outgoing = withPossibleDuplicateFlag(sending.outgoing);
        if (!this.sendingAlone) ctx.log.warn('target refused one of several messages without saying which: resending them one at a time');
        this.again(sending);
        return;
      case 'resend':
        this.countRefusal(sending, err as MessageRejectedError, true);
        this.again(sending);
        return;
      case 'dead-letter':
        this.countRefusal(sending, err as MessageRejectedError, false);
        void deadLetter(ctx, sending, err as MessageRejectedError).catch((e: unknown) => ctx.fail(e));
        return;
    }
  }

  /** Sends a message again, alone (or, while the target is full, with the held ones). */
  private again(sending: Forwarding): void {
    if (this.fullSince !== undefined) {
      this.keep(sending);
      return;
    }
    this.alone.push(sending);
    void this.sendQueuedAlone().catch((e: unknown) => this.ctx.fail(e));
  }

  /** Counts a refusal of the message against max-delivery-attempts; `resending`: it goes out again (logged). */
  private countRefusal(sending: Forwarding, err: MessageRejectedError, resending: boolean): void {
    const ctx = this.ctx;
    sending.attempts += 1;
    ctx.deps.metrics.rejections.inc({ bridge: ctx.cfg.name, reason: err.reason });
    if (resending) {
      ctx.log.warn({ duplicateId: sending.id, attempt: sending.attempts, reason: err.reason, err }, 'target refused a message: sending it again');
    }
  }

  private async untilIdle(): Promise<void> {
    while (this.inFlight > 0 && !this.ctx.ended) await this.idle.wait();
  }

  /**
   * Sends one message with nothing else in flight, until it is settled (confirmed and acked, or refused as often as
   * max-delivery-attempts allows and dead-lettered) or the target refuses it as full. Alone on the target, a refusal
   * names this message, whatever the broker says about the others. Rejects when the session must end.
   */
  private async sendAlone(sending: Forwarding): Promise<AloneOutcome> {
    const ctx = this.ctx;
    for (;;) {
      if (ctx.ended) return { kind: 'ended' };
      const result = await this.attempt(sending);
      if (result.outcome === 'confirmed') {
        await this.confirmed(sending, performance.now());
        return { kind: 'settled' };
      }
      const err = result.error ?? new TransientError('the target did not take the message', { outcomeUnknown: true });
      switch (refusalAction(err, sending.attempts, ctx.cfg.maxDeliveryAttempts, true)) {
        case 'end-session':
        case 'isolate': // never when alone
          throw err;
        case 'wait-for-room':
          return { kind: 'full', error: err as MessageRejectedError };
        case 'resend':
          this.countRefusal(sending, err as MessageRejectedError, true);
          continue;
        case 'dead-letter':
          this.countRefusal(sending, err as MessageRejectedError, false);
          await deadLetter(ctx, sending, err as MessageRejectedError);
          return { kind: 'settled' };
      }
    }
  }

  /** Sends the queued messages one at a time, each once nothing else is in flight; runs once at a time. */
  private async sendQueuedAlone(): Promise<void> {
    if (this.sendingAlone) return;
    this.sendingAlone = true;
    try {
      while (this.alone.length > 0 && !this.ctx.ended) {
        await this.untilIdle();
        const next = this.alone.shift();
        if (next === undefined) continue;
        const outcome = await this.sendAlone(next);
        if (outcome.kind === 'full') this.hold(next, outcome.error);
      }
    } finally {
      this.sendingAlone = false;
      this.opened.wake();
    }
  }

  /** Holds a message the target refused as full, and starts the wait for room (once) if it is not running. */
  private hold(sending: Forwarding, err: MessageRejectedError): void {
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
  private keep(sending: Forwarding): void {
    const seq = sending.job.delivery.seq;
    let i = this.held.length;
    while (i > 0 && this.held[i - 1]!.job.delivery.seq > seq) i -= 1;
    this.held.splice(i, 0, sending);
  }

  private async waitForRoom(): Promise<void> {
    if (this.waitingForRoom) return;
    this.waitingForRoom = true;
    const ctx = this.ctx;
    let tries = 0;
    try {
      while (this.held.length > 0 && !ctx.ended) {
        // The sends still in flight settle first; those the target refuses as full join the held ones.
        await this.untilIdle();
        if (ctx.ended) return;
        await this.roomPause.wait(pauseBefore(tries, ctx.cfg.maxRetryInterval));
        if (ctx.ended) return;
        // One message probes for room; once the target takes it, the others go out as usual, pipelined, in order:
        // those it refuses as full again come back here. Sending them one at a time instead would cap the rate at one
        // round trip (confirm and commit) per message, below what a consumer draining the queue makes room for.
        const probe = this.held[0]!;
        const outcome = await this.sendAlone(probe);
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
      this.waitingForRoom = false;
      if (this.held.length === 0 && this.fullSince !== undefined && !ctx.ended) this.roomTaken();
      if (!ctx.ended) {
        // Debug: it comes after every probe that found room, many times a second while a consumer drains a full queue.
        ctx.log.debug('target takes messages again: resuming');
        ctx.deps.observer?.conditionChanged();
      }
      this.opened.wake();
    }
  }

  private roomTaken(): void {
    this.fullSince = undefined;
    this.fullEndedAt = Date.now();
  }
}
